"""The open-reservation trap from the database (reservations/open_trap.py): facts per cluster of the
fleet, Karpenter's launch templates as the EC2 sync records them, the fix as YAML, and the fix
applied in one confirmed click (control mode only, audited, idempotent, refused when stale)."""

import pytest
import yaml

from fleet.scope import cluster_scope, forget_default
from reservations import open_trap
from reservations.models import (CapacityReservation, ClusterLaunchTemplate, EC2NodeClass, OpenReservationInstance,
                                 ReservationVisibility)
from scheduling.adapters.ec2.launch import TemplatePreference
from scheduling.models import AuditEntry, Node, NodePool
from tests.factories.scheduling import InstanceTypeFactory, OfferingFactory

OURS, OURS_TOO = "111111111111", "222222222222"
ZONE, PRICE = "us-east-1a", 0.096
ON_DEMAND_ONLY = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]


@pytest.fixture
def fleet(make_account, make_cluster):
    forget_default()
    ours, ours_too = make_account(OURS, "ml-prod"), make_account(OURS_TOO, "ml-dev")
    alpha, beta = make_cluster("alpha", ours), make_cluster("beta", ours_too)
    OfferingFactory(instance_type=InstanceTypeFactory(name="m5.large"), zone=ZONE, price=PRICE)
    yield ours, ours_too, alpha, beta
    forget_default()


def open_reservation(rid="cr-0open000000000001", idle=2, owner=OURS):
    return CapacityReservation.objects.create(
        reservation_id=rid, owner_id=owner, instance_type="m5.large", availability_zone=ZONE, region="us-east-1",
        total_instance_count=idle + 1, available_instance_count=idle, instance_match_criteria="open")


def seed(cluster, *, terms=({"id": "cr-0targeted0000001"},), paid=3, prefix=""):
    nc = EC2NodeClass.objects.fleet().create(cluster=cluster, name="general", resource_version="7",
                                             capacity_reservation_selector_terms=list(terms))
    pool = NodePool.objects.fleet().create(cluster=cluster, name="general", node_class=nc, resource_version="9",
                                           requirements=list(ON_DEMAND_ONLY))
    for i in range(paid):
        Node.objects.fleet().create(cluster=cluster, name=f"{prefix or cluster.name}-{i}", node_pool=pool,
                                    instance_type="m5.large", zone=ZONE, capacity_type="on-demand",
                                    provider_id=f"aws:///{ZONE}/i-{cluster.pk:02d}{i:015x}")
    return nc, pool


def test_trap_found_per_cluster_with_dollars_and_fleet_visibility(fleet):
    ours, ours_too, alpha, beta = fleet
    seed(alpha)
    seed(beta, terms=())  # beta selects nothing; its Karpenter's launch templates opt out instead
    reservation = open_reservation(idle=2)
    assert open_trap.find() != [] and [t.cluster for t in open_trap.find()] == ["alpha"]  # beta's account sees none
    ReservationVisibility.objects.create(reservation=reservation, account=ours_too, shared=True)
    assert [t.cluster for t in open_trap.find()] == ["alpha"]  # seen, but beta's launches do not opt out yet
    with cluster_scope(beta):
        written = open_trap.record_launch_templates([
            TemplatePreference("beta", "lt-1", "karpenter.k8s.aws/1", 1, "none", "general"),
            TemplatePreference("gamma", "lt-2", "karpenter.k8s.aws/2", 1, "none")])  # no such cluster: skipped
    assert written == 1 and ClusterLaunchTemplate.objects.fleet().get().cluster == beta
    traps = open_trap.find()
    # 2 idle units, 3 paid nodes in each cluster: the first cluster by name gets both, nothing is counted twice.
    assert [(t.cluster, t.units, t.dollars_per_hour) for t in traps] == [("alpha", 2, round(2 * PRICE, 6))]
    assert open_trap.summary(traps)["total"] == round(2 * PRICE, 6)
    with cluster_scope(beta):
        [mine] = open_trap.find()
    assert mine.cluster == "beta" and mine.opted_out_because == (
        "launch template karpenter.k8s.aws/1 carries CapacityReservationPreference: none",)


def test_nodes_running_in_the_open_reservation_are_not_paid_twice(fleet):
    _, _, alpha, _ = fleet
    seed(alpha, paid=2)
    reservation = open_reservation(idle=2)
    OpenReservationInstance.objects.create(instance_id="i-whatever", reservation=reservation, instance_type="m5.large",
                                           availability_zone=ZONE, node_name="alpha-0", first_seen=reservation.last_seen
                                           or "2026-11-25T00:00:00Z", last_seen="2026-11-25T00:00:00Z")
    [trap] = open_trap.find()
    assert trap.paid_nodes == ("alpha-1",) and trap.units == 1


