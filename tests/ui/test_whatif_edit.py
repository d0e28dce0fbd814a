"""What-if by editing, on the demo world: the form is the page's default, in groups with pickers from
the database; a change gives the plans before and after side by side (cost, idle prepaid capacity,
where each pod goes); bad input is answered by field, naming it; a recommendation opens with its
change applied."""

import pytest
from django.urls import reverse
from django.utils import timezone

from reservations.models import CapacityReservation, Recommendation
from scheduling.models import Pod
from scheduling.templatetags.karpweb import per_hour

URL = reverse("scheduling:whatif")


@pytest.fixture
def demo_world(demo_world_for_module, db, first_cluster_shown):
    """Every test here builds on the demo world: it is seeded once for the module (tests/conftest.py),
    and each test's own writes are rolled back after it."""


def test_scaling_a_workload_shows_before_and_after(demo_world, viewer_client, first_cluster_shown):
    pod = Pod.objects.filter(cluster=first_cluster_shown).exclude(owner_kind="DaemonSet").exclude(node__isnull=True).first()
    page = viewer_client.post(URL, {"scale_like": f"{pod.namespace}/{pod.name}", "scale_times": 40})
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="side-by-side"' in text and "Pods left pending" in text
    before, after = page.context["result"]["before"], page.context["result"]["after"]
    assert after["newNodes"] > before["newNodes"] or after["bound"] > before["bound"]


def test_bad_input_is_answered_by_field(demo_world, viewer_client):
    page = viewer_client.post(URL, {"count_id": "cr-nope", "count": "-3", "scale_like": "web/x"})
    assert page.status_code == 400
    errors = page.context["form"].errors
    assert "count" in errors and "scale_times" in errors
    nothing = viewer_client.post(URL, {})
    assert nothing.status_code == 400 and "fill in at least one change" in nothing.content.decode()
    unknown = viewer_client.post(URL, {"remove_id": "cr-nope"})
    assert unknown.status_code == 400
    assert "Remove reservation: no reservation &#x27;cr-nope&#x27; in this world" in unknown.content.decode()


def test_a_recommendation_opens_with_its_change(demo_world, viewer_client):
    reservation = CapacityReservation.objects.filter(reservation_type="default").first()
    rec = Recommendation.objects.create(kind="cancel", reservation=reservation, reason="test", savings_per_month=1.0,
                                        seen_total=reservation.total_instance_count, computed_at=timezone.now())
    page = viewer_client.get(URL, {"recommendation": rec.pk})
    assert page.status_code == 200 and page.context["form"]["remove_id"].value() == reservation.reservation_id
    assert page.context["result"]["after"] is not None
    detail = viewer_client.get(reverse("reservations:recommendation", args=[rec.pk])).content.decode()
    assert f"?recommendation={rec.pk}" in detail


RESIZED = "cr-0a1b2c3d4e5f60001"  # the demo's m5.large ODCR: 10 units, 6 used


def test_the_form_is_the_default_in_groups_with_pickers(demo_world, viewer_client):
    page = viewer_client.get(URL)
    assert page.status_code == 200 and page.context["tab"] == "edit"
    text = page.content.decode()
    for legend in ("Capacity changes", "Workload changes", "What to compare"):
        assert f"<legend>{legend}</legend>" in text
    assert text.index("<legend>Capacity changes</legend>") < text.index('name="scale_like"')
    assert '<textarea name="world"' not in text and "?tab=paste" in text  # the JSON is the other tab
    form = page.context["form"]
    reservation_ids = [value for value, _ in form.fields["remove_id"].choices if value]
    assert reservation_ids == list(CapacityReservation.objects.order_by("reservation_id")
                                   .values_list("reservation_id", flat=True))
    assert {value for value, _ in form.fields["expire_id"].choices if value} == set(
        CapacityReservation.objects.filter(reservation_type="capacity-block").values_list("reservation_id", flat=True))
    assert f'<option value="{RESIZED}">{RESIZED}: ODCR m5.large in us-east-1a, 6/10 used</option>' in text
    assert '<datalist id="id_add_instance_type-options">' in text and '<option value="m5.large"></option>' in text
    assert '<select name="pool"' in text and '<option value="gpu-reserved">' in text
    paste = viewer_client.get(URL, {"tab": "paste"})
    assert paste.context["tab"] == "paste" and '<textarea name="world"' in paste.content.decode()


