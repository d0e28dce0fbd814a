"""The test API server itself: each test starts with none of the objects earlier tests left."""

import pytest

from scheduling.adapters.kube.resources import CRD, NODE, NODECLAIM, PDB, PDB_V1BETA1, POD, SYNCED

from . import helpers as h
from .helpers import NAMESPACE

pytestmark = pytest.mark.kube

HELD = ["karpweb.test/held"]  # no controller here would ever remove it


def test_empty_removes_what_karpweb_syncs_even_when_finalizers_hold_it(kube_server, rest, unique):
    ns = h.namespace(rest, f"left-{unique}")
    h.ec2nodeclass(rest, f"left-{unique}")
    h.nodepool(rest, f"left-{unique}", node_class=f"left-{unique}")
    h.nodeclaim(rest, f"left-{unique}", f"left-{unique}", node_class=f"left-{unique}")
    rest.patch(NODECLAIM, f"left-{unique}", {"metadata": {"finalizers": ["karpenter.sh/termination"]}})
    h.node(rest, f"left-{unique}")
    rest.patch(NODE, f"left-{unique}", {"metadata": {"finalizers": HELD}})
    h.pod(rest, ns, "bound", node_name=f"left-{unique}")
    h.pod(rest, ns, "pending", node_selector={})
    rest.patch(POD, "pending", {"metadata": {"finalizers": HELD}}, namespace=ns)
    rest.delete(POD, "pending", namespace=ns)  # deleting, held by its finalizer

    kube_server.empty()

    # Services stay (the API server's own); this server (v1.20) serves PodDisruptionBudgets as policy/v1beta1.
    emptied = [PDB_V1BETA1 if r is PDB else r for r in SYNCED if r.kind != "Service"]
    assert {resource.kind: rest.list(resource)["items"] for resource in emptied} == {r.kind: [] for r in emptied}
    assert rest.get(NAMESPACE, ns)  # namespaces and the CRDs stay
    assert len(rest.list(CRD)["items"]) == 4  # NodePool, NodeClaim, EC2NodeClass, NodeOverlay


def test_a_test_finds_no_pod_of_another(kube_server, rest):
    """Whatever ran before on this worker (the test above leaves pods, in any order)."""
    assert rest.list(POD)["items"] == []