def test_fix_yaml_is_karpenters_objects_with_their_versions(fleet):
    _, _, alpha, _ = fleet
    seed(alpha)
    open_reservation()
    [trap] = open_trap.find()
    docs = [d for d in yaml.safe_load_all(open_trap.fix_yaml(trap)) if d]
    assert docs == [
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "general", "resourceVersion": "7"},
         "spec": {"capacityReservationSelectorTerms": [{"id": "cr-0targeted0000001"}, {"id": "cr-0open000000000001"}]}},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general", "resourceVersion": "9"},
         "spec": {"template": {"spec": {"requirements": [
             {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "reserved"]}]}}}}]
    assert "+  - reserved" in open_trap.fix_diff(trap).splitlines()


def test_one_click_fix_is_control_only_audited_idempotent_and_refused_when_stale(fleet, settings, admin_user):
    _, _, alpha, _ = fleet
    seed(alpha)
    open_reservation()
    [trap] = open_trap.find()
    seen = open_trap.versions(trap)
    settings.KARPWEB_MODE = "observe"
    with pytest.raises(open_trap.FixRefused) as refused:
        open_trap.apply_fix("alpha", trap.reservation_id, seen, user=admin_user, source="ui")
    assert refused.value.field == "mode" and "apply the YAML" in refused.value.message
    settings.KARPWEB_MODE = "control"
    with pytest.raises(open_trap.FixRefused) as stale:
        open_trap.apply_fix("alpha", trap.reservation_id, {**seen, "NodePool/general": "8"}, user=admin_user, source="ui")
    assert stale.value.field == "versions"
    result = open_trap.apply_fix("alpha", trap.reservation_id, seen, user=admin_user, source="ui")
    assert result.applied == ["EC2NodeClass/general", "NodePool/general"]
    nc = EC2NodeClass.objects.fleet().get(cluster=alpha)
    assert {"id": trap.reservation_id} in nc.capacity_reservation_selector_terms
    assert trap.reservation_id in set(nc.selected_reservations.values_list("reservation_id", flat=True))
    pool = NodePool.objects.fleet().get(cluster=alpha)
    assert pool.requirements[0]["values"] == ["on-demand", "reserved"]
    audited = {(e.content_type.model, e.object_repr, tuple(e.changes)) for e in AuditEntry.objects.filter(actor=admin_user.username)}
    assert audited == {("ec2nodeclass", "general", ("capacity_reservation_selector_terms",)),
                       ("nodepool", "general", ("requirements",))}
    assert open_trap.find() == []  # fixed: consolidation now moves the paid nodes into the reservation
    again = open_trap.apply_fix("alpha", trap.reservation_id, seen, user=admin_user, source="ui")
    assert again.nothing_to_do
    with pytest.raises(open_trap.FixRefused):
        open_trap.apply_fix("nowhere", trap.reservation_id, seen, user=admin_user, source="ui")


def test_names_no_cluster_can_have_are_refused_without_a_traceback(fleet, client, admin_user, settings):
    settings.KARPWEB_MODE = "control"
    assert not open_trap.cluster_exists("bad\x00name") and not open_trap.cluster_exists("alpha" * 20)
    with pytest.raises(open_trap.FixRefused) as refused:
        open_trap.apply_fix("a\x00b", "cr-1", {}, user=admin_user, source="ui")
    assert refused.value.field == "cluster" and "\\x00" in refused.value.message
    client.force_login(admin_user)
    listed = client.get("/api/v1/open-reservation-traps/", {"cluster": "a\x00b"})
    assert listed.status_code == 400 and "cluster" in listed.json()
    form = client.post("/reservations/open-trap/fix/", {"cluster": "a\x00b", "reservation": "cr-1", "versions": "{}",
                                                         "confirm": "yes"})
    assert form.status_code == 400 and "no cluster named" in form.content.decode()
    assert client.get("/reservations/open-trap/a%00b/cr-1.yaml").status_code == 404


def test_the_api_says_what_is_wrong_with_versions_in_its_error_shape(fleet, client, admin_user):
    client.force_login(admin_user)
    for versions in ({"x": "0" * 65}, ["41"], {"x": 41}):
        answer = client.post("/api/v1/open-reservation-traps/fix/", {"cluster": "alpha", "reservationID": "cr-1",
                                                                      "versions": versions}, content_type="application/json")
        assert answer.status_code == 400 and isinstance(answer.json()["versions"], list), versions