def test_a_resize_shows_idle_prepaid_cost_and_each_pods_placement(demo_world, viewer_client, first_cluster_shown):
    page = viewer_client.post(URL, {"count_id": RESIZED, "count": "6"})
    assert page.status_code == 200, page.context["form"].errors
    result = page.context["result"]
    # The 4 free m5.large units (0.096 $/h each on demand) are gone from the idle prepaid capacity.
    assert result["before"]["idleDollarsPerHour"] - result["after"]["idleDollarsPerHour"] == pytest.approx(4 * 0.096)
    text = page.content.decode()
    idle_row = text[text.index('id="idle-prepaid"'):text.index("</tr>", text.index('id="idle-prepaid"'))]
    before, after = (per_hour(value) for value in (result["before"]["idleDollarsPerHour"], result["after"]["idleDollarsPerHour"]))
    assert before in idle_row and after in idle_row and before != after
    paid_row = text[text.index('id="paid-cost"'):text.index("</tr>", text.index('id="paid-cost"'))]
    assert "$0.0266/h" in paid_row and "0.026600" not in paid_row  # EC2's price precision, not a float's
    placements = result["placements"]
    rows = {row["pod"]: row for row in placements["rows"]}
    trainer = rows["default/trainer-pending-0"]
    assert (trainer["before"]["capacityType"], trainer["before"]["reservation"]) == ("reserved", "cr-0a1b2c3d4e5f60006")
    assert placements["count"] == len(placements["rows"]) == Pod.objects.filter(cluster=first_cluster_shown, node_name="").count()
    assert 'id="placements"' in text and "default/trainer-pending-0" in text and "new p5.48xlarge in us-east-1a" in text


def test_removing_the_blocks_reservation_moves_its_pod_and_the_table_says_so(demo_world, viewer_client):
    page = viewer_client.post(URL, {"remove_id": "cr-0a1b2c3d4e5f60006"})
    placements = page.context["result"]["placements"]
    first = placements["rows"][0]  # the pods placed differently come first
    assert first["pod"] == "default/trainer-pending-0" and first["changed"]
    # Its gang's second pod found no room before either; without the block its reason names no free unit in it.
    assert {row["pod"] for row in placements["rows"] if row["changed"]} == {"default/trainer-pending-0",
                                                                           "default/trainer-pending-1"}
    assert first["after"]["pending"].startswith("unschedulable: ")
    assert 'class="changed"' in page.content.decode()


def test_the_placement_table_is_cut_to_a_readable_size_with_the_count(demo_world, viewer_client, first_cluster_shown):
    from scheduling.whatif_edits import PLACEMENT_ROWS

    pod = Pod.objects.filter(cluster=first_cluster_shown).exclude(owner_kind="DaemonSet").exclude(node__isnull=True).order_by("name").first()
    page = viewer_client.post(URL, {"scale_like": f"{pod.namespace}/{pod.name}", "scale_times": PLACEMENT_ROWS + 20})
    placements = page.context["result"]["placements"]
    assert placements["count"] > PLACEMENT_ROWS == len(placements["rows"])
    assert f"The first {PLACEMENT_ROWS} of {placements['count']}" in page.content.decode()


def test_picker_and_catalogue_errors_name_the_field(demo_world, viewer_client):
    cases = {
        "count_id": ({"count_id": "cr-0ffffffffffffffff", "count": "2"}, "Resize reservation: no reservation"),
        "expire_id": ({"expire_id": RESIZED}, "Expire Capacity Block: no Capacity Block &#x27;cr-0a1b2c3d4e5f60001&#x27;"),
        "pool": ({"pool": "nope", "pool_capacity_types": ["spot"]}, "NodePool: no NodePool &#x27;nope&#x27; in this world"),
        "add_instance_type": ({"add_instance_type": "m9.huge", "add_zone": "us-east-1a", "add_count": "1"},
                              "Add a reservation: instance type: no instance type &#x27;m9.huge&#x27; in the catalogue"),
        "add_zone": ({"add_instance_type": "m5.large", "add_zone": "mars-1a", "add_count": "1"},
                     "Zone: no zone &#x27;mars-1a&#x27; in the catalogue"),
    }
    for field, (data, message) in cases.items():
        page = viewer_client.post(URL, data)
        assert page.status_code == 400 and field in page.context["form"].errors, field
        assert message in page.content.decode(), (field, message)
        assert f'id="id_{field}-error"' in page.content.decode()


def test_an_added_reservation_picked_from_the_lists_runs(demo_world, viewer_client):
    page = viewer_client.post(URL, {"add_instance_type": "p5.48xlarge", "add_zone": "us-east-1a", "add_count": "2"})
    assert page.status_code == 200, page.context["form"].errors
    result = page.context["result"]
    assert result["after"]["idleDollarsPerHour"] > result["before"]["idleDollarsPerHour"]  # two more prepaid units idle
