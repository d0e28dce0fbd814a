"""The reservation doctor on the mirror (reservations/doctor.py): each finding whose cause lives in the
database (a reservation's shape, a class's terms or condition, a NodePool, a failed launch) is
produced by a seeded cause and cleared when the cause is fixed; the loop's EC2 step runs it, and the
metric follows. Causes that live in AWS: tests/fleet/test_doctor_aws.py."""

import datetime

import pytest
from django.utils import timezone

from reservations import doctor
from reservations.models import CapacityReservation, DoctorFinding, EC2NodeClass
from scheduling.models import Decision, TaskRun
from tests.factories.reservations import CapacityReservationFactory, EC2NodeClassFactory, UtilizationSampleFactory
from tests.factories.scheduling import DecisionFactory, NodePoolFactory

pytestmark = pytest.mark.django_db


def active():
    return {(f.code, f.reservation_id, f.node_class_name) for f in DoctorFinding.objects.filter(cleared_at__isnull=True)}


def cleared():
    return {(f.code, f.reservation_id, f.node_class_name) for f in DoctorFinding.objects.filter(cleared_at__isnull=False)}


def select(node_class, *ids):
    """The class selects these reservations (what the EC2 sync's status writes)."""
    node_class.capacity_reservation_selector_terms = [{"id": rid} for rid in ids]
    node_class.status_capacity_reservations = [{"id": rid} for rid in ids]
    node_class.save()


@pytest.fixture
def web():
    node_class = EC2NodeClassFactory(name="web")
    NodePoolFactory(name="web", node_class=node_class)
    return node_class


def test_a_fleet_reservation_open_only_then_selected(web):
    CapacityReservationFactory(reservation_id="cr-0fleet", instance_match_criteria="open",
                               capacity_reservation_fleet_id="crf-0123")
    doctor.examine(None)
    assert active() == {("fleet-open-only", "cr-0fleet", "")}
    finding = DoctorFinding.objects.get()
    assert "crf-0123" in finding.evidence and '{"id": "cr-0fleet"}' in finding.fix_command
    select(web, "cr-0fleet")
    doctor.examine(None)
    assert active() == set() and cleared() == {("fleet-open-only", "cr-0fleet", "")}


def test_a_platform_no_nodepool_can_launch_then_replaced(web):
    CapacityReservationFactory(reservation_id="cr-0rhel", instance_platform="Red Hat Enterprise Linux")
    select(web, "cr-0rhel")
    doctor.examine(None)
    assert active() == {("no-nodepool-matches", "cr-0rhel", "")}
    assert DoctorFinding.objects.get().evidence_data["reason"] == "platform"
    CapacityReservation.objects.filter(reservation_id="cr-0rhel").update(instance_platform="Linux/UNIX")
    doctor.examine(None)
    assert active() == set()


def test_a_nodepool_without_reserved_then_allowed(web):
    CapacityReservationFactory(reservation_id="cr-0od")
    select(web, "cr-0od")
    pool = web.node_pools.get()
    pool.requirements = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    pool.save()
    doctor.examine(None)
    finding = DoctorFinding.objects.get()
    assert (finding.code, finding.evidence_data["reason"]) == ("no-nodepool-matches", "capacity-type")
    assert "reserved" in finding.fix_command
    pool.requirements = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]}]
    pool.save()
    doctor.examine(None)
    assert active() == set()


def test_unavailable_after_a_throttled_launch_until_the_next_sync(web):
    now = timezone.now()
    r = CapacityReservationFactory(reservation_id="cr-0thr", total_instance_count=4, available_instance_count=0)
    select(web, "cr-0thr")
    UtilizationSampleFactory(reservation=r, used=2, available=2, total=4, sampled_at=now - datetime.timedelta(seconds=20))
    DecisionFactory(kind=Decision.Kind.LAUNCH, outcome=Decision.Outcome.FAILED, reservation=r,
                    error="RequestLimitExceeded: Request limit exceeded.", created_at=now - datetime.timedelta(seconds=10))
    doctor.examine(None, now)
    assert active() == {("unavailable-after-throttling", "cr-0thr", "")}
    assert DoctorFinding.objects.get().severity == "critical"
    # The next sync counts its free units again: cleared.
    CapacityReservation.objects.filter(pk=r.pk).update(available_instance_count=2)
    doctor.examine(None, now + datetime.timedelta(seconds=30))
    assert active() == set()


