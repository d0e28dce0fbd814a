"""#50: the demo shows prices that know commitments: demo-prod's Savings Plan prices its on-demand c5.xlarge
at the plan's rate, demo-research's zonal Reserved Instance makes an on-demand m6i.large in us-east-1b free at
the margin, and the overviews say which prices each cluster's figures use."""

import pytest
from django.urls import reverse

from fleet.models import Cluster
from fleet.scope import cluster_scope
from scheduling.demo import OTHER_CLUSTERS
from scheduling.engine import parse_world
from scheduling.world import current_world

pytestmark = pytest.mark.django_db


def _world(name=None):
    cluster = Cluster.objects.get(name=name) if name else Cluster.objects.exclude(name__in=OTHER_CLUSTERS).get()
    with cluster_scope(cluster):
        return parse_world(current_world())


def test_the_demo_prices_with_its_accounts_commitments(demo_world, admin_user_client):
    prod = _world()  # the first cluster: its name is the install's
    c5 = [n.name for n in prod.nodes if n.labels.get("node.kubernetes.io/instance-type") == "c5.xlarge"]
    assert len(c5) == 1 and prod.coverage.node_basis[c5[0]] == (0.1224, "savings-plan")  # 0.17 x 0.72
    research = _world("research-use1")
    m6i = next(it for it in research.instance_types if it.name == "m6i.large")
    free = [o for o in m6i.offerings if o.capacity_type == "on-demand" and o.reservation is None and o.zone == "us-east-1b"]
    assert [(o.basis, o.list_price) for o in free] == [("reserved-instance", 0.096)]
    page = admin_user_client.get(reverse("fleet_overview")).content.decode()
    assert "prices: with 1 Savings Plan" in page and "prices: with 1 zonal Reserved Instance unit" in page
