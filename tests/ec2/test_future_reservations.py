"""Future-dated reservations on the EC2 test server (issue #37): CreateCapacityReservation with
StartDate, CommitmentDuration and DeliveryPreference, the state along the server clock (scheduled, then
active at the start), and a sync that mirrors them with their commitment and never marks them gone."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from botocore.exceptions import ClientError

from reservations.models import CapacityReservation, EC2NodeClass
from scheduling.adapters.ec2.sync import reservation_row, sync_catalogue, sync_reservations
from scheduling.loop import disruption, provisioning, simulated
from scheduling.loop.engine_run import simulate_readable
from scheduling.loop.simulated import SimulatedCluster
from scheduling.models import Decision, Mode, NodeClaim, NodePool, Offering, Pod
from scheduling.world import current_world
from tests.ec2.conftest import T0
from tests.faults.worlds import launchable_spec

pytestmark = pytest.mark.django_db

ZONE = "us-east-1a"
TWO_WEEKS = 14 * 24 * 3600


def create(raw_ec2, **extra):
    return raw_ec2.create_capacity_reservation(InstanceType="m5.large", InstancePlatform="Linux/UNIX",
                                               AvailabilityZone=ZONE, InstanceCount=3, **extra)["CapacityReservation"]


def test_create_future_dated_reservation_is_scheduled_with_its_commitment_then_active_at_its_start(world, clock, raw_ec2):
    start = T0 + timedelta(days=5)
    made = create(raw_ec2, StartDate=start, CommitmentDuration=TWO_WEEKS, DeliveryPreference="incremental",
                  InstanceMatchCriteria="targeted")
    assert made["State"] == "scheduled" and made["DeliveryPreference"] == "incremental"
    assert made["CommitmentInfo"]["CommittedInstanceCount"] == 3
    assert made["CommitmentInfo"]["CommitmentEndDate"] == start + timedelta(seconds=TWO_WEEKS)
    rid = made["CapacityReservationId"]

    def state():
        return raw_ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0]["State"]

    clock.advance(days=5, seconds=-1)
    assert state() == "scheduled"
    clock.advance(seconds=1)
    assert state() == "active"
    assert [r["CapacityReservationId"] for r in raw_ec2.describe_capacity_reservations(
        Filters=[{"Name": "state", "Values": ["active"]}])["CapacityReservations"]] == [rid]


@pytest.mark.parametrize(("extra", "code", "words"), [
    ({"StartDate": T0 + timedelta(days=5)}, "MissingParameter", "CommitmentDuration is required"),
    ({"StartDate": T0 + timedelta(days=5), "CommitmentDuration": 3600}, "InvalidParameterValue", "at least 1209600"),
    ({"StartDate": T0 - timedelta(days=1), "CommitmentDuration": TWO_WEEKS}, "InvalidParameterValue", "StartDate must be in the future"),
    ({"StartDate": T0 + timedelta(days=5), "CommitmentDuration": TWO_WEEKS, "DeliveryPreference": "soon"},
     "InvalidParameterValue", "DeliveryPreference must be one of fixed, incremental"),
    ({"CommitmentDuration": TWO_WEEKS}, "InvalidParameterCombination", "requires StartDate"),
])
def test_bad_future_dated_requests_are_refused_naming_the_field(world, clock, raw_ec2, extra, code, words):
    with pytest.raises(ClientError) as refused:
        create(raw_ec2, **extra)
    assert refused.value.response["Error"]["Code"] == code and words in refused.value.response["Error"]["Message"]
    assert raw_ec2.describe_capacity_reservations()["CapacityReservations"] == []


def test_sync_mirrors_a_future_dated_reservation_and_keeps_it_until_it_turns_active(world, clock, provider):
    sync_catalogue(provider, now=clock())
    start = T0 + timedelta(days=3)
    rid = world.add_future_reservation("m5.large", ZONE, 2, start=start, commitment=timedelta(days=14),
                                       delivery="fixed", tags={"team": "ml"})
    stats = sync_reservations(provider, now=clock())
    assert stats.reservations_created == 1 and stats.reservations_gone == 0
    row = CapacityReservation.objects.get(reservation_id=rid)
    assert (row.state, row.start_date, row.committed_instance_count, row.commitment_end_date, row.delivery_preference) == (
        "scheduled", start, 2, start + timedelta(days=14), "fixed")
    assert not row.is_usable(clock())
    offering = Offering.objects.get(reservation=row)
    assert not offering.available  # nothing plans into it before its start

    clock.advance(days=1)
    assert sync_reservations(provider, now=clock()).reservations_gone == 0
    assert CapacityReservation.objects.get(reservation_id=rid).state == "scheduled"

    clock.advance(days=2)  # its start
    sync_reservations(provider, now=clock())
    row.refresh_from_db()
    assert row.state == "active" and row.is_usable(clock()) and row.is_committed(clock())
    assert Offering.objects.get(reservation=row).available


@pytest.mark.parametrize("state", ["assessing", "pending", "delayed", "payment-pending"])
def test_sync_keeps_the_other_future_states_not_gone(world, clock, provider, state):
    rid = world.add_future_reservation("m5.large", ZONE, 1, start=T0 + timedelta(days=6))
    world.set_state(rid, state)
    sync_reservations(provider, now=clock())
    clock.advance(minutes=1)
    assert sync_reservations(provider, now=clock()).reservations_gone == 0
    assert CapacityReservation.objects.get(reservation_id=rid).state == state


def test_reservation_row_reads_commitment_info_and_delivery_preference():
    item = {"CapacityReservationId": "cr-0123456789abcdef0", "OwnerId": "123456789012", "InstanceType": "m5.large",
            "AvailabilityZone": ZONE, "TotalInstanceCount": 4, "AvailableInstanceCount": 4, "State": "scheduled",
            "StartDate": "2026-12-01T00:00:00Z", "DeliveryPreference": "incremental",
            "CommitmentInfo": {"CommittedInstanceCount": 3, "CommitmentEndDate": "2026-12-15T00:00:00Z"}}
    row = reservation_row(item, "us-east-1", T0)
    assert (row["state"], row["start_date"].isoformat(), row["committed_instance_count"],
            row["commitment_end_date"].isoformat(), row["delivery_preference"]) == (
        "scheduled", "2026-12-01T00:00:00+00:00", 3, "2026-12-15T00:00:00+00:00", "incremental")
    plain = reservation_row({**item, "State": "active", "CommitmentInfo": None, "DeliveryPreference": None}, "us-east-1", T0)
    assert (plain["committed_instance_count"], plain["commitment_end_date"], plain["delivery_preference"]) == (None, None, "")


# --- end to end: not planned into before its start, used from it (paid pods moved in) -------------


def at(clock):
    """karpweb's clock where the server's and the provider's are (one instant for all three)."""
    return time_machine.travel(clock(), tick=False)


