"""Issue #50, Buy: an operator approves a Capacity Block offering for a waiting GPU gang and karpweb buys it in
control mode (PurchaseCapacityBlock through boto3 over HTTP to the EC2 test server), once, within the spending
limit; the block is payment-pending, then scheduled, and at its start the gang is planned into it; it drains at its
end like every block."""

from __future__ import annotations

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import connection

from reservations.buying import recompute_buy_advice
from reservations.models import BuyAdvice, CapacityBlockFee, CapacityBlockPurchase, CapacityReservation, EC2NodeClass
from reservations.purchases import (PURCHASE_TAG, PurchaseRefused, approve, purchase, purchase_advice, purchase_tag,
                                    spent_in_window)
from scheduling.adapters.ec2.sync import sync_catalogue, sync_reservations
from scheduling.loop import backends, disruption, provisioning, simulated
from scheduling.loop.engine_run import simulate_readable
from scheduling.loop.simulated import SimulatedCluster
from scheduling.models import AuditEntry, Decision, Mode, NodePool, Pod
from scheduling.world import current_world
from tests.faults.worlds import launchable_spec

pytestmark = pytest.mark.django_db(transaction=False)
ZONE = "us-east-1a"
API = AuditEntry.Source.API


def at(clock):
    return time_machine.travel(clock(), tick=False)


def gpu_pod(name, job="pretrain"):
    spec = {"containers": [{"name": "train", "resources": {"requests": {"cpu": "90", "memory": "500Gi", "nvidia.com/gpu": "8"}}}]}
    return Pod.objects.create(namespace="ml", name=name, uid=f"uid-{name}", spec=spec, phase="Pending", owner_kind="Job",
                              owner_name=job, cpu_request_millicores=90_000, memory_request_bytes=500 * 2**30)


@pytest.fixture
def gang(world, clock, provider, settings):
    """Two pending 8-GPU pods of one Job; a NodePool that takes only reserved p5 nodes (nothing to place them in
    today), its class selecting no reservation yet; the buy advice the EC2 sync computes."""
    settings.KARPWEB_MODE = "control"
    settings.KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT = 100_000
    with at(clock):
        sync_catalogue(provider, now=clock())
        node_class = EC2NodeClass.objects.create(name="gpu", capacity_reservation_selector_terms=[{"tags": {"team": "ml"}}],
                                                 spec=launchable_spec(provider))
        NodePool.objects.create(name="gpu", node_class=node_class, mode=Mode.CONTROL, requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}])
        gpu_pod("pretrain-0"), gpu_pod("pretrain-1")
        assert recompute_buy_advice(provider, clock())["buy_advice"] >= 1
    return BuyAdvice.objects.order_by("upfront_fee", "start").first()


def buy(advice, operator, provider, clock):
    with at(clock):
        row = approve(advice.pk, user=operator, source=API)
        return purchase(row.pk, user=operator, source=API, cloud=provider)


def settle(provider, cluster, now):
    simulated.bind_pending_pods(simulate_readable(current_world(now), now))
    counts = provisioning.provision(provider, cluster, now=now)
    simulated.bind_pending_pods(simulate_readable(current_world(now), now))
    return counts


def placed() -> dict[str, tuple[str, str]]:
    return {p.name: (p.node.capacity_type, p.node.reservation_label) if p.node else ("pending", "")
            for p in Pod.objects.select_related("node")}


