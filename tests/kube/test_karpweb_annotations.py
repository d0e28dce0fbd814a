"""karpweb-only EC2NodeClass settings on a real API server: group terms go to the annotation
karpweb.io/capacity-reservation-groups (Karpenter's own CRD would prune resourceGroupARN from spec),
open mode to karpweb.io/open-reservations, and the sync reads both back into the model."""

import json

import pytest

from reservations.models import OPEN_RESERVATIONS_ANNOTATION, EC2NodeClass
from scheduling.adapters.kube.errors import ClusterError
from scheduling.adapters.kube.resources import EC2NODECLASS, NODE, NODECLAIM
from scheduling.adapters.kube.sync import ClusterSync
from scheduling.engine.groups import GROUPS_ANNOTATION

from . import helpers as h

pytestmark = [pytest.mark.kube]

ARN = "arn:aws:resource-groups:us-east-1:123456789012:group/ml-pool"


def test_group_terms_are_written_to_the_annotation_and_read_back(adapter, rest, unique):
    name = f"nc-{unique}"
    h.ec2nodeclass(rest, name, terms=[{"id": "cr-0000000000000000a"}])
    _, version = adapter.get_selector_terms(name)
    terms = [{"tags": {"team": "ml"}}, {"resourceGroupARN": ARN}]
    written = adapter.update_selector_terms(name, terms, version)
    assert written["spec"]["capacityReservationSelectorTerms"] == [{"tags": {"team": "ml"}}]
    assert json.loads(written["metadata"]["annotations"][GROUPS_ANNOTATION]) == [ARN]
    read, version = adapter.get_selector_terms(name)
    assert read == terms
    # Removing the last group term removes the annotation.
    written = adapter.update_selector_terms(name, [{"tags": {"team": "ml"}}], version)
    assert GROUPS_ANNOTATION not in (written["metadata"].get("annotations") or {})


@pytest.mark.django_db
def test_the_sync_merges_group_terms_and_reads_open_mode(adapter, rest, unique):
    name = f"nc-{unique}"
    h.ec2nodeclass(rest, name, terms=[{"tags": {"team": "ml"}}])
    _, version = adapter.get_selector_terms(name)
    written = adapter.update_selector_terms(name, [{"tags": {"team": "ml"}}, {"resourceGroupARN": ARN}], version)
    adapter.set_annotations(name, {OPEN_RESERVATIONS_ANNOTATION: "true"}, written["metadata"]["resourceVersion"])
    ClusterSync(adapter).sync_once()
    row = EC2NodeClass.objects.get(name=name)
    assert row.capacity_reservation_selector_terms == [{"tags": {"team": "ml"}}, {"resourceGroupARN": ARN}]
    assert row.open_reservations is True


def test_open_mode_annotation_is_conflict_safe(adapter, rest, unique):
    name = f"nc-{unique}"
    created = h.ec2nodeclass(rest, name, terms=[])
    stale = created["metadata"]["resourceVersion"]
    updated = adapter.set_annotations(name, {OPEN_RESERVATIONS_ANNOTATION: "true"}, stale)
    assert updated["metadata"]["annotations"][OPEN_RESERVATIONS_ANNOTATION] == "true"
    with pytest.raises(ClusterError) as info:
        adapter.set_annotations(name, {OPEN_RESERVATIONS_ANNOTATION: None}, stale)
    assert info.value.conflict and "annotations not written" in info.value.message
    adapter.set_annotations(name, {OPEN_RESERVATIONS_ANNOTATION: None}, updated["metadata"]["resourceVersion"])
    assert OPEN_RESERVATIONS_ANNOTATION not in (rest.get(EC2NODECLASS, name)["metadata"].get("annotations") or {})


def test_a_group_launch_relabels_the_nodeclaim_with_the_member_ec2_chose(adapter, rest, unique):
    h.ec2nodeclass(rest, f"nc-{unique}")
    h.nodepool(rest, f"pool-{unique}", node_class=f"nc-{unique}")
    h.nodeclaim(rest, f"claim-{unique}", f"pool-{unique}", labels=h.RESERVED_LABELS)
    adapter.set_reservation_label(f"claim-{unique}", "cr-0000000000000000b")
    labels = rest.get(NODECLAIM, f"claim-{unique}")["metadata"]["labels"]
    assert labels["karpenter.k8s.aws/capacity-reservation-id"] == "cr-0000000000000000b"


def test_a_retried_group_launch_relabels_the_registered_node_too(adapter, rest, unique):
    h.ec2nodeclass(rest, f"nc-{unique}")
    h.nodepool(rest, f"pool-{unique}", node_class=f"nc-{unique}")
    h.node(rest, f"node-{unique}", labels=h.RESERVED_LABELS)
    h.nodeclaim(rest, f"claim-{unique}", f"pool-{unique}", labels=h.RESERVED_LABELS, node_name=f"node-{unique}")
    adapter.set_reservation_label(f"claim-{unique}", "cr-0000000000000000b")
    for resource, name in ((NODECLAIM, f"claim-{unique}"), (NODE, f"node-{unique}")):
        labels = rest.get(resource, name)["metadata"]["labels"]
        assert labels["karpenter.k8s.aws/capacity-reservation-id"] == "cr-0000000000000000b", resource
        assert labels["karpenter.sh/capacity-type"] == "reserved"
    # A NodeClaim naming a Node that is gone (deleted meanwhile) still gets its label.
    h.nodeclaim(rest, f"gone-{unique}", f"pool-{unique}", labels=h.RESERVED_LABELS, node_name=f"missing-{unique}")
    adapter.set_reservation_label(f"gone-{unique}", "cr-0000000000000000c")
    assert rest.get(NODECLAIM, f"gone-{unique}")["metadata"]["labels"]["karpenter.k8s.aws/capacity-reservation-id"] == "cr-0000000000000000c"
