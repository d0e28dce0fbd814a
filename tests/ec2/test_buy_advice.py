"""Issue #50, Buy (advice): a gang of pending GPU pods the plan cannot place gets the Capacity Block
offerings that would hold it, as EC2's DescribeCapacityBlockOfferings quotes them through boto3 over HTTP
to the EC2 test server, cheapest first; the EC2 sync recomputes them; nothing is bought."""

from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine

from reservations.buying import recompute_buy_advice
from reservations.models import BuyAdvice
from scheduling.adapters.ec2.sync import sync_catalogue
from scheduling.models import Pod
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers
from tests.support.ec2_server import CAPACITY_BLOCK_HOUR_PRICE

pytestmark = pytest.mark.django_db


def gpu_pod(name, *, job="pretrain", gpus="8", node_name=""):
    return Pod.objects.create(namespace="ml", name=name, node_name=node_name, phase="Running" if node_name else "Pending",
                              owner_kind="Job", owner_name=job, cpu_request_millicores=90_000,
                              spec={"containers": [{"name": "train", "resources": {"requests": {
                                  "cpu": "90", "memory": "500Gi", "nvidia.com/gpu": gpus}}}]})


def test_a_waiting_gpu_gang_gets_the_offerings_that_hold_it_cheapest_first(provider, clock, world):
    now = clock()
    sync_catalogue(provider, now=now)
    for i in range(3):
        gpu_pod(f"pretrain-{i}")
    gpu_pod("running-0", node_name="gpu-1")  # bound: not waiting
    Pod.objects.create(namespace="web", name="api-0", spec={"containers": [{"name": "api"}]})  # no accelerator
    with time_machine.travel(now, tick=False):
        assert recompute_buy_advice(provider, now)["buy_advice"] >= 2
    advice = list(BuyAdvice.objects.order_by("upfront_fee", "start"))
    assert {a.gang for a in advice} == {"Job/pretrain"}
    best = advice[0]
    assert best.pods == ["ml/pretrain-0", "ml/pretrain-1", "ml/pretrain-2"]
    assert best.nodes_used == best.instance_count == 3 and best.hours == 24 and best.end - best.start == timedelta(hours=24)
    fees = [a.upfront_fee for a in advice if a.instance_type == best.instance_type]
    assert fees[0] == Decimal(f"{24 * 3 * CAPACITY_BLOCK_HOUR_PRICE:.2f}") and fees == sorted(fees)
    asked = [c for c in world.calls_of("DescribeCapacityBlockOfferings")]
    assert asked and all(c.params["CapacityDurationHours"] in ("24", 24) for c in asked)
    assert not world.calls_of("PurchaseCapacityBlock"), "advice only"

    # The gang is placed: the next sync's advice has none for it.
    Pod.objects.filter(name__startswith="pretrain-").update(node_name="gpu-2", phase="Running")
    with time_machine.travel(now, tick=False):
        assert recompute_buy_advice(provider, now) == {"buy_advice": 0}
    assert not BuyAdvice.objects.exists()


def test_the_api_lists_the_advice_with_its_cluster_and_filters(provider, clock, world, viewer):
    from rest_framework.test import APIClient

    now = clock()
    sync_catalogue(provider, now=now)
    for i in range(2):
        gpu_pod(f"finetune-{i}", job="finetune")
    with time_machine.travel(now, tick=False):
        recompute_buy_advice(provider, now)
    api = APIClient()
    api.force_authenticate(viewer)
    listed = api.get("/api/v1/capacity-block-advice/", {"gang": "Job/finetune"}).json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert rows and all(r["gang"] == "Job/finetune" and r["pods"] == ["ml/finetune-0", "ml/finetune-1"] for r in rows)
    assert rows[0]["cluster"] and rows[0]["account"] and Decimal(rows[0]["upfrontFee"]) > 0
    assert api.get("/api/v1/capacity-block-advice/", {"gang": "Job/other"}).json()["results"] == []
    other = api.get("/api/v1/capacity-block-advice/", {"cluster": "no-such"})
    assert other.status_code in (200, 400) and (other.status_code == 400 or other.json()["results"] == [])


def test_a_waiting_pods_page_shows_the_blocks_that_would_hold_its_gang(provider, clock, world, viewer_client):
    now = clock()
    sync_catalogue(provider, now=now)
    for i in range(2):
        gpu_pod(f"sweep-{i}", job="sweep")
    with time_machine.travel(now, tick=False):
        recompute_buy_advice(provider, now)
    best = BuyAdvice.objects.order_by("upfront_fee", "start").first()
    page = viewer_client.get("/pods/ml/sweep-1/").content.decode()
    assert 'id="buy-advice"' in page and "Capacity Blocks that would hold its gang (Job/sweep)" in page
    assert f"${best.upfront_fee}" in page and best.offering_id in page and "An operator approves one" in page
    Pod.objects.create(namespace="ml", name="notebook-0", spec={"containers": [{"name": "lab"}]})  # no accelerator
    assert 'id="buy-advice"' not in viewer_client.get("/pods/ml/notebook-0/").content.decode()
