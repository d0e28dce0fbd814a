"""#47 (15): the overview says when the EC2 catalogue karpweb plans with is not AWS's: empty (a real cluster
with no EC2: every pending pod is then unschedulable) or simulated beside a
real cluster; and says nothing when it is AWS's."""

import pytest

from scheduling.models import InstanceType
from tests.support.clusters import use_cluster

pytestmark = pytest.mark.django_db


def notice(client) -> str:
    page = client.get("/").content.decode()
    if 'id="catalogue-notice"' not in page:
        return ""
    return page.split('id="catalogue-notice" role="alert">')[1].split("</p>")[0]


def test_an_empty_catalogue_is_said_on_the_overview(viewer_client, settings):
    use_cluster(connection="in-cluster")  # a real cluster (its row says so), no API server needed for the page
    settings.KARPWEB_PROVIDER = "simulated"
    assert not InstanceType.objects.exists()
    said = notice(viewer_client)
    assert said.startswith("The instance-type catalogue is empty: EC2 is simulated (KARPWEB_PROVIDER=simulated) and "
                           "holds no catalogue.")
    assert "every pending pod is unschedulable" in said
    settings.KARPWEB_PROVIDER = "aws"
    assert "the EC2 sync has not run yet, or it failed" in notice(viewer_client)


def test_a_simulated_catalogue_beside_a_real_cluster_is_said_and_aws_is_not(viewer_client, settings):
    InstanceType.objects.create(name="m5.large", cpu_millicores=2000, memory_bytes=8 * 2**30)
    use_cluster(connection="in-cluster")  # a real cluster (its row says so), no API server needed for the page
    settings.KARPWEB_PROVIDER = "simulated"
    assert "EC2 is simulated (KARPWEB_PROVIDER=simulated) beside a real cluster" in notice(viewer_client)
    settings.KARPWEB_PROVIDER = "aws"
    assert notice(viewer_client) == ""
    use_cluster(connection="simulated")  # the quick start's own world
    settings.KARPWEB_PROVIDER = "simulated"
    assert notice(viewer_client) == ""
