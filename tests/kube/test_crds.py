"""The project's CRDs install into a real kube-apiserver and enforce their schemas."""

import pytest
from kubernetes.client.exceptions import ApiException

from scheduling.adapters.kube.crds import install_crds, load_crds
from scheduling.adapters.kube.resources import CRD, EC2NODECLASS, NODECLAIM, NODEPOOL
from scheduling.adapters.kube.rest import KubeRest

pytestmark = pytest.mark.kube


def test_crds_are_established_and_install_is_idempotent(kube_api_client):
    rest = KubeRest(kube_api_client)
    names = install_crds(kube_api_client)  # the session fixture installed them already
    assert sorted(names) == ["ec2nodeclasses.karpenter.k8s.aws", "nodeclaims.karpenter.sh", "nodeoverlays.karpenter.sh",
                             "nodepools.karpenter.sh"]
    for name in names:
        crd = rest.get(CRD, name)
        established = [c for c in crd["status"]["conditions"] if c["type"] == "Established"]
        assert established and established[0]["status"] == "True"
        assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}


def _nodepool(name, **spec):
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}],
        }}, **spec},
    }


def test_nodepool_defaults_match_upstream(kube_api_client, unique):
    rest = KubeRest(kube_api_client)
    created = rest.create(NODEPOOL, _nodepool(f"defaults-{unique}"))
    assert created["spec"]["disruption"] == {
        "consolidateAfter": "0s", "consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [{"nodes": "10%"}],
    }
    assert created["spec"]["template"]["spec"]["expireAfter"] == "720h"


@pytest.mark.parametrize("spec, field", [
    ({"weight": 101}, "spec.weight"),
    ({"disruption": {"consolidationPolicy": "Sometimes"}}, "spec.disruption.consolidationPolicy"),
    ({"disruption": {"budgets": [{"nodes": "ten"}]}}, "spec.disruption.budgets"),
    ({"limits": {"cpu": "lots"}}, "spec.limits.cpu"),
])
def test_nodepool_schema_rejects_invalid_fields(kube_api_client, unique, spec, field):
    rest = KubeRest(kube_api_client)
    with pytest.raises(ApiException) as info:
        rest.create(NODEPOOL, _nodepool(f"invalid-{unique}", **spec))
    assert info.value.status == 422
    assert field in info.value.body


def test_ec2nodeclass_validates_terms_and_keeps_fields_it_does_not_model(kube_api_client, unique):
    rest = KubeRest(kube_api_client)
    body = {
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": f"bad-{unique}"},
        "spec": {"capacityReservationSelectorTerms": [{"id": "reservation-1"}]},
    }
    with pytest.raises(ApiException) as info:
        rest.create(EC2NODECLASS, body)
    assert info.value.status == 422 and "capacityReservationSelectorTerms" in info.value.body and "cr-" in info.value.body

    body["metadata"]["name"] = f"good-{unique}"
    body["spec"] = {
        "role": "KarpenterNodeRole",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "kubelet": {"maxPods": 110, "systemReserved": {"cpu": "100m"}},
        "someFutureField": {"kept": True},
        "capacityReservationSelectorTerms": [
            {"id": "cr-0123456789abcdef0"},
            {"tags": {"team": "ml", "karpenter.sh/discovery": "*"}, "ownerID": "123456789012"},
            {"instanceMatchCriteria": "open"},
        ],
    }
    created = rest.create(EC2NODECLASS, body)
    assert created["spec"] == body["spec"]


def test_status_is_a_subresource(kube_api_client, unique):
    rest = KubeRest(kube_api_client)
    name = f"status-{unique}"
    body = {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}],
            "resources": {"requests": {"cpu": "1500m", "memory": "2Gi", "pods": 3}},
        },
        "status": {"providerID": "aws:///us-east-1a/i-0123"},
    }
    created = rest.create(NODECLAIM, body)
    assert "status" not in created or "providerID" not in created["status"]
    # An empty message is what Karpenter writes on most conditions; the test server must accept it
    # (fix 4 in scripts/kube-apiserver.sh).
    status = {"providerID": "aws:///us-east-1a/i-0123", "nodeName": "ip-10-0-0-1", "imageID": "ami-0abc",
              "capacity": {"cpu": "2", "memory": "8Gi"}, "allocatable": {"cpu": "1930m", "memory": "7Gi"},
              "conditions": [{"type": "Launched", "status": "True", "reason": "Launched", "message": "",
                              "lastTransitionTime": "2026-11-21T05:00:00Z"}]}
    updated = rest.patch(NODECLAIM, name, {"status": status}, subresource="status")
    assert updated["status"] == status
    assert {crd["spec"]["names"]["kind"] for crd in load_crds()} == {"NodePool", "NodeClaim", "EC2NodeClass", "NodeOverlay"}
