"""The Karpenter audit replayed through the EC2 test server and the real API server: a reservation
with free units, then Karpenter-style NodeClaims (made by "another controller": no karpweb label)
mirrored by the Kubernetes sync. One paid launch beside a free unit is one missed reservation with
its price and accrued cost; a launch after the unit was taken, after a sync that saw none free, or
for a pod that asked for on-demand capacity is not. A paid claim is judged once its pods have
landed, or after the registration TTL without them."""

from datetime import timedelta

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from reservations import utilization
from scheduling.adapters.ec2.sync import sync_catalogue, sync_reservations
from scheduling.adapters.kube.sync import ClusterSync
from scheduling.loop.karpenter_audit import audit_launches
from scheduling.models import KarpenterLaunch, NodeClaim
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers
from tests.support.ec2_fixtures import T0

from . import helpers as h

pytestmark = [pytest.mark.kube, pytest.mark.django_db]
ZONE = "us-east-1a"
M5_ON_DEMAND = 0.096  # the bundled list price the catalogue sync gives m5.large in us-east-1a


@pytest.fixture(autouse=True)
def _aws(aws_test_credentials):
    pass


def karpenter_status(rest, node_class, reservation_id):
    rest.patch(h.EC2NODECLASS, node_class, {"status": {"capacityReservations": [{
        "id": reservation_id, "availabilityZone": ZONE, "instanceType": "m5.large", "instanceMatchCriteria": "targeted",
        "ownerID": "123456789012", "reservationType": "default", "state": "active"}]}}, subresource="status")


def karpenter_claim(rest, name, pool, node_class, capacity_type, reservation_id=""):
    h.nodeclaim(rest, name, pool, labels=claim_labels(pool, capacity_type, reservation_id), node_name=f"node-{name}",
                node_class=node_class)


def claim_labels(pool, capacity_type, reservation_id=""):
    labels = {"karpenter.sh/nodepool": pool, "karpenter.sh/capacity-type": capacity_type,
              "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": ZONE}
    if reservation_id:
        labels.update({"karpenter.k8s.aws/capacity-reservation-id": reservation_id,
                       "karpenter.k8s.aws/capacity-reservation-type": "default"})
    return labels


def registered_with_pod(rest, ns, claim, pool, node_selector):
    """The claim's node registers and the pod it was launched for lands on it."""
    h.node(rest, f"node-{claim}", labels=claim_labels(pool, "on-demand"))
    h.pod(rest, ns, f"pod-{claim}", node_name=f"node-{claim}", node_selector=node_selector)


