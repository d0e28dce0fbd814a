"""KubeClusterAdapter's actions against the real kube-apiserver."""

import datetime
import threading
import time

import pytest

from scheduling.adapters.kube.adapter import KubeClusterAdapter
from scheduling.adapters.kube.errors import ClusterError
from scheduling.adapters.kube.interface import ClusterAdapter, Condition, NodeClaimRequest
from scheduling.adapters.kube.resources import EC2NODECLASS, NODE, NODECLAIM, NODEPOOL, POD
from scheduling.adapters.kube.rest import KubeRest

from . import helpers as h

pytestmark = pytest.mark.kube

RESERVATION_KEYS = (
    "karpenter.k8s.aws/capacity-reservation-id",
    "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-interruptible",
)


@pytest.fixture
def adapter(kube_api_client):
    return KubeClusterAdapter(kube_api_client, eviction_timeout=3.0, eviction_attempts=5,
                              eviction_backoff=(0.1, 0.5), pod_wait=5.0)


def test_adapter_implements_the_interface(adapter):
    assert isinstance(adapter, ClusterAdapter)


# --- NodeClaim creation ----------------------------------------------------------------------------
def test_create_nodeclaim_for_a_provisioning_decision(adapter, rest, unique):
    pool = h.nodepool(rest, f"gpu-{unique}", node_class=f"nc-{unique}")
    request = NodeClaimRequest(
        nodepool=f"gpu-{unique}",
        node_class_ref={"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": f"nc-{unique}"},
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]},
            {"key": "karpenter.k8s.aws/capacity-reservation-id", "operator": "In", "values": ["cr-0abc"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge", "p4d.24xlarge"],
             "minValues": 1},
        ],
        resources={"cpu": "7500m", "memory": "30Gi", "nvidia.com/gpu": "8"},
        labels={"team": "ml"},
        annotations={"karpweb.io/decision": "42"},
        taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        expire_after="336h",
    )
    created = adapter.create_nodeclaim(request)

    name = created["metadata"]["name"]
    assert name.startswith(f"gpu-{unique}-")
    stored = rest.get(NODECLAIM, name)
    assert stored["metadata"]["labels"] == {
        "team": "ml", "karpenter.sh/nodepool": f"gpu-{unique}", "karpenter.k8s.aws/ec2nodeclass": f"nc-{unique}",
    }
    assert stored["metadata"]["annotations"] == {"karpweb.io/decision": "42"}
    owner = stored["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("NodePool", f"gpu-{unique}", pool["metadata"]["uid"])
    assert stored["spec"]["requirements"] == request.requirements
    assert stored["spec"]["resources"] == {"requests": request.resources}
    assert stored["spec"]["taints"] == request.taints
    assert stored["spec"]["expireAfter"] == "336h"
    assert stored["spec"]["nodeClassRef"]["name"] == f"nc-{unique}"


def test_delete_nodeclaim(adapter, rest, unique):
    h.nodepool(rest, f"pool-{unique}")
    h.nodeclaim(rest, f"claim-{unique}", f"pool-{unique}")
    assert adapter.delete_nodeclaim(f"claim-{unique}") is True
    assert adapter.delete_nodeclaim(f"claim-{unique}") is False
    with pytest.raises(ClusterError):
        adapter.get("NodeClaim", f"claim-{unique}")


def test_create_nodeclaim_errors_name_the_object(adapter, rest, unique):
    request = NodeClaimRequest(nodepool=f"missing-{unique}", node_class_ref=h.NODE_CLASS_REF, requirements=[])
    with pytest.raises(ClusterError) as info:
        adapter.create_nodeclaim(request)
    assert info.value.message == f"NodePool missing-{unique}: not found (deleted in the meantime?)"

    h.nodepool(rest, f"pool-{unique}")
    bad = NodeClaimRequest(nodepool=f"pool-{unique}", node_class_ref=h.NODE_CLASS_REF, name=f"claim-{unique}",
                           requirements=[{"key": "karpenter.sh/capacity-type", "operator": "Maybe"}])
    with pytest.raises(ClusterError) as info:
        adapter.create_nodeclaim(bad)
    assert info.value.status == 422
    assert info.value.message.startswith(f"NodeClaim claim-{unique}: the API server rejected the create as invalid: ")
    assert "spec.requirements.operator" in info.value.message


# --- demotion --------------------------------------------------------------------------------------
def test_demotion_relabels_on_demand_and_strips_every_reservation_label(adapter, rest, unique):
    h.nodepool(rest, f"pool-{unique}")
    h.nodeclaim(rest, f"claim-{unique}", f"pool-{unique}", labels=h.RESERVED_LABELS, node_name=f"node-{unique}")
    h.node(rest, f"node-{unique}", labels={**h.RESERVED_LABELS, "karpenter.sh/nodepool": f"pool-{unique}"})

    result = adapter.demote(nodeclaim=f"claim-{unique}")

    assert result.changed == {f"NodeClaim claim-{unique}": list(RESERVATION_KEYS),
                              f"Node node-{unique}": list(RESERVATION_KEYS)}
    for resource, name in ((NODECLAIM, f"claim-{unique}"), (NODE, f"node-{unique}")):
        labels = rest.get(resource, name)["metadata"]["labels"]
        assert labels["karpenter.sh/capacity-type"] == "on-demand"
        assert not [key for key in labels if key.startswith("karpenter.k8s.aws/capacity-reservation")]
        assert labels["karpenter.sh/nodepool"] == f"pool-{unique}"  # other labels untouched

    again = adapter.demote(nodeclaim=f"claim-{unique}")
    assert again.changed == {}
    assert again.skipped[f"NodeClaim claim-{unique}"] == "already on-demand without reservation labels"


def test_demotion_leaves_spot_and_missing_objects_alone(adapter, rest, unique):
    h.node(rest, f"spot-{unique}", labels={"karpenter.sh/capacity-type": "spot"})
    result = adapter.demote(node=f"spot-{unique}")
    assert result.changed == {}
    assert result.skipped == {f"Node spot-{unique}": "capacity-type is spot, not reserved"}
    assert adapter.demote(nodeclaim=f"gone-{unique}").skipped == {f"NodeClaim gone-{unique}": "not found"}


class RacingRest(KubeRest):
    """Reads an object, then lets another writer change it before the adapter writes: a real
    conflict on the real server."""

    def __init__(self, api_client, other: KubeRest, races: int):
        super().__init__(api_client)
        self.other, self.races, self.reads = other, races, 0

    def get(self, resource, name, namespace=None, subresource=None):
        obj = super().get(resource, name, namespace, subresource)
        self.reads += 1
        if self.races:
            self.races -= 1
            self.other.patch(resource, name, {"metadata": {"annotations": {f"raced-{self.races}": "yes"}}},
                             namespace=namespace)
        return obj


def test_label_and_status_writes_reread_and_reapply_on_conflict(kube_api_client, rest, unique):
    h.node(rest, f"node-{unique}", labels=h.RESERVED_LABELS)
    adapter = KubeClusterAdapter(kube_api_client)
    adapter.rest = RacingRest(kube_api_client, rest, races=2)

    result = adapter.demote(node=f"node-{unique}")

    assert adapter.rest.reads == 3  # two conflicts, then success
    node = rest.get(NODE, f"node-{unique}")
    assert node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "on-demand"
    assert node["metadata"]["annotations"] == {"raced-1": "yes", "raced-0": "yes"}  # the other writes survived
    assert result.changed == {f"Node node-{unique}": list(RESERVATION_KEYS)}

    h.ec2nodeclass(rest, f"nc-{unique}")
    adapter.rest = RacingRest(kube_api_client, rest, races=1)
    adapter.set_conditions("EC2NodeClass", f"nc-{unique}", [Condition("CapacityReservationsReady", "True")])
    assert adapter.rest.reads == 2
    stored = rest.get(EC2NODECLASS, f"nc-{unique}")
    assert [c["type"] for c in stored["status"]["conditions"]] == ["CapacityReservationsReady"]
    assert stored["metadata"]["annotations"] == {"raced-0": "yes"}


def test_conflicts_give_up_after_the_bound(kube_api_client, rest, unique):
    h.node(rest, f"node-{unique}", labels=h.RESERVED_LABELS)
    adapter = KubeClusterAdapter(kube_api_client, conflict_retries=3)
    adapter.rest = RacingRest(kube_api_client, rest, races=10)
    with pytest.raises(ClusterError) as info:
        adapter.demote(node=f"node-{unique}")
    assert info.value.conflict and adapter.rest.reads == 3
    assert info.value.message.startswith(f"Node node-{unique}: conflict: it was changed by someone else")


# --- status conditions -----------------------------------------------------------------------------
def test_status_conditions_on_ec2nodeclass_and_nodepool(adapter, rest, unique):
    h.ec2nodeclass(rest, f"nc-{unique}", terms=[{"id": "cr-0123456789abcdef0"}])
    reservations = [{"id": "cr-0123456789abcdef0", "availabilityZone": "us-east-1a", "instanceType": "p5.48xlarge",
                     "instanceMatchCriteria": "targeted", "ownerID": "123456789012",
                     "reservationType": "capacity-block", "endTime": "2026-11-22T12:00:00Z", "state": "active",
                     "interruptible": False}]
    written = adapter.set_conditions(
        "EC2NodeClass", f"nc-{unique}",
        [Condition("CapacityReservationsReady", "True", "CapacityReservationsReady", "1 reservation selected")],
        status_fields={"capacityReservations": reservations},
    )
    status = rest.get(EC2NODECLASS, f"nc-{unique}")["status"]
    assert status == written["status"]
    assert status["capacityReservations"] == reservations
    (condition,) = status["conditions"]
    assert condition["type"] == "CapacityReservationsReady" and condition["status"] == "True"
    assert condition["reason"] == "CapacityReservationsReady" and condition["message"] == "1 reservation selected"
    assert condition["observedGeneration"] == 1
    first_transition = condition["lastTransitionTime"]

    # lastTransitionTime has one-second resolution: the adapter's clock moves two seconds on (no wait).
    later = adapter.clock() + datetime.timedelta(seconds=2)
    adapter.clock = lambda: later
    adapter.set_conditions("EC2NodeClass", f"nc-{unique}",
                           [Condition("CapacityReservationsReady", "True", "CapacityReservationsReady", "still 1")])
    kept = rest.get(EC2NODECLASS, f"nc-{unique}")["status"]
    assert kept["conditions"][0]["message"] == "still 1"
    assert kept["conditions"][0]["lastTransitionTime"] == first_transition  # same status: no transition
    assert kept["capacityReservations"] == reservations  # other status fields kept

    adapter.set_conditions("EC2NodeClass", f"nc-{unique}",
                           [Condition("CapacityReservationsReady", "False", "NoReservationsFound", "none active")])
    flipped = rest.get(EC2NODECLASS, f"nc-{unique}")["status"]["conditions"][0]
    assert flipped["status"] == "False" and flipped["lastTransitionTime"] > first_transition

    h.nodepool(rest, f"pool-{unique}", node_class=f"nc-{unique}")
    adapter.set_conditions("NodePool", f"pool-{unique}", [
        Condition("NodeClassReady", "False", "InvalidSelectorTerms", "EC2NodeClass nc has invalid terms"),
        Condition("Ready", "False"),
    ], status_fields={"resources": {"cpu": "0", "nodes": "0"}})
    pool_status = rest.get(NODEPOOL, f"pool-{unique}")["status"]
    assert [(c["type"], c["status"], c["reason"]) for c in pool_status["conditions"]] == [
        ("NodeClassReady", "False", "InvalidSelectorTerms"), ("Ready", "False", "NotReady"),
    ]
    assert pool_status["resources"] == {"cpu": "0", "nodes": "0"}


# --- selector terms --------------------------------------------------------------------------------
def test_selector_term_edit_writes_the_whole_list_and_is_refused_on_a_stale_version(adapter, rest, unique):
    name = f"nc-{unique}"
    h.ec2nodeclass(rest, name, terms=[{"id": "cr-0000000000000000a"}, {"tags": {"team": "ml"}}])
    terms, version = adapter.get_selector_terms(name)
    assert terms == [{"id": "cr-0000000000000000a"}, {"tags": {"team": "ml"}}]

    # Someone else edits the terms (kubectl, Karpenter's UI, a second karpweb user).
    mine = [{"tags": {"team": "ml", "env": "prod"}}]
    theirs, _ = adapter.get_selector_terms(name)
    updated = adapter.update_selector_terms(name, theirs + [{"instanceMatchCriteria": "open"}], version)
    assert updated["spec"]["capacityReservationSelectorTerms"][-1] == {"instanceMatchCriteria": "open"}

    with pytest.raises(ClusterError) as info:
        adapter.update_selector_terms(name, mine, version)  # based on the version read before their edit
    assert info.value.conflict
    assert info.value.message == (
        f"EC2NodeClass {name}: capacityReservationSelectorTerms not written: the EC2NodeClass changed after "
        f"resourceVersion {version} was read (someone else edited it); reload it and apply the edit again")
    stored = rest.get(EC2NODECLASS, name)["spec"]["capacityReservationSelectorTerms"]
    assert stored == [{"id": "cr-0000000000000000a"}, {"tags": {"team": "ml"}}, {"instanceMatchCriteria": "open"}]

    # With the current version the edit replaces the whole list (a merge patch replaces lists).
    _, current = adapter.get_selector_terms(name)
    adapter.update_selector_terms(name, mine, current)
    assert rest.get(EC2NODECLASS, name)["spec"]["capacityReservationSelectorTerms"] == mine


def test_nodepool_requirements_edit_is_refused_on_a_stale_version(adapter, rest, unique):
    name = f"np-{unique}"
    stale = h.nodepool(rest, name)["metadata"]["resourceVersion"]
    theirs = adapter.update_nodepool_requirements(name, [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                                          "values": ["on-demand"]}], stale)
    mine = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "spot"]}]
    with pytest.raises(ClusterError) as info:
        adapter.update_nodepool_requirements(name, mine, stale)
    assert info.value.conflict
    assert info.value.message == (
        f"NodePool {name}: requirements not written: the NodePool changed after resourceVersion {stale} was read "
        "(someone else edited it); reload it and apply the edit again")
    requirements = lambda: rest.get(NODEPOOL, name)["spec"]["template"]["spec"]["requirements"]  # noqa: E731
    assert requirements()[0]["values"] == ["on-demand"]
    adapter.update_nodepool_requirements(name, mine, theirs["metadata"]["resourceVersion"])
    assert requirements() == mine
    with pytest.raises(ClusterError) as info:
        adapter.update_nodepool_requirements(f"np-{unique}-absent", mine, stale)
    assert info.value.not_found and not info.value.conflict


