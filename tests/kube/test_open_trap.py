"""The open-reservation trap on a real kube-apiserver and the EC2 test server (moto over HTTP): a
cluster whose EC2NodeClass selects a targeted reservation and whose Karpenter launch templates opt
out of open matching, with on-demand nodes beside an idle open ODCR of their type and zone. The trap
is found, its dollars are the units paid twice x the on-demand price, and the generated YAML,
applied as `kubectl apply --server-side` applies it, makes the next plan launch into the open
reservation as reserved capacity."""

import pytest
import yaml
from django.utils.timezone import now as utc_now

from fleet.scope import default_cluster
from reservations import open_trap
from reservations.models import EC2NodeClass
from scheduling.adapters.ec2.launch import KARPENTER_CLUSTER_TAG
from scheduling.adapters.ec2.sync import sync_catalogue, sync_reservations
from scheduling.adapters.kube.resources import EC2NODECLASS, NODE, NODEPOOL
from scheduling.adapters.kube.sync import ClusterSync
from scheduling.loop.engine_run import simulate_readable
from scheduling.queries import on_demand_prices
from scheduling.world import current_world
from tests.faults.worlds import launchable_spec
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers
from tests.support.clusters import use_kube_server

from . import helpers as h

pytestmark = [pytest.mark.kube, pytest.mark.django_db]
ZONE, TYPE = "us-east-1a", "m5.large"
BUSY = {"key": "example.com/busy", "value": "true", "effect": "NoSchedule"}  # the paid nodes take no new pod


@pytest.fixture(autouse=True)
def cluster_settings(settings, aws_test_credentials, kube_server):
    use_kube_server(kube_server)
    settings.KARPWEB_PROVIDER = "aws"
    settings.KARPWEB_MODE = "observe"
    settings.KARPWEB_KARPENTER = "absent"


def paid_node(rest, name, pool, instance_id):
    rest.create(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "karpenter.sh/nodepool": pool, "karpenter.sh/capacity-type": "on-demand",
        "node.kubernetes.io/instance-type": TYPE, "topology.kubernetes.io/zone": ZONE, "karpenter.sh/registered": "true",
        "karpenter.sh/initialized": "true"}},
        "spec": {"providerID": f"aws:///{ZONE}/{instance_id}", "taints": [BUSY]}})
    allocatable = {"cpu": "1930m", "memory": "7Gi", "pods": "29"}
    rest.patch(NODE, name, {"status": {"capacity": allocatable, "allocatable": allocatable, "conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "",
         "lastHeartbeatTime": "2026-11-25T12:00:00Z", "lastTransitionTime": "2026-11-25T12:00:00Z"}]}},
        subresource="status")


def server_side_apply(rest, documents):
    """What `kubectl apply --server-side --force-conflicts --field-manager=karpweb-open-trap -f` sends."""
    for doc in documents:
        resource = EC2NODECLASS if doc["kind"] == "EC2NodeClass" else NODEPOOL
        rest.request("PATCH", resource.path(doc["metadata"]["name"]), body=doc,
                     query={"fieldManager": "karpweb-open-trap", "force": "true"},
                     content_type="application/apply-patch+yaml")


def plan_for(pool, now):
    claims = simulate_readable(current_world(now), now)["nodeClaims"]
    return [claim["launch"] for claim in claims if claim["nodePool"] == pool]