def test_a_replayed_timeline(world, clock, provider, adapter, rest, unique, viewer):
    sync_catalogue(provider, now=clock())
    reservation = world.add_reservation("m5.large", ZONE, 2, tags={"team": f"ml-{unique}"})
    full = world.add_reservation("m5.large", ZONE, 1, tags={"team": f"full-{unique}"})
    world.set_available(full, 0)
    h.ec2nodeclass(rest, f"nc-{unique}", terms=[{"tags": {"team": f"ml-{unique}"}}])
    h.ec2nodeclass(rest, f"full-{unique}", terms=[{"tags": {"team": f"full-{unique}"}}])
    h.nodepool(rest, f"pool-{unique}", node_class=f"nc-{unique}")
    h.nodepool(rest, f"fullpool-{unique}", node_class=f"full-{unique}")
    h.nodepool(rest, f"odonly-{unique}", node_class=f"nc-{unique}")
    rest.patch(h.NODEPOOL, f"odonly-{unique}", {"spec": {"template": {"spec": {"requirements": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}}})
    for node_class, selected in ((f"nc-{unique}", reservation), (f"full-{unique}", full)):
        karpenter_status(rest, node_class, selected)  # what Karpenter writes: the reservations each class selects
    sync = ClusterSync(adapter)
    sync.sync_once()
    sync_reservations(provider, now=clock())  # T0: 2 free in one, none in the full one

    # After that sync, in this order: a reserved launch takes one of the two units, a paid launch
    # beside the other, a paid launch in the full reservation's pool, one in a pool that allows only
    # on-demand.
    karpenter_claim(rest, f"r-{unique}", f"pool-{unique}", f"nc-{unique}", "reserved", reservation_id=reservation)
    karpenter_claim(rest, f"od-{unique}", f"pool-{unique}", f"nc-{unique}", "on-demand")
    karpenter_claim(rest, f"pin-{unique}", f"pool-{unique}", f"nc-{unique}", "on-demand")
    karpenter_claim(rest, f"full-{unique}", f"fullpool-{unique}", f"full-{unique}", "on-demand")
    karpenter_claim(rest, f"odonly-{unique}", f"odonly-{unique}", f"nc-{unique}", "on-demand")
    world.set_available(full, 1)  # freed after the last sync before its claim: not known to be free
    sync.sync_once()
    launched_at = NodeClaim.objects.get(name=f"od-{unique}").created_at
    assert launched_at > T0  # the cluster's clock is the wall clock, EC2's the test clock at T0

    # Before any node registers only the reserved claim is judged: a paid one waits for its pods.
    assert audit_launches(launched_at)["claims_audited"] >= 1
    ours = lambda: {row.claim_name: row for row in KarpenterLaunch.objects.filter(claim_name__endswith=unique)}  # noqa: E731
    assert {name: row.outcome for name, row in ours().items()} == {f"r-{unique}": "used-reservation"}

    # Three nodes register with their pods: one asks for nothing about capacity, one for on-demand.
    ns = h.namespace(rest, f"audit-{unique}")
    registered_with_pod(rest, ns, f"od-{unique}", f"pool-{unique}", {"topology.kubernetes.io/zone": ZONE})
    registered_with_pod(rest, ns, f"pin-{unique}", f"pool-{unique}", {"karpenter.sh/capacity-type": "on-demand"})
    registered_with_pod(rest, ns, f"full-{unique}", f"fullpool-{unique}", {})
    sync.sync_once()
    assert audit_launches(launched_at + timedelta(minutes=1))["claims_audited"] >= 3
    judged = ours()
    assert {name: row.outcome for name, row in judged.items()} == {
        f"r-{unique}": "used-reservation", f"od-{unique}": "missed-reservation",
        f"pin-{unique}": "no-compatible-reservation", f"full-{unique}": "no-free-unit"}
    assert judged[f"pin-{unique}"].reason.endswith(
        f"reservation {reservation} matches, but its pod {ns}/pod-pin-{unique} requires karpenter.sh/capacity-type In [on-demand]")

    # The claim whose node never registers is judged after the registration TTL, without its pods
    # (from its own creation: the API server's timestamps are whole seconds, so the claims created
    # one after another may straddle a second).
    odonly_at = NodeClaim.objects.get(name=f"odonly-{unique}").created_at
    assert audit_launches(odonly_at + timedelta(minutes=14))["claims_audited"] == 0
    assert audit_launches(odonly_at + timedelta(minutes=15))["claims_audited"] >= 1
    ours = ours()
    odonly = ours[f"odonly-{unique}"]
    assert odonly.outcome == "no-compatible-reservation" and odonly.audited_at == odonly_at + timedelta(minutes=15)
    assert "requirement karpenter.sh/capacity-type In on-demand rules it out" in odonly.reason
    missed = ours[f"od-{unique}"]
    assert missed.reservation_label == reservation and missed.free_units == 1 and missed.ec2_sync_at == T0
    assert missed.price_per_hour == M5_ON_DEMAND
    assert missed.reason == (
        f"NodeClaim od-{unique} (on-demand m5.large in {ZONE}, NodePool pool-{unique}) was launched while reservation "
        f"{reservation} (default, selected by EC2NodeClass nc-{unique}) had 2 free units at the EC2 sync of "
        f"{T0:%Y-%m-%d %H:%M:%S} UTC (1 taken by reserved launches since); NodePool pool-{unique} admits reserved "
        "capacity, and its 1 pod would have run there")
    assert "had no free unit at the EC2 sync" in ours[f"full-{unique}"].reason
    assert audit_launches(launched_at + timedelta(hours=1))["claims_audited"] == 0  # each claim once

    # Syncs every 20 minutes with the unit still free: for three hours the paid node accrues its price.
    clock.advance(seconds=(launched_at - clock()).total_seconds() + 60)
    for _ in range(10):  # every hour from the launch to its end has samples
        sync_reservations(provider, now=clock())
        utilization.roll_up_recent(clock())
        clock.advance(minutes=20)
    end = launched_at + timedelta(hours=3)
    audit_launches(end)
    missed.refresh_from_db()
    assert missed.idle_hours == pytest.approx(3.0, abs=0.02)
    assert missed.missed_dollars == pytest.approx(M5_ON_DEMAND * missed.idle_hours)
    assert missed.ended_at is None

    # The page and the API show it, with totals in list-price dollars.
    client = APIClient()
    client.force_authenticate(viewer)
    rows = client.get(reverse("scheduling-api:karpenterlaunch-list"),
                      {"outcome": "missed-reservation", "reservation": reservation}).json()["results"]
    assert [(r["nodeClaim"], r["missedDollars"]) for r in rows] == [(f"od-{unique}", missed.missed_dollars)]
    bad = client.get(reverse("scheduling-api:karpenterlaunch-list"), {"day": "yesterday"})
    assert bad.status_code == 400 and "day" in bad.json()
    client.logout()

    # Karpenter disrupts its reserved node while the paid one (same type and zone, same class) runs
    # on; the node whose pod asks for on-demand could not have moved, so it is not named.
    rest.delete(h.NODECLAIM, f"r-{unique}")
    sync.sync_once()
    assert audit_launches(end)["reserved_nodes_disrupted"] == 1
    disrupted = KarpenterLaunch.objects.get(claim_name=f"r-{unique}")
    assert disrupted.outcome == "reserved-node-disrupted" and disrupted.ended_at == end
    assert disrupted.reason == (
        f"reserved NodeClaim r-{unique} in {reservation} went away at {end:%Y-%m-%d %H:%M:%S} UTC while the reservation "
        f"was active and paid node node-od-{unique} (m5.large in {ZONE}, under an EC2NodeClass that selects it) kept "
        f"running; the cheapest costs $0.0960/h at list price")

    # The claim goes away: its cost stops there.
    rest.delete(h.NODECLAIM, f"od-{unique}")
    sync.sync_once()
    audit_launches(end + timedelta(hours=1))
    missed.refresh_from_db()
    assert missed.ended_at == end + timedelta(hours=1) and missed.node_claim is None
