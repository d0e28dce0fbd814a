"""The open-reservation trap's detection, dollars and fix (scheduling/engine/opentrap.py), pure."""

from scheduling.engine.opentrap import (
    ClusterFacts, LaunchTemplateFacts, NodeClassFacts, NodePoolFacts, OpenReservation, PaidNode,
    capacity_types_with_reserved, find_traps, opted_out, patch_diff, patch_object, total_dollars_per_hour,
)

CT = "karpenter.sh/capacity-type"
ON_DEMAND_ONLY = ({"key": CT, "operator": "In", "values": ["on-demand"]},
                  {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]})


def cluster(name="prod", *, terms=({"id": "cr-targeted"},), selected=("cr-targeted",), open_mode=False, paid=3,
            requirements=ON_DEMAND_ONLY, templates=(), zone="us-east-1a", instance_type="m5.large", account="111111111111"):
    return ClusterFacts(
        name=name, account=account,
        node_classes=(NodeClassFacts("default", tuple(terms), tuple(selected), open_mode, "41"),),
        node_pools=(NodePoolFacts("general", "default", tuple(requirements), "42"),),
        paid_nodes=tuple(PaidNode(f"{name}-node-{i}", instance_type, zone, "general") for i in range(paid)),
        launch_templates=tuple(templates))


def reservation(idle=2, clusters=("prod",), price=0.096, rid="cr-open"):
    return OpenReservation(rid, "m5.large", "us-east-1a", idle, price, tuple(clusters))


def test_trap_found_where_a_class_selects_reservations_and_dollars_are_min_idle_paid_times_price():
    [trap] = find_traps([cluster(paid=3)], [reservation(idle=2)])
    assert (trap.cluster, trap.reservation_id, trap.idle, len(trap.paid_nodes)) == ("prod", "cr-open", 2, 3)
    assert trap.units == 2 and trap.dollars_per_hour == round(2 * 0.096, 6)
    assert "EC2NodeClass default selects reservations" in trap.opted_out_because[0]
    [fewer] = find_traps([cluster(paid=1)], [reservation(idle=5)])
    assert fewer.units == 1 and fewer.dollars_per_hour == 0.096


def test_no_trap_when_the_cluster_does_not_opt_out_of_open_matching():
    no_terms = cluster(terms=(), selected=())
    assert opted_out(no_terms) == () and find_traps([no_terms], [reservation()]) == []
    # Open mode: karpweb's on-demand launches use preference open, so the class does not opt out.
    assert find_traps([cluster(open_mode=True)], [reservation()]) == []


def test_launch_templates_with_preference_none_opt_a_cluster_out():
    facts = cluster(terms=(), selected=(), templates=[LaunchTemplateFacts("karpenter.k8s.aws/123", "none"),
                                                        LaunchTemplateFacts("karpenter.k8s.aws/456", "open")])
    [trap] = find_traps([facts], [reservation()])
    assert trap.opted_out_because == ("launch template karpenter.k8s.aws/123 carries CapacityReservationPreference: none",)
    open_only = cluster(terms=(), selected=(), templates=[LaunchTemplateFacts("lt", "open")])
    assert find_traps([open_only], [reservation()]) == []


def test_other_type_zone_no_idle_unit_or_no_nodepool_is_no_trap():
    assert find_traps([cluster(zone="us-east-1b")], [reservation()]) == []
    assert find_traps([cluster(instance_type="m5.xlarge")], [reservation()]) == []
    assert find_traps([cluster()], [reservation(idle=0)]) == []
    assert find_traps([cluster()], [reservation(clusters=())]) == []  # its account does not see it
    orphan = ClusterFacts("prod", "1", cluster().node_classes, cluster().node_pools,
                          (PaidNode("mng-1", "m5.large", "us-east-1a", ""),))
    assert find_traps([orphan], [reservation()]) == []


def test_already_launchable_into_the_reservation_is_no_trap():
    fixed = cluster(terms=({"id": "cr-targeted"}, {"id": "cr-open"}), selected=("cr-targeted", "cr-open"),
                    requirements=({"key": CT, "operator": "In", "values": ["on-demand", "reserved"]},))
    assert find_traps([fixed], [reservation()]) == []
    # Selected but the pool leaves out reserved: still trapped, only the NodePool needs the change.
    [trap] = find_traps([cluster(terms=({"id": "cr-open"},), selected=("cr-open",))], [reservation()])
    assert [p.kind for p in trap.patches] == ["NodePool"]


def test_idle_units_go_to_the_cluster_with_most_paid_nodes_and_are_never_counted_twice():
    traps = find_traps([cluster("a", paid=1), cluster("b", paid=3)], [reservation(idle=3, clusters=("a", "b"))])
    assert [(t.cluster, t.idle, t.units) for t in traps] == [("b", 3, 3)]
    traps = find_traps([cluster("a", paid=2), cluster("b", paid=3)], [reservation(idle=4, clusters=("a", "b"))])
    assert [(t.cluster, t.units) for t in traps] == [("b", 3), ("a", 1)]
    assert total_dollars_per_hour(traps) == round(4 * 0.096, 6)


def test_unpriced_reservation_counts_units_but_no_dollars():
    [trap] = find_traps([cluster()], [reservation(price=None)])
    assert trap.units == 2 and trap.dollars_per_hour == 0.0 and "no on-demand list price" in trap.basis


def test_the_fix_adds_an_id_term_and_reserved_keeping_what_is_there():
    groups = {"resourceGroupARN": "arn:aws:resource-groups:us-east-1:111111111111:group/g"}
    [trap] = find_traps([cluster(terms=({"tags": {"team": "ml"}}, groups), selected=())], [reservation()])
    node_class, pool = trap.patches
    assert node_class.after == [{"tags": {"team": "ml"}}, groups, {"id": "cr-open"}]
    obj = patch_object(node_class)
    assert obj == {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                   "metadata": {"name": "default", "resourceVersion": "41"},
                   "spec": {"capacityReservationSelectorTerms": [{"tags": {"team": "ml"}}, {"id": "cr-open"}]}}
    pool_obj = patch_object(pool)
    assert pool_obj["apiVersion"] == "karpenter.sh/v1" and pool_obj["metadata"]["resourceVersion"] == "42"
    assert pool_obj["spec"]["template"]["spec"]["requirements"] == [
        {"key": CT, "operator": "In", "values": ["on-demand", "reserved"]}, ON_DEMAND_ONLY[1]]
    assert '+    "id": "cr-open"' in patch_diff(node_class).splitlines()
    assert '+      "reserved"' in patch_diff(pool).splitlines() and '-      "on-demand"' in patch_diff(pool).splitlines()


def test_capacity_type_requirement_forms():
    assert capacity_types_with_reserved([]) is None  # no requirement: every capacity type is allowed
    assert capacity_types_with_reserved([{"key": CT, "operator": "Exists"}]) is None
    assert capacity_types_with_reserved([{"key": CT, "operator": "NotIn", "values": ["spot", "reserved"]}]) == [
        {"key": CT, "operator": "NotIn", "values": ["spot"]}]
    assert capacity_types_with_reserved([{"key": CT, "operator": "NotIn", "values": ["reserved"]}]) == []
    assert capacity_types_with_reserved([{"key": CT, "operator": "In", "values": ["spot", "on-demand"]}]) == [
        {"key": CT, "operator": "In", "values": ["spot", "on-demand", "reserved"]}]