def test_invalid_selector_terms_are_refused_before_writing(adapter, rest, unique):
    name = f"nc-{unique}"
    h.ec2nodeclass(rest, name, terms=[{"id": "cr-0000000000000000a"}])
    _, version = adapter.get_selector_terms(name)
    with pytest.raises(ClusterError) as info:
        adapter.update_selector_terms(name, [{"id": "cr-0000000000000000b", "tags": {"a": "b"}}, {"ownerID": "123456789012"}],
                                      version)
    assert info.value.status == 422
    assert info.value.causes == [
        "capacityReservationSelectorTerms[0].id: must be alone in its term, but the term also sets tags",
        "capacityReservationSelectorTerms[1].ownerID: cannot be used alone; add tags, id or instanceMatchCriteria",
    ]
    assert rest.get(EC2NODECLASS, name)["metadata"]["resourceVersion"] == version


# --- drain -----------------------------------------------------------------------------------------
def _drain_world(rest, unique, pods=3, pdb_allows=None):
    ns = h.namespace(rest, f"ns-{unique}")
    h.nodepool(rest, f"pool-{unique}")
    h.nodeclaim(rest, f"claim-{unique}", f"pool-{unique}", labels=h.RESERVED_LABELS, node_name=f"node-{unique}")
    h.node(rest, f"node-{unique}", labels=h.RESERVED_LABELS)
    for i in range(pods):
        h.pod(rest, ns, f"web-{i}", node_name=f"node-{unique}", labels={"app": "web"})
    if pdb_allows is not None:
        h.pdb(rest, ns, "web", {"app": "web"}, disruptions_allowed=pdb_allows, healthy=pods)
    return ns


