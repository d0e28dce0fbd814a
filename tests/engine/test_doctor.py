"""The reservation doctor (scheduling/engine/doctor.py): each finding appears for its cause and goes
when the cause is fixed."""

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from scheduling.engine import doctor as d
from scheduling.engine.reservations import CapacityReservation

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)
RESERVED_POOL = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]}]


def cr(rid, available=2, total=2, criteria="targeted", tags=None, state="active", itype="m5.large", zone="us-east-1a"):
    return CapacityReservation(rid, itype, zone, available, total, owner_id="111122223333", state=state,
                               instance_match_criteria=criteria, tags=tags or {})


def facts(reservations=(), classes=(), pools=None, **extra):
    pools = [d.NodePoolFact("default", "default", RESERVED_POOL)] if pools is None else pools
    return d.DoctorFacts(cluster="prod", account="111122223333", now=NOW, reservations=list(reservations),
                         node_classes=list(classes), node_pools=pools, **extra)


def codes(f):
    return sorted((x.code, x.reservation_id, x.node_class) for x in d.diagnose(f))


def selected(rid="cr-a", terms=None):
    return d.NodeClassFact("default", terms or [{"id": rid}], [rid])


def test_a_healthy_reservation_has_no_finding():
    assert codes(facts([d.ReservationFact(cr("cr-a"))], [selected()])) == []


def test_a_term_that_matches_nothing_and_its_fix():
    nc = d.NodeClassFact("default", [{"id": "cr-a"}, {"tags": {"team": "nobody"}}], ["cr-a"])
    found = d.diagnose(facts([d.ReservationFact(cr("cr-a"))], [nc]))
    assert [(f.code, f.severity, f.data["term"]) for f in found] == [("selector-matches-nothing", "warning", 1)]
    assert '{"id": "cr-a"}' in found[0].fix_command and "nobody" not in found[0].fix_command
    fixed = replace(nc, terms=[{"id": "cr-a"}, {"tags": {"team": "ml"}}])
    assert codes(facts([d.ReservationFact(cr("cr-a", tags={"team": "ml"}))], [fixed])) == []


def test_a_class_selecting_nothing_is_critical_and_says_why():
    nc = d.NodeClassFact("default", [{"id": "cr-gone"}], [])
    found = d.diagnose(facts([d.ReservationFact(cr("cr-gone", state="expired"))], [nc]))
    assert [(f.code, f.severity) for f in found] == [("selector-matches-nothing", "critical")]
    assert "cr-gone is expired" in found[0].evidence


def test_an_unselected_reservation_names_the_class_to_add_it_to():
    found = d.diagnose(facts([d.ReservationFact(cr("cr-a")), d.ReservationFact(cr("cr-b"))], [selected("cr-a")]))
    assert [(f.code, f.reservation_id) for f in found] == [("reservation-unselected", "cr-b")]
    assert '{"id": "cr-b"}' in found[0].fix_command and "name: default" in found[0].fix_command
    # Full (nobody's free unit) or excluded by an operator: no finding.
    full = [d.ReservationFact(cr("cr-a")), d.ReservationFact(cr("cr-b", available=0))]
    assert codes(facts(full, [selected("cr-a")])) == []


def test_a_fleet_reservation_is_open_only():
    fact = d.ReservationFact(cr("cr-f", criteria="open"), fleet_id="crf-1")
    found = d.diagnose(facts([fact], []))
    assert [(f.code, f.reservation_id, f.data["fleetID"]) for f in found] == [("fleet-open-only", "cr-f", "crf-1")]
    assert codes(facts([fact], [selected("cr-f")])) == []


def test_a_pending_ram_invitation_and_its_command():
    inv = d.InvitationFact("arn:aws:ram:us-east-1:222233334444:resource-share-invitation/abc", "gpu", "222233334444",
                           ["cr-s"])
    found = d.diagnose(facts(invitations=[inv]))
    assert [(f.code, f.severity, f.reservation_id) for f in found] == [("ram-share-not-accepted", "critical", "cr-s")]
    assert found[0].fix_command == f"aws ram accept-resource-share-invitation --resource-share-invitation-arn {inv.arn}"
    assert codes(facts()) == []