def test_offering_to_purchase_to_the_gang_planned_into_the_block_at_its_start(gang, operator, world, clock, provider, raw_ec2):
    cluster = SimulatedCluster()
    assert (gang.instance_type, gang.nodes_used, gang.pods) == ("p5.48xlarge", 2, ["ml/pretrain-0", "ml/pretrain-1"])
    bought = buy(gang, operator, provider, clock)
    assert (bought.state, bought.approved_by, bought.purchased_by, bought.node_class) == (
        "purchased", operator.username, operator.username, "gpu")
    rid = bought.reservation_id
    [call] = world.calls_of("PurchaseCapacityBlock")
    assert call.params["CapacityBlockOfferingId"] == gang.offering_id and call.params["InstancePlatform"] == "Linux/UNIX"
    tags = {t["Key"]: t["Value"] for t in raw_ec2.describe_capacity_reservations(CapacityReservationIds=[rid])
            ["CapacityReservations"][0]["Tags"]}
    assert tags[PURCHASE_TAG] and tags["karpweb:gang"] == "ml/Job/pretrain"
    assert CapacityBlockFee.objects.get(reservation_id=rid).paid_fee == gang.upfront_fee == bought.paid_fee
    assert {"id": rid} in EC2NodeClass.objects.get(name="gpu").capacity_reservation_selector_terms
    audited = AuditEntry.objects.filter(object_id=str(bought.pk), object_repr__contains="pretrain")
    assert {tuple(e.changes["state"]) for e in audited} == {(None, "approved"), ("approved", "purchased")}
    assert all(e.actor == operator.username for e in audited)

    with at(clock):  # mirrored as EC2 has it: paid for, not usable before its start; nothing places the gang yet
        assert sync_reservations(provider, now=clock()).errors == []
        assert CapacityReservation.objects.get(reservation_id=rid).state == "payment-pending"
        assert recompute_buy_advice(provider, clock()) == {"buy_advice": 0}  # bought: no more advice for the gang
    clock.advance(minutes=2)
    with at(clock):
        sync_reservations(provider, now=clock())
        assert CapacityReservation.objects.get(reservation_id=rid).state == "scheduled"
        assert settle(provider, cluster, clock())["launched"] == 0
        assert placed() == {"pretrain-0": ("pending", ""), "pretrain-1": ("pending", "")}

    clock.advance(seconds=(gang.start - clock()).total_seconds() + 60)  # its start
    with at(clock):
        sync_reservations(provider, now=clock())
        assert CapacityReservation.objects.get(reservation_id=rid).state == "active"
        assert settle(provider, cluster, clock())["launched"] == 2
    assert placed() == {"pretrain-0": ("reserved", rid), "pretrain-1": ("reserved", rid)}
    assert world.reservation(rid)["AvailableInstanceCount"] == 0

    clock.advance(seconds=(gang.end - timedelta(minutes=40) - clock()).total_seconds() + 60)  # its drain, as any block's
    with at(clock):
        sync_reservations(provider, now=clock())
        assert disruption.act_on_disruptions(provider, cluster, {disruption.EXPIRY}, clock())["acted"] >= 1
    drained = Decision.objects.filter(kind=Decision.Kind.DRAIN, outcome=Decision.Outcome.ACTED)
    assert drained.exists() and all(rid in d.reason for d in drained)


def test_two_clicks_buy_once(gang, operator, world, clock, provider):
    first = buy(gang, operator, provider, clock)
    with at(clock):
        again = purchase_advice(gang.pk, user=operator, source=API, cloud=provider)
        assert approve(gang.pk, user=operator, source=API).pk == first.pk
    assert again.pk == first.pk and again.reservation_id == first.reservation_id
    assert len(world.calls_of("PurchaseCapacityBlock")) == 1


@pytest.mark.django_db(transaction=True)
def test_two_workers_at_once_buy_once(gang, operator, world, clock, provider, make_provider):
    with at(clock):
        row = approve(gang.pk, user=operator, source=API)
    results, errors = [], []
    start = threading.Barrier(2)

    def worker():
        try:
            start.wait()
            with at(clock):
                results.append(purchase(row.pk, user=operator, source=API, cloud=make_provider()))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert errors == [] and len(world.calls_of("PurchaseCapacityBlock")) == 1
    row.refresh_from_db()
    assert row.state == "purchased" and row.reservation_id


def test_a_retry_after_an_uncertain_outcome_records_the_block_bought_and_buys_no_other(gang, operator, world, clock,
                                                                                       provider):
    with at(clock):
        row = approve(gang.pk, user=operator, source=API)
    # A worker claimed it and its PurchaseCapacityBlock reached EC2 (with karpweb's tag), then it died unrecorded.
    CapacityBlockPurchase.objects.filter(pk=row.pk).update(state="purchasing", claimed_at=clock() - timedelta(hours=1))
    rid = provider.purchase_capacity_block(gang.offering_id, platform="Linux/UNIX", tags={
        PURCHASE_TAG: purchase_tag(row.cluster_id, row.namespace, row.gang, row.offering_id)})["CapacityReservationId"]
    with at(clock):
        done = purchase(row.pk, user=operator, source=API, cloud=provider)
    assert (done.state, done.reservation_id) == ("purchased", rid)
    assert len(world.calls_of("PurchaseCapacityBlock")) == 1, "found by its tag, not bought again"
    assert spent_in_window(done.cluster.account_id, clock()) == gang.upfront_fee