def pending_pod(name):
    spec = {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]}
    return Pod.objects.create(namespace="default", name=name, uid=f"uid-{name}", spec=spec, phase="Pending",
                              cpu_request_millicores=1500, memory_request_bytes=2**30,
                              owner_kind="ReplicaSet", owner_name="app-1")


def settle(provider, cluster, now):
    """The kube-scheduler binds what waits (the simulated one), provisioning launches for the rest."""
    simulated.bind_pending_pods(simulate_readable(current_world(now), now))
    counts = provisioning.provision(provider, cluster, now=now)
    simulated.bind_pending_pods(simulate_readable(current_world(now), now))
    return counts


def capacity_of_pods() -> dict[str, tuple[str, str]]:
    return {p.name: (p.node.capacity_type, p.node.reservation_label) if p.node else ("pending", "")
            for p in Pod.objects.select_related("node")}


def test_future_reservation_is_not_planned_into_before_its_start_then_paid_pods_move_in(
        world, clock, provider, raw_ec2, settings):
    settings.KARPWEB_MODE = "control"
    cluster = SimulatedCluster()
    start = T0 + timedelta(days=2)
    with at(clock):
        sync_catalogue(provider, now=clock())
        rid = world.add_future_reservation("m5.large", ZONE, 2, start=start, commitment=timedelta(days=14))
        node_class = EC2NodeClass.objects.create(name="ml", capacity_reservation_selector_terms=[{"id": rid}],
                                                 spec=launchable_spec(provider))
        NodePool.objects.create(
            name="ml", node_class=node_class, mode=Mode.CONTROL, budgets=[{"nodes": "1"}],
            consolidation_policy="WhenEmptyOrUnderutilized", consolidate_after="0s",
            requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]},
                          {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                          {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]}])
        assert sync_reservations(provider, now=clock()).errors == []
        pending_pod("app-0"), pending_pod("app-1")

        # Before its start: the pods go on-demand, and consolidation moves nothing into it.
        assert settle(provider, cluster, clock())["launched"] == 2
        assert capacity_of_pods() == {"app-0": ("on-demand", ""), "app-1": ("on-demand", "")}
        launch = Decision.objects.filter(kind=Decision.Kind.LAUNCH, outcome=Decision.Outcome.ACTED).first()
        assert launch is not None and "went to on-demand" in launch.reason
        assert disruption.act_on_disruptions(provider, cluster, {disruption.CONSOLIDATION}, clock())["acted"] == 0
        assert world.reservation(rid)["State"] == "scheduled"
    paid = set(NodeClaim.objects.values_list("name", flat=True))

    clock.advance(days=2, minutes=1)  # its start has come: EC2 made it active
    with at(clock):
        sync_reservations(provider, now=clock())
        assert CapacityReservation.objects.get(reservation_id=rid).state == "active"
        acted_per_pass = []
        for minute in range(3):
            clock.advance(minutes=1)
            with at(clock):
                counts = disruption.act_on_disruptions(provider, cluster, {disruption.CONSOLIDATION}, clock())
                acted_per_pass.append(counts["acted"])
                settle(provider, cluster, clock())
                sync_reservations(provider, now=clock())
    assert acted_per_pass[:2] == [1, 1] and sum(acted_per_pass) == 2  # within the budget: one node a pass
    assert capacity_of_pods() == {"app-0": ("reserved", rid), "app-1": ("reserved", rid)}
    assert not NodeClaim.objects.filter(name__in=paid).exists()
    replaced = Decision.objects.filter(kind=Decision.Kind.CONSOLIDATE_REPLACE, outcome=Decision.Outcome.ACTED)
    assert replaced.count() == 2 and all(f"in reservation {rid}" in d.reason for d in replaced)
    assert world.reservation(rid)["AvailableInstanceCount"] == 0