def test_iam_from_simulation_errors_seen_and_refusal():
    role = "arn:aws:iam::111122223333:role/KarpenterController"
    denied = d.PermissionFact("karpenter", role, "ec2:CreateFleet", "implicitDeny")
    allowed = d.PermissionFact("karpenter", role, "ec2:RunInstances", "allowed")
    found = d.diagnose(facts(permissions=[denied, allowed]))
    assert [(f.code, f.data["action"]) for f in found] == [("iam-permission-missing", "ec2:CreateFleet")]
    assert "--role-name KarpenterController" in found[0].fix_command
    nc = d.NodeClassFact("default", [{"id": "cr-a"}], [], unauthorized_message="DescribeCapacityReservations is not allowed")
    assert ("iam-permission-missing", "", "default") in codes(facts([], [nc]))
    error = d.LaunchErrorFact("cr-a", "UnauthorizedOperation", "not authorized", NOW, unauthorized=True)
    assert ("iam-permission-missing", "cr-a", "") in codes(facts(launch_errors=[error]))
    refused = d.SimulationRefusal("karpweb", "arn:aws:iam::111122223333:role/karpweb", "AccessDenied", "no")
    found = d.diagnose(facts(refusals=[refused]))
    assert [(f.code, f.severity) for f in found] == [("iam-not-simulated", "info")]


def test_unavailable_after_throttling_but_not_after_a_capacity_error():
    fact = d.ReservationFact(cr("cr-a", available=0), marked_unavailable=True, last_synced_available=2)
    throttled = d.LaunchErrorFact("cr-a", "RequestLimitExceeded", "slow down", NOW, throttled=True)
    capacity = d.LaunchErrorFact("cr-a", "ReservationCapacityExceeded", "full", NOW + timedelta(seconds=5))
    assert ("unavailable-after-throttling", "cr-a", "") in codes(facts([fact], [selected()], launch_errors=[throttled]))
    assert codes(facts([fact], [selected()], launch_errors=[throttled, capacity])) == []
    synced = replace(fact, marked_unavailable=False)
    assert codes(facts([synced], [selected()], launch_errors=[throttled])) == []


def test_no_nodepool_matches_for_each_reason():
    def reason(fact, pools=None):
        found = [f for f in d.diagnose(facts([fact], [selected()], pools)) if f.code == "no-nodepool-matches"]
        return found[0].data["reason"] if found else None

    r = cr("cr-a")
    assert reason(d.ReservationFact(r)) is None
    assert reason(d.ReservationFact(r, platform="Red Hat Enterprise Linux")) == "platform"
    assert reason(d.ReservationFact(r, platform="Windows with SQL Server Standard")) == "platform"
    assert reason(d.ReservationFact(r, tenancy="dedicated")) == "tenancy"
    assert reason(d.ReservationFact(r, placement_group_arn="arn:aws:ec2:us-east-1:1:placement-group/pg")) == "placement-group"
    on_demand = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    assert reason(d.ReservationFact(r), pools=[d.NodePoolFact("od", "default", on_demand)]) == "capacity-type"
    assert reason(d.ReservationFact(r), pools=[d.NodePoolFact("any", "default", [])]) is None  # no requirement: any
    arm = [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]
    assert reason(d.ReservationFact(r), pools=[d.NodePoolFact("arm", "default", arm)]) is None  # arch unknown: not judged
    amd = d.ReservationFact(r, type_labels={"kubernetes.io/arch": "amd64"})
    assert reason(amd, pools=[d.NodePoolFact("arm", "default", arm)]) == "kubernetes.io/arch"
    only_c5 = [*RESERVED_POOL, {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]}]
    assert reason(d.ReservationFact(r), pools=[d.NodePoolFact("c5", "default", only_c5)]) == "instance-type"
    zone_b = [*RESERVED_POOL, {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]}]
    assert reason(d.ReservationFact(r), pools=[d.NodePoolFact("b", "default", zone_b)]) == "zone"
    assert reason(d.ReservationFact(r), pools=[d.NodePoolFact("other", "other-class", RESERVED_POOL)]) == "no-nodepool"
    windows = [*RESERVED_POOL, {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]}]
    assert reason(d.ReservationFact(r, platform="Windows"), pools=[d.NodePoolFact("w", "default", windows)]) is None
    assert reason(d.ReservationFact(r), pools=[d.NodePoolFact("w", "default", windows)]) == "platform"