def test_observe_mode_buys_nothing_and_gives_the_cli_command(gang, operator, world, clock, provider, settings):
    settings.KARPWEB_MODE = "observe"
    with pytest.raises(PurchaseRefused) as refused:
        buy(gang, operator, provider, clock)
    assert refused.value.field == "mode" and refused.value.status == 409
    assert (f"aws ec2 purchase-capacity-block --capacity-block-offering-id {gang.offering_id} "
            "--instance-platform Linux/UNIX") in refused.value.message
    assert not world.calls_of("PurchaseCapacityBlock")
    assert CapacityBlockPurchase.objects.get().state == "approved"  # approval stands; nothing bought


@pytest.mark.parametrize("limit", [0, 1000])
def test_over_the_spending_limit_buys_nothing(gang, operator, world, clock, provider, settings, limit):
    settings.KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT = limit
    with pytest.raises(PurchaseRefused) as refused:
        buy(gang, operator, provider, clock)
    assert refused.value.field == "spendLimit" and "KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT" in refused.value.message
    assert ("is off" in refused.value.message) == (limit == 0)
    assert not world.calls_of("PurchaseCapacityBlock")


def test_the_limit_counts_what_was_bought_in_the_account_over_30_days(gang, operator, world, clock, provider, settings):
    settings.KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT = int(gang.upfront_fee) + 1  # room for one block, not two
    bought = buy(gang, operator, provider, clock)
    assert spent_in_window(bought.cluster.account_id, clock()) == gang.upfront_fee
    gpu_pod("sweep-0", job="sweep")
    with at(clock):
        recompute_buy_advice(provider, clock())
    other = BuyAdvice.objects.filter(gang="Job/sweep").order_by("upfront_fee").first()
    with pytest.raises(PurchaseRefused) as refused:
        buy(other, operator, provider, clock)
    assert refused.value.field == "spendLimit" and len(world.calls_of("PurchaseCapacityBlock")) == 1
    assert spent_in_window(bought.cluster.account_id, clock() + timedelta(days=31)) == Decimal(0)


def test_an_offering_no_longer_sold_is_refused(gang, operator, world, clock, provider, raw_ec2):
    with at(clock):
        row = approve(gang.pk, user=operator, source=API)
    raw_ec2.purchase_capacity_block(CapacityBlockOfferingId=gang.offering_id, InstancePlatform="Linux/UNIX")  # someone else
    with at(clock), pytest.raises(PurchaseRefused) as refused:
        purchase(row.pk, user=operator, source=API, cloud=provider)
    assert refused.value.field == "offering" and "no longer sells" in refused.value.message
    row.refresh_from_db()
    assert row.state == "failed" and len(world.calls_of("PurchaseCapacityBlock")) == 1


def test_not_approved_is_refused(gang, operator, world, clock, provider):
    with at(clock), pytest.raises(PurchaseRefused) as refused:
        purchase_advice(gang.pk, user=operator, source=API, cloud=provider)
    assert refused.value.field == "approval" and not world.calls_of("PurchaseCapacityBlock")


def test_a_gang_that_no_longer_waits_is_not_bought_for(gang, operator, world, clock, provider):
    with at(clock):
        row = approve(gang.pk, user=operator, source=API)
    Pod.objects.filter(namespace="ml").update(node_name="gpu-7", phase="Running")
    with at(clock), pytest.raises(PurchaseRefused) as refused:
        purchase(row.pk, user=operator, source=API, cloud=provider)
    assert refused.value.field == "gang" and not world.calls_of("PurchaseCapacityBlock")


def test_one_offering_approved_per_gang(gang, operator, world, clock, provider):
    with at(clock):
        approve(gang.pk, user=operator, source=API)
        other = BuyAdvice.objects.exclude(pk=gang.pk).filter(gang=gang.gang).first()
        with pytest.raises(PurchaseRefused) as refused:
            approve(other.pk, user=operator, source=API)
    assert refused.value.field == "gang" and gang.offering_id in refused.value.message


