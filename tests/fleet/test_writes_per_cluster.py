"""An operator's change to a cluster's object is written to that cluster's API server: two real
kube-apiservers as two clusters of one fleet, each holding an EC2NodeClass of the same name. The
settings name neither (KARPWEB_CLUSTER stays simulated): the object's own cluster decides."""

import pytest
from django.conf import settings

from fleet.models import AwsAccount, Cluster
from fleet.scope import cluster_scope
from reservations.models import EC2NodeClass
from scheduling import tasks
from scheduling.adapters.kube.resources import EC2NODECLASS
from scheduling.loop import backends
from tests.fleet.test_loop_per_cluster import rest_for
from tests.kube import helpers as h
from tests.kube.conftest import kube_server, second_kube_server, unique  # noqa: F401 - the API servers

pytestmark = [pytest.mark.kube, pytest.mark.django_db]
OPEN = "karpweb.io/open-reservations"


@pytest.fixture
def twin_classes(kube_server, second_kube_server, unique):
    """Clusters a (first server) and b (second server), each with an EC2NodeClass of one name, mirrored."""
    assert settings.KARPWEB_CLUSTER != "kubernetes"
    account = AwsAccount.objects.create(account_id="111111111111", name=f"acct-{unique}")
    a = Cluster.objects.create(name=f"a-{unique}", account=account, region="us-east-1",
                               connection=Cluster.Connection.KUBECONFIG, kubeconfig=str(kube_server.kubeconfig))
    b = Cluster.objects.create(name=f"b-{unique}", account=account, region="us-east-1",
                               connection=Cluster.Connection.KUBECONFIG, kubeconfig=str(second_kube_server.kubeconfig))
    name = f"twin-{unique}"
    for server in (kube_server, second_kube_server):
        h.ec2nodeclass(rest_for(server), name, terms=[{"tags": {"team": "web"}}])
    backends.forget()
    for cluster in (a, b):
        tasks.run_on("sync_kubernetes", cluster, "test")
    yield a, b, name
    backends.forget()


def spec_of(server, name):
    return rest_for(server).get(EC2NODECLASS, name)


def test_an_edit_of_bs_class_writes_to_bs_api_server_not_as(as_operator, twin_classes, kube_server,
                                                               second_kube_server):
    a, b, name = twin_classes
    with cluster_scope(b):
        version = EC2NodeClass.objects.get(name=name).resource_version
    terms = [{"id": "cr-0123456789abcdef0"}]
    response = as_operator.patch(f"/api/v1/ec2nodeclasses/{name}/?cluster={b.name}",
                                 {"capacityReservationSelectorTerms": terms}, format="json",
                                 headers={"If-Match": version})
    assert response.status_code == 200, response.json()
    written = spec_of(second_kube_server, name)
    assert written["spec"]["capacityReservationSelectorTerms"] == terms
    assert response.json()["resourceVersion"] == written["metadata"]["resourceVersion"]
    assert spec_of(kube_server, name)["spec"]["capacityReservationSelectorTerms"] == [{"tags": {"team": "web"}}]
    with cluster_scope(a):
        assert EC2NodeClass.objects.get(name=name).capacity_reservation_selector_terms == [{"tags": {"team": "web"}}]


def test_open_mode_on_bs_class_annotates_bs_object_only(operator_client, twin_classes, kube_server, second_kube_server):
    a, b, name = twin_classes
    response = operator_client.post(f"/clusters/{b.name}/nodeclasses/{name}/open-mode/", {"open_reservations": "true"})
    assert response.status_code == 302, response.content[:400]
    assert spec_of(second_kube_server, name)["metadata"].get("annotations", {}).get(OPEN) == "true"
    assert OPEN not in (spec_of(kube_server, name)["metadata"].get("annotations") or {})
    with cluster_scope(b):
        assert EC2NodeClass.objects.get(name=name).open_reservations is True
    with cluster_scope(a):
        assert EC2NodeClass.objects.get(name=name).open_reservations is False


def test_the_admin_asks_the_objects_cluster_whether_its_spec_is_the_clusters(admin_user_client, twin_classes):
    from django.urls import reverse

    from tests.factories.reservations import EC2NodeClassFactory

    a, b, name = twin_classes
    simulated = Cluster.objects.create(name=f"sim-{a.name}", account=a.account)  # the simulated world's rows are its objects
    with cluster_scope(simulated):
        editable = EC2NodeClassFactory(name=name)
    with cluster_scope(b):
        real = EC2NodeClass.objects.get(name=name)
    page = admin_user_client.get(reverse("admin:reservations_ec2nodeclass_change", args=[real.pk]))
    assert "spec" not in page.context["adminform"].form.fields  # read-only: b's API server owns it
    page = admin_user_client.get(reverse("admin:reservations_ec2nodeclass_change", args=[editable.pk]))
    assert "spec" in page.context["adminform"].form.fields


def test_an_operator_of_a_alone_cannot_write_bs_class(twin_classes, kube_server, second_kube_server, client):
    """Roles per cluster (fleet/access.py) on real API servers: an operator bound to a edits a's class;
    b's is 404 to it through the API and refused on its page, and b's API server keeps its spec."""
    from django.contrib.auth import get_user_model

    from fleet.models import RoleBinding
    from tests.support.api_clients import token_client

    a, b, name = twin_classes
    ann = get_user_model().objects.create_user(f"ann-{a.name}", "ann@example.com", "pw-for-tests-only")
    RoleBinding.objects.create(user=ann, role="operator", cluster=a)
    api = token_client(ann)
    with cluster_scope(a):
        version_a = EC2NodeClass.objects.get(name=name).resource_version
    with cluster_scope(b):
        version_b = EC2NodeClass.objects.get(name=name).resource_version
    terms = [{"id": "cr-0123456789abcdef0"}]
    refused = api.patch(f"/api/v1/ec2nodeclasses/{name}/?cluster={b.name}", {"capacityReservationSelectorTerms": terms},
                        format="json", headers={"If-Match": version_b})
    assert refused.status_code == 404, refused.content[:300]
    client.force_login(ann)
    page = client.post(f"/clusters/{b.name}/nodeclasses/{name}/open-mode/", {"open_reservations": "true"})
    assert page.status_code in (403, 404)
    assert spec_of(second_kube_server, name)["spec"]["capacityReservationSelectorTerms"] == [{"tags": {"team": "web"}}]
    assert OPEN not in (spec_of(second_kube_server, name)["metadata"].get("annotations") or {})
    taken = api.patch(f"/api/v1/ec2nodeclasses/{name}/?cluster={a.name}", {"capacityReservationSelectorTerms": terms},
                      format="json", headers={"If-Match": version_a})
    assert taken.status_code == 200, taken.content[:300]
    assert spec_of(kube_server, name)["spec"]["capacityReservationSelectorTerms"] == terms