def test_keys_are_stable_and_severities_counted():
    f = facts([d.ReservationFact(cr("cr-b"))], [selected("cr-a")])
    assert [x.key for x in d.diagnose(f)] == [x.key for x in d.diagnose(f)]
    assert d.count_by_severity(d.diagnose(f)) == {"critical": 1, "warning": 1, "info": 0}


def test_unselected_is_fleet_wide_and_reported_once():
    fact = d.ReservationFact(cr("cr-b"))
    elsewhere = facts([fact], [], selected_in_fleet=frozenset({"cr-b"}))
    assert codes(elsewhere) == []  # another cluster's class selects it
    no_pool = [d.NodePoolFact("od", "default", [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                                 "values": ["on-demand"]}])]
    assert codes(facts([fact], [], no_pool, reports_unselected=frozenset())) == []  # another cluster reports it
    assert codes(facts([fact], [], no_pool, reports_unselected=frozenset({"cr-b"}))) == [
        ("reservation-unselected", "cr-b", "")]
    assert codes(facts([fact], [], reports_unselected=frozenset())) == [("reservation-unselected", "cr-b", "")]


def advice(finding) -> str:
    return f"{finding.fix} {finding.fix_command}"


def test_a_split_off_or_shared_reservation_is_never_handed_back_to_its_owner():
    """A reservation the owner split off or shares for another account: the owner's cluster is never told to
    select it (nor to let a NodePool admit it), which would give the other account's units back (#48)."""
    plain = d.diagnose(facts([d.ReservationFact(cr("cr-s"))], []))
    assert "name: default" in plain[0].fix_command  # the owner's own reservation: select it in its class
    for fact in (d.ReservationFact(cr("cr-s"), meant_for=("444455556666",)),
                 d.ReservationFact(cr("cr-s"), meant_for=("444455556666",), split_off=True),
                 d.ReservationFact(cr("cr-s"), meant_for=("",), split_off=True)):
        found = d.diagnose(facts([fact], []))
        assert [(f.code, f.reservation_id) for f in found] == [("reservation-unselected", "cr-s")]
        assert found[0].fix_command == "" and "default" not in advice(found[0]), advice(found[0])
        assert "not here" in found[0].fix and ("split off" in found[0].fix) == fact.split_off
        # Already selected by the owner's class but no pool admits it: no advice to admit it here either.
        on_demand = [d.NodePoolFact("od", "default", [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                                       "values": ["on-demand"]}])]
        admitted = [f for f in d.diagnose(facts([fact], [selected("cr-s")], on_demand)) if f.code == "no-nodepool-matches"]
        assert admitted and admitted[0].fix_command == "" and "capacity-type must include" not in admitted[0].fix
    # The account it was shared with is told to select it in its own class, as for its own reservations.
    theirs = d.DoctorFacts(cluster="research", account="444455556666", now=NOW,
                           reservations=[d.ReservationFact(cr("cr-s"), shared=True)], node_classes=[],
                           node_pools=[d.NodePoolFact("default", "default", RESERVED_POOL)])
    assert "name: default" in d.diagnose(theirs)[0].fix_command
