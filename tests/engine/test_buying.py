"""Issue #50, Buy: which Capacity Block offerings would hold a pending accelerator gang (pure logic):
gangs grouped as JobSets, LeaderWorkerSets, pod groups and controllers group them, offerings that hold
every pod at once (the type's room, the offering's count, the pods' own node selection), cheapest first."""

from datetime import datetime, timedelta, timezone
from decimal import Decimal

from scheduling.engine import parse_world
from scheduling.engine.buying import accelerator_gangs, options, parse_offerings
from tests.engine.builders import instance_type, pod, world

NOW = datetime(2026, 11, 21, 12, tzinfo=timezone.utc)
P5 = instance_type("p5.48xlarge", "192", "2048Gi", zones=("us-east-1a", "us-east-1b"), od=98.32,
                   resources={"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"})
TRN2 = instance_type("trn2.48xlarge", "192", "2048Gi", zones=("us-east-1a",), od=44.7,
                     resources={"aws.amazon.com/neuron": "16"})


def trainer(name, gpus="8", *, labels=None, owner=None, node=None, selector=None):
    item = pod(name, cpu="90", memory="1000Gi", extra={"nvidia.com/gpu": gpus}, labels=labels, node=node, selector=selector)
    if owner:
        item["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": owner[0], "name": owner[1], "controller": True}]
    return item


def offering(oid, itype="p5.48xlarge", count=2, *, zone="us-east-1a", start=NOW + timedelta(hours=2), hours=48, fee="9000.00",
             ultraserver=None):
    item = {"CapacityBlockOfferingId": oid, "InstanceType": itype, "AvailabilityZone": zone, "InstanceCount": count,
            "StartDate": start.isoformat(), "EndDate": (start + timedelta(hours=hours)).isoformat(),
            "CapacityBlockDurationHours": hours, "UpfrontFee": fee, "CurrencyCode": "USD", "Tenancy": "default"}
    if ultraserver:
        item.update(UltraserverType=ultraserver, UltraserverCount=1)
    return item


def parsed(pods):
    w = parse_world(world(instance_types=[P5, TRN2], pods=pods, now=NOW.isoformat()))
    return w, {it.name: it for it in w.instance_types}


def test_gangs_group_by_jobset_pod_group_or_controller_and_leave_cpu_and_bound_pods_out():
    w, _ = parsed([trainer("a-0", labels={"jobset.sigs.k8s.io/jobset-name": "llm"}),
                   trainer("a-1", labels={"jobset.sigs.k8s.io/jobset-name": "llm"}),
                   trainer("b-0", owner=("Job", "finetune")), trainer("b-1", owner=("Job", "finetune")),
                   trainer("c-0", labels={"scheduling.x-k8s.io/pod-group": "sweep"}),
                   trainer("bound", node="gpu-1"), pod("web-0")])
    gangs = {(g.name, tuple(p.name for p in g.pods)) for g in accelerator_gangs(w.pods)}
    assert gangs == {("jobset/llm", ("a-0", "a-1")), ("Job/finetune", ("b-0", "b-1")), ("scheduling/sweep", ("c-0",))}


def test_the_offerings_that_hold_the_whole_gang_cheapest_first():
    w, types = parsed([trainer(f"t-{i}", owner=("Job", "pretrain")) for i in range(3)])
    (gang,) = accelerator_gangs(w.pods)
    found = options(gang, parse_offerings([
        offering("too-small", count=2, fee="100.00"),  # 3 pods of 8 GPUs need 3 p5s
        offering("dear", count=4, fee="30000.00"),
        offering("cheap-later", count=3, fee="20000.00", start=NOW + timedelta(days=3)),
        offering("wrong-accelerator", itype="trn2.48xlarge", count=4, fee="1.00"),
        offering("over", count=3, start=NOW - timedelta(days=3), hours=24, fee="1.00"),  # already ended
    ]), types, NOW)
    assert [o.offering.offering_id for o in found] == ["cheap-later", "dear"]
    best = found[0]
    assert best.nodes == 3 and best.starts_in == timedelta(days=3)
    assert best.fee_per_instance_hour == Decimal("138.8889")  # 20000 / (3 x 48)