def _pod_names(rest, node):
    return sorted(p["metadata"]["name"] for p in rest.list(POD, field_selector=f"spec.nodeName={node}")["items"])


def test_eviction_uses_the_policy_version_the_server_serves(adapter):
    assert adapter.eviction_api_version() == "policy/v1beta1"  # Kubernetes 1.20 has no policy/v1 yet


def test_drain_honours_a_pod_disruption_budget(adapter, rest, unique):
    ns = _drain_world(rest, unique, pods=3, pdb_allows=1)
    node = f"node-{unique}"

    started = time.monotonic()
    result = adapter.drain(node)
    elapsed = time.monotonic() - started

    assert result.cordoned
    assert len(result.evicted) == 1  # the budget allowed one disruption
    assert sorted(result.blocked) == sorted({f"{ns}/web-0", f"{ns}/web-1", f"{ns}/web-2"} - set(result.evicted))
    for why in result.blocked.values():
        assert why.startswith("eviction refused 5 time(s) over ")
        assert "Cannot evict pod as it would violate the pod's disruption budget" in why
        assert "The disruption budget web needs 2 healthy pods and has 3 currently" in why
    assert elapsed < 6  # bounded: 5 attempts with 0.1 .. 0.5 s backoff
    assert not result.drained
    assert len(_pod_names(rest, node)) == 2
    stored = rest.get(NODE, node)
    assert stored["spec"]["unschedulable"] is True
    (taint,) = [t for t in stored["spec"]["taints"] if t["key"] == "karpenter.sh/disrupted"]
    assert taint["effect"] == "NoSchedule" and taint["timeAdded"]

    # The budget frees up while the next pass is retrying (as the disruption controller would once
    # replacements are healthy elsewhere): the drain finishes. It deletes nothing itself: the
    # Node's termination (scheduling/loop/nodes.py) lets it go once its instance is gone.
    release = threading.Timer(0.4, h.set_pdb_status, args=(rest, ns, "web", 2, 4))
    release.start()
    try:
        second = adapter.drain(node)
    finally:
        release.join()
    assert sorted(second.evicted) == sorted(result.blocked)
    assert second.drained, second.summary()
    assert _pod_names(rest, node) == []
    assert adapter.get("Node", node) and adapter.get("NodeClaim", f"claim-{unique}")


