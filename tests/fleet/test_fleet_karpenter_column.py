"""The fleet overview's Karpenter column says what the last check found (#48), never "not checked yet"
for good: the leader-Lease check's answer and reason and when, a simulated cluster as having none to
check, and what the Karpenter audit found."""

import datetime
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet.models import Cluster
from fleet.scope import cluster_scope
from scheduling.models import ControllerGuard, KarpenterLaunch

pytestmark = pytest.mark.django_db


def karpenter_cell(page: str, cluster: str) -> str:
    row = re.search(rf'<tr id="cluster-{re.escape(cluster)}">(.*?)</tr>', page, re.S).group(1)
    return re.sub(r"\s+", " ", re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[4]).strip()


def test_the_karpenter_column_says_what_was_found(demo_world, viewer_client):
    clusters = list(Cluster.objects.order_by("name"))
    checked, audited = clusters[0], clusters[1]
    checked.connection = Cluster.Connection.KUBECONFIG
    checked.save()
    when = timezone.now() - datetime.timedelta(minutes=3)
    with cluster_scope(checked):
        ControllerGuard.objects.create(karpenter_live=True, checked_at=when,
                                       reason="its leader Lease karpenter-leader-election was renewed 4s ago")
    with cluster_scope(audited):
        KarpenterLaunch.objects.create(claim_name="default-x1", instance_type="m5.large", zone="us-east-1a",
                                       capacity_type="on-demand", launched_at=when, reason="none free",
                                       outcome=KarpenterLaunch.Outcome.NO_FREE_UNIT)

    page = viewer_client.get(reverse("fleet_overview")).content.decode()
    cells = {cluster.name: karpenter_cell(page, cluster.name) for cluster in clusters}
    assert not [name for name, cell in cells.items() if "not checked yet" in cell], cells
    assert cells[checked.name].startswith("running: its leader Lease karpenter-leader-election was renewed 4s ago"), cells
    assert f"{when:%Y-%m-%d %H:%M}" in cells[checked.name]
    assert "simulated" in cells[audited.name] and "the audit found 1 NodeClaim karpweb did not create" in cells[audited.name]