def test_a_viewer_may_not_approve(gang, viewer, world, clock, provider):
    from django.core.exceptions import PermissionDenied

    from fleet.access import opened
    from karpweb.roles import access_of

    with at(clock), opened(access_of(viewer)), pytest.raises(PermissionDenied):
        approve(gang.pk, user=viewer, source=API)
    assert not CapacityBlockPurchase.objects.exists()


def test_a_gang_on_an_ultraserver_type_is_advised_ultraserver_blocks_and_buys_one(world, clock, provider, operator,
                                                                                  settings):
    """trn2u.48xlarge is sold in Capacity Blocks only inside Trn2 UltraServers (four instances each): pods that select
    it get UltraServer offerings (UltraserverType, UltraserverCount), and the block bought is one."""
    settings.KARPWEB_MODE = "control"
    settings.KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT = 100_000
    with at(clock):
        sync_catalogue(provider, now=clock())
        node_class = EC2NodeClass.objects.create(name="trn", spec=launchable_spec(provider))
        NodePool.objects.create(name="trn", node_class=node_class, requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}])
        for i in range(5):
            Pod.objects.create(namespace="ml", name=f"moe-{i}", uid=f"uid-moe-{i}", phase="Pending", owner_kind="Job",
                               owner_name="moe", spec={
                                   "nodeSelector": {"node.kubernetes.io/instance-type": "trn2u.48xlarge"},
                                   "containers": [{"name": "train", "resources": {"requests": {
                                       "cpu": "100", "memory": "1000Gi", "aws.amazon.com/neuron": "16"}}}]})
        assert recompute_buy_advice(provider, clock())["buy_advice"] >= 1
    asked = [c.params for c in world.calls_of("DescribeCapacityBlockOfferings")]
    assert asked and all(p.get("UltraserverType") == "u-trn2x64" and str(p.get("UltraserverCount")) == "2" for p in asked)
    advice = BuyAdvice.objects.order_by("upfront_fee").first()
    assert (advice.instance_type, advice.instance_count, advice.ultraserver_type, advice.nodes_used) == (
        "trn2u.48xlarge", 8, "u-trn2x64", 5)
    bought = buy(advice, operator, provider, clock)
    assert bought.state == "purchased" and world.reservation(bought.reservation_id)["InstanceType"] == "trn2u.48xlarge"
    assert world.calls_of("DescribeCapacityBlockOfferings")[-1].params.get("UltraserverType") == "u-trn2x64"


def test_advice_keeps_its_id_while_ec2_quotes_the_same_offering(gang, clock, provider):
    ids = set(BuyAdvice.objects.values_list("pk", flat=True))
    clock.advance(minutes=5)
    with at(clock):
        recompute_buy_advice(provider, clock())
    assert set(BuyAdvice.objects.values_list("pk", flat=True)) == ids
    assert BuyAdvice.objects.get(pk=gang.pk).computed_at == clock()


# --- the API: approve, then purchase, with the cluster's own provider (its account's credentials) -----------------


@pytest.fixture
def api(gang, settings, ec2_endpoint, operator):
    """The operator's API client; karpweb's loop backends talk to the EC2 test server (as in production, from the
    cluster's row and the settings)."""
    from rest_framework.test import APIClient

    from tests.support.clusters import use_cluster

    settings.KARPWEB_PROVIDER = "aws"
    settings.KARPWEB_EC2_ENDPOINT_URL = ec2_endpoint
    settings.KARPWEB_AWS_REGION = "us-east-1"
    settings.KARPWEB_PRICING_SOURCE = "bundled"
    use_cluster(region="us-east-1")
    client = APIClient()
    client.force_authenticate(operator)
    yield client
    backends.forget()


def post(api, clock, advice, action, body=None):
    with at(clock):
        return api.post(f"/api/v1/capacity-block-advice/{advice.pk}/{action}/", body or {}, format="json")


