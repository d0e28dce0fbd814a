"""#50: a recommendation's money at what the units would otherwise cost: a Savings Plan's rate for the type
when the account has one (read by the EC2 step through the EC2 test server), said in its words, its basis
and the API's priceBasis; list price, as before, when it has none or may not read them."""


import pytest
import time_machine
from django.urls import reverse

from reservations import commitments
from reservations.models import EC2NodeClass, Recommendation
from reservations.recommendations import recompute
from scheduling.adapters.ec2.sync import sync_catalogue, sync_reservations
from scheduling.models import NodePool
from tests.ec2.test_recommendations import history
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers
from tests.support.ec2_fixtures import REGION

pytestmark = pytest.mark.django_db
ZONE = "us-east-1a"
M5 = 0.096  # the bundled on-demand list price of m5.large in us-east-1a


@pytest.fixture(autouse=True)
def _aws(aws_test_credentials, settings, provider, monkeypatch, clock):
    settings.KARPWEB_PROVIDER = "aws"
    settings.KARPWEB_AWS_REGION = REGION
    with time_machine.travel(clock(), tick=False):
        yield


@pytest.fixture
def oversized(world, clock, provider):
    """An m5.large ODCR of 10 whose peak use in 14 days was 4: a shrink to 5 frees 5 units."""
    now = clock()
    sync_catalogue(provider, now=now)
    rid = world.add_reservation("m5.large", ZONE, 10, tags={"team": "web"})
    world.set_available(rid, 7)
    NodePool.objects.create(name="web", node_class=EC2NodeClass.objects.create(
        name="web", capacity_reservation_selector_terms=[{"tags": {"team": "web"}}]))
    assert sync_reservations(provider, now=now).errors == []
    history(rid, now, used=3, peak=4, total=10)
    return rid


def shrink():
    return Recommendation.objects.select_related("reservation").get(kind="shrink")


def test_a_savings_plan_rate_is_what_a_shrink_saves_and_it_says_so(oversized, world, provider, clock, viewer_client):
    world.add_savings_plan({"m5.large": 0.06}, commitment=3.0)
    assert commitments.refresh(provider, clock()) == {"reserved_instances": 0, "savings_plans": 1}
    recompute(clock())
    rec = shrink()
    assert rec.target_count == 5 and rec.savings_per_month == round(5 * 0.06 * 730, 2)
    assert rec.money_text == "saves $219.00 a month (recurring, at the Savings Plan rate)"
    assert rec.money_basis.startswith("5 idle m5.large x $0.0600/h Savings Plan rate x 730 h")
    page = viewer_client.get(reverse("reservations:recommendation", args=[rec.pk])).content.decode()
    assert "at the Savings Plan rate" in page and "$0.0600/h Savings Plan rate" in page
    api = viewer_client.get("/api/v1/recommendations/").json()
    assert [(r["kind"], r["priceBasis"]) for r in api["results"] if r["kind"] == "shrink"] == [("shrink", "savings-plan")]


def test_without_permission_the_shrink_saves_at_list_price(oversized, world, provider, clock):
    world.add_savings_plan({"m5.large": 0.06})
    world.refuse_commitments(ri=False, sp=True)
    commitments.refresh(provider, clock())
    recompute(clock())
    rec = shrink()
    assert rec.savings_per_month == round(5 * M5 * 730, 2) and rec.price_basis == "list"
    assert rec.money_text.endswith("(recurring, at list price)")