def test_do_not_disrupt_pods_wait_while_the_node_is_tainted_and_the_others_go(adapter, rest, unique):
    """Upstream: node/termination suite_test "should not evict a pod with the do-not-disrupt
    annotation" with "should evict pods ... while waiting": the taint comes first, always."""
    ns = _drain_world(rest, unique, pods=1)
    h.pod(rest, ns, "training", node_name=f"node-{unique}", annotations={"karpenter.sh/do-not-disrupt": "true"})

    result = adapter.drain(f"node-{unique}")
    assert result.cordoned and result.evicted == [f"{ns}/web-0"]
    assert result.blocked == {f"{ns}/training": "annotated karpenter.sh/do-not-disrupt: waits for the node's termination time"}
    assert result.remaining == [f"{ns}/training"] and not result.drained
    taints = rest.get(NODE, f"node-{unique}")["spec"]["taints"]
    assert {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"} in [{k: t[k] for k in ("key", "effect")} for t in taints]
    assert _pod_names(rest, f"node-{unique}") == ["training"]


def test_drain_evicts_daemonset_pods_last_and_skips_mirror_and_finished_pods(adapter, rest, unique):
    ns = _drain_world(rest, unique, pods=1)
    node = f"node-{unique}"
    h.pod(rest, ns, "logs", node_name=node, owner={
        "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "logs", "uid": "00000000-0000-0000-0000-000000000001",
        "controller": True})
    h.pod(rest, ns, "static", node_name=node, annotations={"kubernetes.io/config.mirror": "abc"})
    h.pod(rest, ns, "job", node_name=node, phase="Succeeded")

    result = adapter.drain(node)
    assert result.evicted == [f"{ns}/web-0", f"{ns}/logs"]  # the DaemonSet's pod once the others are gone
    assert result.drained
    assert _pod_names(rest, node) == ["job", "static"]


def test_drain_of_a_node_that_is_already_gone_is_drained(adapter, rest, unique):
    h.nodepool(rest, f"pool-{unique}")
    h.nodeclaim(rest, f"claim-{unique}", f"pool-{unique}", node_name=f"node-{unique}")
    result = adapter.drain(f"node-{unique}")
    assert result.drained and not result.cordoned and result.errors == []
    assert adapter.get("NodeClaim", f"claim-{unique}")  # the drain deletes nothing itself
