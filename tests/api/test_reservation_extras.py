"""Issue 12 in the API and on the overview: open mode through PATCH (audited, conflict-safe), group
terms validated per term, reservations' open instances and groups, and the utilization alarms
(under 20 % for 24 hours; a capacity block still running 45 minutes before its end) moved through
time with time-machine: /api/v1/alarms/, the reservation's `alarms`, the overview and the metrics."""

import datetime

import pytest
import time_machine
from django.urls import reverse

from reservations.groups import store_group
from reservations.models import OPEN_RESERVATIONS_ANNOTATION, EC2NodeClass, OpenReservationInstance
from reservations.utilization import roll_up
from scheduling.models import AuditEntry
from tests.factories.reservations import CapacityReservationFactory, UtilizationSampleFactory
from tests.factories.scheduling import NodeFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/ec2nodeclasses/default/"
ARN = "arn:aws:resource-groups:us-east-1:123456789012:group/web-pool"
T0 = datetime.datetime(2026, 11, 21, 12, 0, tzinfo=datetime.timezone.utc)


def patch(client, body, **headers):
    return client.patch(URL, body, format="json", headers=headers)


# --- open mode and group terms through the API --------------------------------------------------

def test_open_mode_through_patch_is_audited_and_conflict_safe(as_operator, as_viewer, demo_world):
    response = as_viewer.get(URL)
    assert response.json()["openReservations"] is False
    etag = response["ETag"]
    assert patch(as_viewer, {"openReservations": True}, **{"If-Match": etag}).status_code == 403

    response = patch(as_operator, {"openReservations": True}, **{"If-Match": etag})
    assert response.status_code == 200, response.content
    assert response.json()["openReservations"] is True
    assert response.json()["annotations"][OPEN_RESERVATIONS_ANNOTATION] == "true"
    assert response["ETag"] != etag
    entry = AuditEntry.objects.get()
    assert (entry.source, entry.changes) == ("api", {"open_reservations": [False, True]})

    assert patch(as_operator, {"openReservations": False}, **{"If-Match": etag}).status_code == 412  # stale
    assert patch(as_operator, {"openReservations": "maybe"}, **{"If-Match": response["ETag"]}).status_code == 400
    assert EC2NodeClass.objects.get(name="default").open_reservations is True


def test_group_terms_through_the_api_per_term_messages(as_operator, demo_world):
    etag = as_operator.get(URL)["ETag"]
    bad = [{"resourceGroupARN": ARN, "tags": {"team": "web"}}, {"resourceGroupARN": "arn:aws:resource-groups:x"}]
    response = patch(as_operator, {"capacityReservationSelectorTerms": bad}, **{"If-Match": etag})
    assert response.status_code == 400
    messages = response.json()["capacityReservationSelectorTerms"]
    assert messages[0] == "capacityReservationSelectorTerms[0].resourceGroupARN: must be alone in its term, but the term also sets tags"
    assert messages[1].startswith('capacityReservationSelectorTerms[1].resourceGroupARN: "arn:aws:resource-groups:x" does not match')

    store_group(ARN, ["cr-0a1b2c3d4e5f60003"])
    good = [{"tags": {"team": "web"}}, {"resourceGroupARN": ARN}]
    response = patch(as_operator, {"capacityReservationSelectorTerms": good}, **{"If-Match": etag})
    assert response.status_code == 200, response.content
    assert "cr-0a1b2c3d4e5f60003" in response.json()["selectedReservations"]


def test_reservation_shows_open_instances_and_groups(as_viewer, demo_world):
    r = CapacityReservationFactory(reservation_id="cr-0open", instance_match_criteria="open")
    OpenReservationInstance.objects.create(instance_id="i-0abc", reservation=r, instance_type=r.instance_type,
                                           availability_zone=r.availability_zone, first_seen=T0, last_seen=T0)
    store_group(ARN, ["cr-0open"])
    body = as_viewer.get("/api/v1/capacity-reservations/cr-0open/").json()
    assert body["openInstances"] == ["i-0abc"] and body["capacityReservationGroups"] == [ARN]
    assert body["alarms"] == []


# --- the alarms, through time ------------------------------------------------------------------

def alarms(client, **params):
    response = client.get("/api/v1/alarms/", params)
    assert response.status_code == 200, response.content
    return [(a["type"], a["reservationID"]) for a in response.json()]