def test_the_api_approves_then_buys_once(api, gang, world, clock, operator):
    refused = post(api, clock, gang, "purchase")
    assert refused.status_code == 409 and "approval" in refused.json()
    approved = post(api, clock, gang, "approve")
    assert approved.status_code == 200, approved.content
    assert (approved.json()["state"], approved.json()["approvedBy"], approved.json()["nodeClass"]) == (
        "approved", operator.username, "gpu")
    with at(clock):
        listed = api.get("/api/v1/capacity-block-advice/", {"gang": "Job/pretrain"}).json()["results"]
    mine = next(r for r in listed if r["id"] == gang.pk)
    assert mine["purchase"]["state"] == "approved" and "runs in 23 h 30 min, for 24 h" in mine["comparedWithWaiting"]
    assert "on-demand nodes of this type are offered ($4,719.36" in mine["comparedWithWaiting"]
    assert mine["cliCommand"].startswith("aws ec2 purchase-capacity-block --capacity-block-offering-id")
    bought = post(api, clock, gang, "purchase")
    assert bought.status_code == 200, bought.content
    assert bought.json()["state"] == "purchased" and bought.json()["reservationID"].startswith("cr-")
    assert post(api, clock, gang, "purchase").json()["reservationID"] == bought.json()["reservationID"]
    assert len(world.calls_of("PurchaseCapacityBlock")) == 1


@pytest.mark.parametrize(("setting", "value", "field"), [("KARPWEB_MODE", "observe", "mode"),
                                                        ("KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT", 10, "spendLimit")])
def test_the_api_refuses_naming_the_field(api, gang, world, clock, settings, setting, value, field):
    assert post(api, clock, gang, "approve").status_code == 200
    setattr(settings, setting, value)
    refused = post(api, clock, gang, "purchase")
    assert refused.status_code == 409 and list(refused.json()) == [field], refused.content
    assert not world.calls_of("PurchaseCapacityBlock")


def test_the_api_refuses_bad_approvals(api, gang, viewer, clock):
    from rest_framework.test import APIClient

    unknown = post(api, clock, gang, "approve", {"nodeClass": "nope"})
    assert unknown.status_code == 400 and "nodeClass" in unknown.json()
    assert post(api, clock, gang, "approve", {"nodeclass": "gpu"}).status_code == 400  # a typo is no silent no-op
    reader = APIClient()
    reader.force_authenticate(viewer)
    assert post(reader, clock, gang, "approve").status_code == 403
    assert not CapacityBlockPurchase.objects.exists()


# --- the pages: the pod page's Approve and Buy (the CLI command in observe mode), the list of advice -------------


def test_the_pod_page_approves_then_buys_and_shows_the_block_bought(api, gang, operator_client, world, clock):
    page = "/pods/ml/pretrain-1/"
    with at(clock):
        shown = operator_client.get(page).content.decode()
        assert 'class="buy-approve"' in shown and 'class="buy-purchase"' not in shown and "runs in 23 h 30 min" in shown
        operator_client.post(f"/capacity-blocks/to-buy/{gang.pk}/approve/")
        shown = operator_client.get(page).content.decode()
        assert 'class="buy-purchase"' in shown and f"Buy for ${gang.upfront_fee}" in shown
        listed = operator_client.get("/capacity-blocks/to-buy/").content.decode()
        assert "Job/pretrain" in listed and "approved" in listed
        assert operator_client.post(f"/capacity-blocks/to-buy/{gang.pk}/purchase/").status_code == 302
        row = CapacityBlockPurchase.objects.get()
        assert row.state == "purchased" and len(world.calls_of("PurchaseCapacityBlock")) == 1
        recompute_buy_advice(backends.cloud(), clock())
        shown = operator_client.get(page).content.decode()
    assert 'id="blocks-bought"' in shown and row.reservation_id in shown and 'id="buy-advice"' not in shown


def test_in_observe_mode_the_pod_page_shows_the_cli_command_and_no_buy_button(api, gang, operator_client, clock,
                                                                            settings):
    settings.KARPWEB_MODE = "observe"
    with at(clock):
        shown = operator_client.get("/pods/ml/pretrain-0/").content.decode()
    assert f"aws ec2 purchase-capacity-block --capacity-block-offering-id {gang.offering_id}" in shown
    assert 'class="buy-purchase"' not in shown and "karpweb buys nothing here (it only observes)" in shown


def test_a_refused_purchase_on_the_page_names_the_field(api, gang, operator_client, world, clock, settings):
    settings.KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT = 0
    with at(clock):
        operator_client.post(f"/capacity-blocks/to-buy/{gang.pk}/approve/")
        followed = operator_client.post(f"/capacity-blocks/to-buy/{gang.pk}/purchase/", follow=True).content.decode()
    assert "spendLimit: buying Capacity Blocks is off" in followed and not world.calls_of("PurchaseCapacityBlock")