def test_trap_found_on_a_cluster_that_opts_out_and_the_applied_patch_plans_into_the_open_reservation(
        rest, adapter, provider, raw_ec2, world, unique):
    now = utc_now()
    sync_catalogue(provider, now=now)
    targeted = world.add_reservation("m5.xlarge", ZONE, 1, tags={"team": unique})
    open_rid = world.add_reservation(TYPE, ZONE, 2, match="open")
    pool = f"trap-{unique}"
    rest.create(EC2NODECLASS, {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": pool},
                               "spec": {**launchable_spec(provider), "capacityReservationSelectorTerms": [{"id": targeted}]}})
    rest.create(NODEPOOL, {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": pool},
                           "spec": {"template": {"spec": {
                               "nodeClassRef": {**h.NODE_CLASS_REF, "name": pool},
                               "requirements": [
                                   {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                                   {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [TYPE]},
                                   {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]}]}}}})
    for i in range(3):
        paid_node(rest, f"{pool}-paid-{i}", pool, f"i-{unique}{i:09x}")
    cluster = default_cluster().name
    raw_ec2.create_launch_template(
        LaunchTemplateName=f"karpenter.k8s.aws/{unique}",
        LaunchTemplateData={"ImageId": "ami-12c6146b", "CapacityReservationSpecification": {"CapacityReservationPreference": "none"}},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": [{"Key": KARPENTER_CLUSTER_TAG, "Value": cluster}]}])
    ns = h.namespace(rest, pool)
    h.pod(rest, ns, "app", cpu="500m", node_selector={"karpenter.sh/nodepool": pool})

    sync = ClusterSync(adapter)
    sync.sync_once()
    EC2NodeClass.objects.filter(name=pool).update(spec={**launchable_spec(provider), "capacityReservationSelectorTerms": [{"id": targeted}]})
    sync_reservations(provider, now)
    assert open_trap.sync_launch_templates(provider, now)["launch_templates"] >= 1
    assert [launch["capacityType"] for launch in plan_for(pool, now)] == ["on-demand"]  # paid beside the idle units

    [trap] = [t for t in open_trap.find(now) if t.reservation_id == open_rid]
    assert {f"{pool}-paid-{i}" for i in range(3)} <= set(trap.paid_nodes)
    price = on_demand_prices([TYPE])[(TYPE, ZONE)]
    assert trap.units == 2 and trap.dollars_per_hour == pytest.approx(2 * price)
    assert f"launch template karpenter.k8s.aws/{unique} carries CapacityReservationPreference: none" in trap.opted_out_because
    assert any(reason.startswith(f"EC2NodeClass {pool} selects reservations") for reason in trap.opted_out_because)

    # Only this test's objects: other tests' on-demand nodes of the type and zone share the API server.
    documents = [doc for doc in yaml.safe_load_all(open_trap.fix_yaml(trap)) if doc and doc["metadata"]["name"] == pool]
    assert [(d["kind"], d["metadata"]["name"]) for d in documents] == [("EC2NodeClass", pool), ("NodePool", pool)]
    server_side_apply(rest, documents)
    live_class, live_pool = rest.get(EC2NODECLASS, pool), rest.get(NODEPOOL, pool)
    assert live_class["spec"]["capacityReservationSelectorTerms"] == [{"id": targeted}, {"id": open_rid}]
    assert live_class["spec"]["amiSelectorTerms"] == launchable_spec(provider)["amiSelectorTerms"]  # the rest kept
    assert live_pool["spec"]["template"]["spec"]["requirements"][0]["values"] == ["on-demand", "reserved"]
    assert live_pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] == pool
    stale = documents[0]  # applied again with the version it was generated on: refused, the class changed since
    with pytest.raises(Exception) as refused:
        server_side_apply(rest, [stale])
    assert "409" in str(refused.value) or "Conflict" in str(refused.value)

    sync.sync_once()
    sync_reservations(provider, now)  # the class's status now names the open reservation
    launches = plan_for(pool, now)
    assert [(launch["capacityType"], launch.get("reservationID")) for launch in launches] == [("reserved", open_rid)]
    # Fixed for this test's pool: its nodes are no longer paid twice, its objects need no patch (other
    # tests' on-demand nodes of the type and zone share the API server and may still be beside it).
    left = [t for t in open_trap.find(now) if t.reservation_id == open_rid and t.cluster == cluster]
    assert not any(node.startswith(f"{pool}-paid-") for t in left for node in t.paid_nodes)
    assert not any(patch.name == pool for t in left for patch in t.patches)