def test_low_utilization_alarm_needs_24_hours_under_20_percent(as_viewer, viewer_client, client, db):
    with time_machine.travel(T0, tick=False) as traveller:
        idle = CapacityReservationFactory(reservation_id="cr-0idle", total_instance_count=10, available_instance_count=9)
        busy = CapacityReservationFactory(reservation_id="cr-0busy", total_instance_count=10, available_instance_count=5)
        for hours in range(12):
            at = T0 - datetime.timedelta(hours=hours)
            UtilizationSampleFactory(reservation=idle, sampled_at=at, used=1, available=9, total=10)
            UtilizationSampleFactory(reservation=busy, sampled_at=at, used=5, available=5, total=10)
        roll_up(since=T0 - datetime.timedelta(days=1))
        assert alarms(as_viewer) == []  # 10 % used, but for only 12 hours

        for hours in range(1, 13):  # half a day more of the same, one sample an hour
            traveller.move_to(T0 + datetime.timedelta(hours=hours))
            UtilizationSampleFactory(reservation=idle, sampled_at=T0 + datetime.timedelta(hours=hours), used=1, available=9, total=10)
            UtilizationSampleFactory(reservation=busy, sampled_at=T0 + datetime.timedelta(hours=hours), used=5, available=5, total=10)
        roll_up(since=T0)
        assert alarms(as_viewer) == [("LowUtilization", "cr-0idle")]
        [alarm] = as_viewer.get("/api/v1/alarms/").json()
        assert alarm["message"].startswith("cr-0idle averaged 10% used over the last 24 hours (under 20%)")
        assert as_viewer.get("/api/v1/capacity-reservations/cr-0idle/").json()["alarms"][0]["type"] == "LowUtilization"
        assert as_viewer.get("/api/v1/capacity-reservations/cr-0busy/").json()["alarms"] == []
        assert alarms(as_viewer, type="CapacityBlockRunningNearEnd") == []
        assert as_viewer.get("/api/v1/alarms/", {"type": "Bogus"}).status_code == 400

        overview = viewer_client.get(reverse("scheduling:overview")).content.decode()
        low = overview.split("Under 20 % for 24 hours")[1].split("</section>")[0]
        assert "cr-0idle" in low and "10% used" in low.replace("\u00a0", "") and "cr-0busy" not in low
        metrics = client.get("/metrics").content.decode()
        assert 'karpweb_reservation_low_utilization{account="123456789012",availability_zone="us-east-1a",instance_type="m5.large",reservation_id="cr-0idle",reservation_type="default"} 1.0' in metrics
        assert 'karpweb_reservation_low_utilization{account="123456789012",availability_zone="us-east-1a",instance_type="m5.large",reservation_id="cr-0busy",reservation_type="default"} 0.0' in metrics

        # It fills up: the next day's average is back over 20 %.
        for hours in range(13, 38):
            UtilizationSampleFactory(reservation=idle, sampled_at=T0 + datetime.timedelta(hours=hours), used=6, available=4, total=10)
        roll_up(since=T0)
        traveller.move_to(T0 + datetime.timedelta(hours=37))
        assert alarms(as_viewer) == []


def test_capacity_block_alarm_from_45_minutes_before_its_end(as_viewer, viewer_client, db):
    with time_machine.travel(T0, tick=False) as traveller:
        block = CapacityReservationFactory(reservation_id="cr-0block", capacity_block=True,
                                           end_date=T0 + datetime.timedelta(minutes=50))
        node = NodeFactory(name="gpu-1", reservation=block, capacity_type="reserved")
        assert alarms(as_viewer) == []  # 50 minutes before the end
        traveller.move_to(T0 + datetime.timedelta(minutes=5))
        assert alarms(as_viewer) == [("CapacityBlockRunningNearEnd", "cr-0block")]  # exactly 45 minutes
        [alarm] = as_viewer.get("/api/v1/alarms/", {"reservation_id": "cr-0block"}).json()
        assert alarm["message"] == ("capacity block cr-0block ends in 45 min with 1 node(s) still in it "
                                    "(alarm from 45 min before the end)")
        assert alarm["since"] == "2026-11-21T12:05:00Z"
        assert as_viewer.get("/api/v1/capacity-reservations/cr-0block/").json()["alarms"][0]["type"] == "CapacityBlockRunningNearEnd"
        overview = viewer_client.get(reverse("scheduling:overview")).content.decode()
        assert 'id="block-alarms"' in overview and "cr-0block" in overview
        node.delete()  # drained in time: no alarm
        assert alarms(as_viewer) == []