def test_a_capacity_error_is_not_throttling(web):
    now = timezone.now()
    r = CapacityReservationFactory(reservation_id="cr-0full", total_instance_count=4, available_instance_count=0)
    select(web, "cr-0full")
    UtilizationSampleFactory(reservation=r, used=2, available=2, total=4, sampled_at=now - datetime.timedelta(seconds=20))
    DecisionFactory(kind=Decision.Kind.LAUNCH, outcome=Decision.Outcome.FAILED, reservation=r,
                    error="ReservationCapacityExceeded: full", created_at=now - datetime.timedelta(seconds=10))
    doctor.examine(None, now)
    assert active() == set()


def test_iam_errors_seen_in_the_sync_and_in_launches(web):
    now = timezone.now()
    r = CapacityReservationFactory(reservation_id="cr-0iam")
    select(web, "cr-0iam")
    web.set_condition("CapacityReservationsReady", "False", "Unauthorized",
                      "DescribeCapacityReservations is not allowed (UnauthorizedOperation): not authorized")
    web.save()
    DecisionFactory(kind=Decision.Kind.LAUNCH, outcome=Decision.Outcome.FAILED, reservation=r,
                    error="UnauthorizedOperation: You are not authorized to perform this operation.",
                    created_at=now - datetime.timedelta(minutes=5))
    doctor.examine(None, now)
    assert active() == {("iam-permission-missing", "", "web"), ("iam-permission-missing", "cr-0iam", "")}
    # Permission granted: the next sync reads the reservations, and no launch has failed for an hour.
    web.set_condition("CapacityReservationsReady", "True", "CapacityReservationsReady", "")
    web.save()
    doctor.examine(None, now + datetime.timedelta(hours=1, minutes=1))
    assert active() == set()


def test_the_ec2_step_runs_the_doctor_and_the_metric_follows(client, settings, web):
    from scheduling.loop import steps

    settings.KARPWEB_METRICS_PUBLIC = True
    CapacityReservationFactory(reservation_id="cr-0idle", available_instance_count=3, total_instance_count=3,
                               tags={"team": "data"})
    counts = steps.sync_ec2()
    assert counts["doctor_findings"] >= 1 and ("reservation-unselected", "cr-0idle", "") in active()
    TaskRun.objects.create(task="sync_ec2", status="succeeded", finished_at=timezone.now())
    body = client.get("/metrics").content.decode()
    line = next(line for line in body.splitlines()
                if line.startswith("karpweb_reservation_doctor_findings{") and 'code="reservation-unselected"' in line)
    assert 'severity="warning"' in line and line.endswith(" 1.0")
    select(EC2NodeClass.objects.get(name="web"), "cr-0idle")
    steps.sync_ec2()
    body = client.get("/metrics").content.decode()
    line = next(line for line in body.splitlines()
                if line.startswith("karpweb_reservation_doctor_findings{") and 'code="reservation-unselected"' in line)
    assert line.endswith(" 0.0")  # cleared: the series stays at 0, so the alert resolves


def test_a_planning_override_is_named_then_cleared(web, viewer_client):
    """#47 (15): a reservation karpweb's own override keeps out of planning is not "nothing stopping it": the doctor
    names the override (who, since when, why) on the reservation's page, and clears it with the override."""
    reservation = CapacityReservationFactory(reservation_id="cr-0kept", planning_excluded=True,
                                             planning_excluded_by="alice", planning_excluded_reason="kept for the migration",
                                             planning_excluded_at=timezone.now())
    select(web, "cr-0kept")
    doctor.examine(None)
    assert active() == {("planning-excluded", "cr-0kept", "")}
    finding = DoctorFinding.objects.get()
    assert finding.severity == "warning"
    assert "excluded from planning by karpweb's override (by alice since " in finding.evidence
    assert "kept for the migration" in finding.evidence and "keep karpweb from planning into it" in finding.fix
    page = viewer_client.get(reservation.get_absolute_url()).content.decode()
    doctor_section = page.split('id="doctor"')[1].split("</section>")[0]
    assert "kept for the migration" in doctor_section and "finds nothing stopping it" not in doctor_section
    CapacityReservation.objects.filter(pk=reservation.pk).update(planning_excluded=False)
    doctor.examine(None)
    assert active() == set() and cleared() == {("planning-excluded", "cr-0kept", "")}
