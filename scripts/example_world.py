"""The example NodePools (examples/nodepools/*.yaml) as a WORLD.json for `simulate` and the what-if page.

    .venv/bin/python scripts/example_world.py > examples/nodepools/world.json

The instance types are EC2's own DescribeInstanceTypes answers (moto's copy of them, a dev
dependency) for the types the pools can use, as a `describeInstanceTypes` key, so the engine derives
labels and resources the way the EC2 sync does; on-demand prices are the bundled us-east-1 list
prices, else the sync's estimate; spot at 35 % of on-demand. The test tests/examples keeps
world.json equal to what this prints.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "nodepools"
NOW = "2026-11-21T12:00:00Z"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
SIZES = ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge")
FAMILIES = ("c6i", "c6a", "c7i", "m6i", "m6a", "m7i", "r6i", "r7i", "c7g", "m7g", "m7i-flex")
EXTRA_TYPES = ("c6id.2xlarge", "c6id.8xlarge", "m6id.8xlarge", "g5.xlarge", "g5.2xlarge", "g5.12xlarge",
               "g6e.xlarge", "inf2.xlarge", "inf2.8xlarge", "p5.48xlarge", "t3.large")
TRAINING_BLOCK = {
    "CapacityReservationId": "cr-0example0training01", "OwnerId": "123456789012", "InstanceType": "p5.48xlarge",
    "AvailabilityZone": "us-east-1a", "AvailableInstanceCount": 2, "TotalInstanceCount": 2, "State": "active",
    "InstanceMatchCriteria": "targeted", "ReservationType": "capacity-block", "StartDate": "2026-11-21T11:30:00Z",
    "EndDate": "2026-11-24T11:30:00Z", "Tags": [{"Key": "purpose", "Value": "llm-training"}],
}


def documents(name: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all((EXAMPLES / name).read_text()) if doc]


def pods_of(deployment: dict) -> list[dict]:
    """The pods a Deployment would run, pending (as the scheduler first sees them)."""
    meta, spec = deployment["metadata"], deployment["spec"]
    template = spec["template"]
    return [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"{meta['name']}-{index}", "namespace": meta.get("namespace", "default"),
                          "labels": dict(template["metadata"].get("labels") or {}),
                          "ownerReferences": [{"kind": "ReplicaSet", "name": f"{meta['name']}-rs", "controller": True}]},
             "spec": template["spec"], "status": {"phase": "Pending"}}
            for index in range(spec.get("replicas", 1))]


def kubernetes_objects() -> dict[str, list[dict]]:
    return {
        "ec2NodeClasses": documents("nodeclasses.yaml"),
        "nodePools": documents("nodepools.yaml"),
        "pods": [pod for deployment in documents("workloads.yaml") for pod in pods_of(deployment)],
    }


def described_types() -> list[dict]:
    import moto

    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    known = json.loads(gzip.decompress(path.read_bytes()))
    names = [f"{family}.{size}" for family in FAMILIES for size in SIZES] + list(EXTRA_TYPES)
    return [known[name] for name in sorted(set(names)) if name in known]


def instance_types(described: list[dict]) -> list[dict]:
    from scheduling.adapters.ec2.catalogue import bundled_prices, estimate_prices, instance_type_info

    infos = [instance_type_info(raw) for raw in described]
    prices = {info.name: bundled_prices()[info.name] for info in infos if info.name in bundled_prices()}
    prices.update(estimate_prices(infos, prices))
    types = []
    for info in infos:
        offerings = [{"capacityType": "on-demand", "zone": zone, "price": prices[info.name]} for zone in ZONES]
        if "spot" in info.usage_classes:
            offerings += [{"capacityType": "spot", "zone": zone, "price": round(prices[info.name] * 0.35, 5)}
                          for zone in ZONES]
        types.append({"name": info.name, "offerings": offerings})
    return types


def world() -> dict:
    described = described_types()
    return {"now": NOW, "describeInstanceTypes": {"InstanceTypes": described}, "instanceTypes": instance_types(described),
            "capacityReservations": [TRAINING_BLOCK], **kubernetes_objects(), "nodes": []}


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    json.dump(world(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
