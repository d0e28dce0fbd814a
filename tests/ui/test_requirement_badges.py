"""A requirement reads once: "karpenter.k8s.aws/instance-gpu-count Exists", not followed by its key and
operator again (a template's `r.values` on a requirement without values is the dict's values())."""

import pytest

from reservations.models import EC2NodeClass
from scheduling.simulated_network import resolve
from scheduling.models import NodePool
from scheduling.templatetags.karpweb import requirement
from tests.support.page_text import visible_text

pytestmark = pytest.mark.django_db
GPU = "karpenter.k8s.aws/instance-gpu-count"


def test_an_images_requirements_read_once(viewer_client, demo_world):
    node_class = EC2NodeClass.objects.get(name="default")
    node_class.status_launch = resolve({"amiSelectorTerms": [{"alias": "al2023@latest"}]})  # as the loop writes it
    node_class.save()
    text = visible_text(viewer_client.get(node_class.get_absolute_url()).content.decode())
    assert f"{GPU} Exists" in text and f"{GPU}, Exists" not in text and f"{GPU}, DoesNotExist" not in text
    assert "kubernetes.io/arch In amd64" in text


def test_a_nodepools_requirements_read_once(viewer_client, demo_world):
    pool = NodePool.objects.get(name="gpu-reserved")
    pool.requirements = [*pool.requirements, {"key": GPU, "operator": "Exists"}]
    pool.save()
    text = visible_text(viewer_client.get(pool.get_absolute_url()).content.decode())
    assert f"{GPU} Exists" in text and f"{GPU}, Exists" not in text
    assert "karpenter.k8s.aws/instance-family In g5, p5, trn2" in text


def test_the_words_of_a_requirement():
    assert requirement({"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}) == \
        "kubernetes.io/arch In amd64, arm64"
    assert requirement({"key": GPU, "operator": "DoesNotExist"}) == f"{GPU} DoesNotExist"
    assert requirement({"key": GPU, "operator": "Exists", "values": []}) == f"{GPU} Exists"