def test_the_pods_own_zone_selection_rules_out_an_offering_elsewhere():
    w, types = parsed([trainer("t-0", selector={"topology.kubernetes.io/zone": "us-east-1b"}, owner=("Job", "j"))])
    (gang,) = accelerator_gangs(w.pods)
    found = options(gang, parse_offerings([offering("in-a"), offering("in-b", zone="us-east-1b")]), types, NOW)
    assert [o.offering.offering_id for o in found] == ["in-b"]


def test_half_node_pods_share_instances():
    w, types = parsed([trainer(f"t-{i}", gpus="4", owner=("Job", "j")) for i in range(4)])
    for p in w.pods:
        p.requests["cpu"] = 50_000
    (gang,) = accelerator_gangs(w.pods)
    (option,) = options(gang, parse_offerings([offering("two", count=2)]), types, NOW)
    assert option.nodes == 2


def test_offerings_missing_what_they_need_are_skipped():
    good = offering("good")
    assert [o.offering_id for o in parse_offerings([good, {"CapacityBlockOfferingId": "half"},
                                                     {**good, "UpfrontFee": "n/a"}, {**good, "InstanceCount": 0}])] == ["good"]


# --- buying: UltraServer asks, the NodePools that take a block, compared with waiting ------------------------------


def test_ultraserver_only_types_are_asked_as_enough_ultraservers():
    from scheduling.engine.buying import ultraserver_asks

    assert ultraserver_asks("trn2u.48xlarge", 5) == [("u-trn2x64", 2)]
    assert ultraserver_asks("p6e-gb200.36xlarge", 10) == [("u-p6e-gb200x36", 2), ("u-p6e-gb200x72", 1)]
    assert ultraserver_asks("p5.48xlarge", 5) == []


def test_a_gangs_node_selection_decides_the_types_asked_for():
    from scheduling.engine.buying import admits_type

    w, types = parsed([trainer("a-0", owner=("Job", "a"), selector={"node.kubernetes.io/instance-type": "trn2.48xlarge"})])
    [gang] = accelerator_gangs(w.pods)
    assert not admits_type(gang, types["p5.48xlarge"]) and admits_type(gang, types["trn2.48xlarge"])


def test_a_pool_admits_a_block_on_the_keys_the_block_decides():
    from scheduling.engine.buying import block_labels, pool_admits
    from scheduling.engine.requirements import Requirement

    labels = block_labels({"node.kubernetes.io/instance-type": "p5.48xlarge"}, "us-east-1a")
    reserved = Requirement.of("karpenter.sh/capacity-type", "In", ["reserved"])
    spot = Requirement.of("karpenter.sh/capacity-type", "In", ["spot"])
    team = Requirement.of("team", "In", ["ml"])  # the pool's own label: its nodes get it
    assert pool_admits([reserved, team], labels) and not pool_admits([spot], labels)
    assert not pool_admits([Requirement.of("topology.kubernetes.io/zone", "In", ["us-east-1b"])], labels)


def test_compared_with_waiting_says_when_and_what_on_demand_would_list_at():
    from scheduling.engine.buying import compared_with_waiting

    start = NOW + timedelta(hours=23, minutes=30)
    offered = compared_with_waiting(start, NOW, 24, Decimal("1510.27"), 2, 98.32)
    assert offered.on_demand_cost == Decimal("4719.36")
    assert offered.words().startswith("With the block the gang runs in 23 h 30 min, for 24 h.")
    none = compared_with_waiting(start, NOW, 24, Decimal("1510.27"), 2, None).words()
    assert "no capacity of this type is known to free up" in none
    assert "starts now" in compared_with_waiting(NOW - timedelta(minutes=1), NOW, 24, Decimal(1), 1, None).words()
