"""The Kubernetes side of the control loop, on the official client (see :mod:`.interface`).

Every write is safe against concurrent writers:
- label, cordon and status writes read the object, compute the change, and send a merge patch that
  carries the ``metadata.resourceVersion`` they read; on a 409 Conflict they read again and re-apply
  (up to ``conflict_retries`` times);
- selector-term edits send the whole ``capacityReservationSelectorTerms`` list with the
  resourceVersion the operator's edit was based on, and a conflict is NOT retried: it is reported,
  so a concurrent edit is never silently lost (a merge patch replaces lists whole).

Every failure is raised (or, for drains, collected) as a :class:`~.errors.ClusterError` whose
message names the object, what was refused and why.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from scheduling.engine import labels as L
from scheduling.engine.coexistence import (
    DEPLOYMENT_SELECTOR, LEASE_NAME, DeploymentSignal, KarpenterSignals, LeaseSignal,
)
from scheduling.engine.groups import GROUPS_ANNOTATION, annotation_value, merge_terms, split_terms
from scheduling.engine.selectors import parse_terms
from scheduling.engine.timeutil import format_time, parse_optional_time

from .errors import ClusterError, ResourceVersionExpired, describe_api_error
from .events import EVENTS, Event, event_body
from .interface import (
    DISRUPTED_TAINT,
    DO_NOT_DISRUPT,
    Condition,
    DemotionResult,
    DrainResult,
    NodeClaimRequest,
    ObjectList,
    WatchEvent,
)
from . import termination as T
from .resources import (
    ACTIVE_PODS_SELECTOR, DEPLOYMENT, EC2NODECLASS, LEASE, NODE, NODECLAIM, NODEPOOL, POD, PVC, SERVICE,
    PDB, PDB_V1BETA1, VOLUMEATTACHMENT, Resource, resource_for,
)
from .rest import KubeRest
from .termination import EXCLUDE_LB_LABEL, TERMINATION_FINALIZER

REGISTERED_LABEL = "karpenter.sh/registered"
INITIALIZED_LABEL = "karpenter.sh/initialized"
UNREGISTERED_TAINT_KEY = "karpenter.sh/unregistered"
DO_NOT_SYNC_TAINTS_LABEL = "karpenter.sh/do-not-sync-taints"
# The Eviction API's refusal when a pod has two budgets (upstream treats it as a 429).
MULTIPLE_PDBS = "This pod has more than one PodDisruptionBudget"

log = logging.getLogger(__name__)

CONDITION_STATUSES = ("True", "False", "Unknown")


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def merge_conditions(existing: list[dict], updates: list[Condition], generation: int | None, now: datetime) -> list[dict]:
    """The conditions after applying ``updates``: lastTransitionTime moves only when a status
    changes; conditions not mentioned are kept. Sorted by type."""
    merged = {c.get("type"): dict(c) for c in existing or [] if c.get("type")}
    for update in updates:
        if update.status not in CONDITION_STATUSES:
            raise ValueError(f"condition {update.type}: status must be one of {', '.join(CONDITION_STATUSES)}, "
                             f"not {update.status!r}")
        previous = merged.get(update.type)
        transition = previous.get("lastTransitionTime") if previous and previous.get("status") == update.status else None
        condition = {
            "type": update.type,
            "status": update.status,
            # The API (metav1.Condition) requires a CamelCase reason; default to one.
            "reason": update.reason or {"True": update.type, "False": "Not" + update.type}.get(update.status, "Unknown"),
            "message": update.message,
            "lastTransitionTime": transition or format_time(now.replace(microsecond=0)),
        }
        if generation is not None:
            condition["observedGeneration"] = generation
        merged[update.type] = condition
    return [merged[key] for key in sorted(merged)]


class KubeClusterAdapter:
    """:class:`~.interface.ClusterAdapter` on a real cluster."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        conflict_retries: int = 5,
        eviction_timeout: float = 30.0,
        eviction_attempts: int = 8,
        eviction_backoff: tuple[float, float] = (0.25, 4.0),
        pod_wait: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ) -> None:
        self.rest = KubeRest(api_client)
        self.conflict_retries = conflict_retries
        self.eviction_timeout = eviction_timeout
        self.eviction_attempts = eviction_attempts
        self.eviction_backoff = eviction_backoff
        self.pod_wait = pod_wait
        self.sleep = sleep
        self.clock = clock
        self._eviction_version: str | None = None

    @classmethod
    def from_config(cls, kubeconfig: str | None = None, context: str | None = None, **options) -> KubeClusterAdapter:
        from .config import load_api_client

        return cls(load_api_client(kubeconfig, context), **options)

    def close(self) -> None:
        self.rest.api_client.close()

    # --- errors --------------------------------------------------------------------------------
    def _error(self, exc: BaseException, verb: str, resource: Resource, name: str | None = None,
               namespace: str | None = None) -> ClusterError:
        return describe_api_error(exc, verb=verb, resource=resource, name=name, namespace=namespace, host=self.rest.host)

    def _call(self, verb: str, resource: Resource, name: str | None, fn: Callable[[], Any], namespace: str | None = None):
        try:
            return fn()
        except ClusterError:
            raise
        except Exception as exc:
            raise self._error(exc, verb, resource, name, namespace) from exc

    def _read(self, resource: Resource, name: str, namespace: str | None = None) -> dict:
        """GET inside a read-modify-write: a failure names the get, not the write."""
        return self._call("get", resource, name, lambda: self.rest.get(resource, name, namespace), namespace)

    def _retry_on_conflict(self, verb: str, resource: Resource, name: str, attempt_fn: Callable[[], Any],
                           namespace: str | None = None):
        """Run read-modify-write ``attempt_fn``; on 409 Conflict read again and re-apply."""
        for attempt in range(1, self.conflict_retries + 1):
            try:
                return attempt_fn()
            except ApiException as exc:
                if exc.status == 409 and attempt < self.conflict_retries:
                    log.info("%s: conflict on attempt %d, re-reading", resource.describe(name, namespace), attempt)
                    self.sleep(random.uniform(0.01, 0.05) * attempt)
                    continue
                raise self._error(exc, verb, resource, name, namespace) from exc
            except ClusterError:
                raise
            except Exception as exc:
                raise self._error(exc, verb, resource, name, namespace) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    # --- reading -------------------------------------------------------------------------------
    def kube_dns_ip(self) -> str:
        """The kube-system/kube-dns Service's ClusterIP, the address Karpenter bootstraps nodes'
        cluster DNS with (aws/karpenter-provider-aws pkg/operator/operator.go); "" when there is
        no such Service or it has no ClusterIP. Other failures raise ClusterError."""
        try:
            service = self._call("get", SERVICE, "kube-dns",
                                 lambda: self.rest.get(SERVICE, "kube-dns", "kube-system"), "kube-system")
        except ClusterError as exc:
            if exc.not_found:
                return ""
            raise
        address = str((service.get("spec") or {}).get("clusterIP") or "")
        return "" if address == "None" else address

    def list(self, kind: str) -> ObjectList:
        resource = self._served(resource_for(kind))
        selector = ACTIVE_PODS_SELECTOR if resource is POD else None
        data = self._call("list", resource, None, lambda: self.rest.list(resource, field_selector=selector))
        return ObjectList(kind, data["items"], data["metadata"]["resourceVersion"])

    def watch(self, kind: str, resource_version: str, timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        resource = self._served(resource_for(kind))
        selector = ACTIVE_PODS_SELECTOR if resource is POD else None
        try:
            for event in self.rest.watch(resource, resource_version, timeout_seconds=timeout_seconds,
                                         field_selector=selector):
                yield WatchEvent(kind, event.get("type", ""), event.get("object") or {})
        except (ResourceVersionExpired, GeneratorExit):
            raise
        except ClusterError:
            raise
        except Exception as exc:
            raise self._error(exc, "watch", resource) from exc

    def _served(self, resource: Resource) -> Resource:
        """PodDisruptionBudgets in the policy version the server serves (v1 from Kubernetes 1.21)."""
        if resource is PDB and self.eviction_api_version() != "policy/v1":
            return PDB_V1BETA1
        return resource

    def stop_watches(self) -> None:
        """End the watches other threads are reading (ClusterSync.stop calls it)."""
        self.rest.close_watches()

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict:
        resource = resource_for(kind)
        return self._call("get", resource, name, lambda: self.rest.get(resource, name, namespace), namespace)

    def karpenter_signals(self, lease_name: str = LEASE_NAME) -> KarpenterSignals:
        """Karpenter's leader-election Leases (any namespace) and its Deployments, as plain data; a
        failure to read them is the signals' error, for the caller to treat as "present"."""
        try:
            leases = self._call("list", LEASE, None,
                                lambda: self.rest.list(LEASE, field_selector=f"metadata.name={lease_name}"))["items"]
            deployments = self._call("list", DEPLOYMENT, None,
                                     lambda: self.rest.list(DEPLOYMENT, label_selector=DEPLOYMENT_SELECTOR))["items"]
        except ClusterError as exc:
            return KarpenterSignals(error=str(exc))
        return KarpenterSignals(
            leases=tuple(LeaseSignal(
                namespace=_meta(lease).get("namespace", ""), name=_meta(lease).get("name", ""),
                holder=(lease.get("spec") or {}).get("holderIdentity") or "",
                renewed_at=parse_optional_time((lease.get("spec") or {}).get("renewTime")),
                duration_seconds=(lease.get("spec") or {}).get("leaseDurationSeconds")) for lease in leases),
            deployments=tuple(DeploymentSignal(
                namespace=_meta(deployment).get("namespace", ""), name=_meta(deployment).get("name", ""),
                ready_replicas=int((deployment.get("status") or {}).get("readyReplicas") or 0))
                for deployment in deployments),
        )

    # --- provisioning --------------------------------------------------------------------------
    def create_nodeclaim(self, request: NodeClaimRequest) -> dict:
        nodepool = self._call("get", NODEPOOL, request.nodepool, lambda: self.rest.get(NODEPOOL, request.nodepool))
        labels = {**request.labels, L.NODEPOOL: request.nodepool}
        if request.node_class_ref.get("group") == EC2NODECLASS.group and request.node_class_ref.get("name"):
            labels.setdefault("karpenter.k8s.aws/ec2nodeclass", request.node_class_ref["name"])
        metadata: dict[str, Any] = {
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": NODEPOOL.api_version, "kind": NODEPOOL.kind, "name": request.nodepool,
                "uid": _meta(nodepool)["uid"], "blockOwnerDeletion": True,
            }],
        }
        if request.annotations:
            metadata["annotations"] = dict(request.annotations)
        if request.finalizers:
            metadata["finalizers"] = list(request.finalizers)
        if request.name:
            metadata["name"] = request.name
        else:
            metadata["generateName"] = f"{request.nodepool}-"
        spec: dict[str, Any] = {
            "nodeClassRef": dict(request.node_class_ref),
            "requirements": [dict(r) for r in request.requirements],
        }
        if request.resources:
            spec["resources"] = {"requests": dict(request.resources)}
        if request.taints:
            spec["taints"] = [dict(t) for t in request.taints]
        if request.startup_taints:
            spec["startupTaints"] = [dict(t) for t in request.startup_taints]
        if request.expire_after:
            spec["expireAfter"] = request.expire_after
        if request.termination_grace_period:
            spec["terminationGracePeriod"] = request.termination_grace_period
        body = {"apiVersion": NODECLAIM.api_version, "kind": NODECLAIM.kind, "metadata": metadata, "spec": spec}
        subject = request.name or f"{request.nodepool}-<generated>"
        return self._call("create", NODECLAIM, subject, lambda: self.rest.create(NODECLAIM, body))

    def delete_nodeclaim(self, name: str) -> bool:
        """Delete a NodeClaim (a launch that failed, say). False if it was already gone."""
        try:
            self.rest.delete(NODECLAIM, name)
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise self._error(exc, "delete", NODECLAIM, name) from exc
        except Exception as exc:
            raise self._error(exc, "delete", NODECLAIM, name) from exc

    def set_reservation_label(self, nodeclaim: str, reservation_id: str) -> dict:
        """After a launch that targeted a Capacity Reservation group, EC2 chose the member: the
        NodeClaim's reservation-id label says which, and so does its Node when it has registered
        already (a retried launch); a Node that registers later inherits the NodeClaim's label."""
        claim = self._set_label(NODECLAIM, nodeclaim, L.RESERVATION_ID, reservation_id)
        node = (claim.get("status") or {}).get("nodeName")
        if node:
            try:
                self._set_label(NODE, node, L.RESERVATION_ID, reservation_id)
            except ClusterError as error:
                if not error.not_found:
                    raise
        return claim

    def _set_label(self, resource: Resource, name: str, key: str, value: str) -> dict:
        def attempt() -> dict:
            obj = self._read(resource, name)
            if (_meta(obj).get("labels") or {}).get(key) == value:
                return obj
            patch = {"metadata": {"resourceVersion": _meta(obj)["resourceVersion"], "labels": {key: value}}}
            return self.rest.patch(resource, name, patch)

        return self._retry_on_conflict("patch", resource, name, attempt)

    # --- registration (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/registration.go)
    def register_node(self, node: str, nodeclaim: dict, taints: list[dict]) -> dict:
        """The Node the kubelet registered for a NodeClaim: the claim's labels and annotations copied,
        its taints and startup taints added (unless the node asks not to sync taints, as karpweb's
        user data does: the kubelet registered them itself), karpenter.sh/unregistered removed,
        karpenter.sh/registered=true, and an owner reference to the claim. Idempotent."""
        claim_meta = _meta(nodeclaim)

        def attempt() -> dict:
            obj = self._read(NODE, node)
            meta, spec = _meta(obj), obj.get("spec") or {}
            labels = {**(claim_meta.get("labels") or {}), REGISTERED_LABEL: "true"}
            current = list(spec.get("taints") or [])
            wanted = [t for t in current if t.get("key") != UNREGISTERED_TAINT_KEY]
            if (meta.get("labels") or {}).get(DO_NOT_SYNC_TAINTS_LABEL) != "true":
                wanted += [dict(t) for t in taints if not any(
                    (c.get("key"), c.get("value"), c.get("effect")) == (t.get("key"), t.get("value"), t.get("effect")) for c in wanted)]
            owner = {"apiVersion": NODECLAIM.api_version, "kind": NODECLAIM.kind, "name": claim_meta["name"],
                     "uid": claim_meta.get("uid", ""), "blockOwnerDeletion": True}
            owners = [o for o in meta.get("ownerReferences") or [] if o.get("uid") != owner["uid"]] + [owner]
            finalizers = list(meta.get("finalizers") or [])
            if TERMINATION_FINALIZER not in finalizers and not meta.get("deletionTimestamp"):
                finalizers.append(TERMINATION_FINALIZER)  # deleting the Node then drains it (node termination)
            unchanged = (finalizers == (meta.get("finalizers") or []) and wanted == current
                         and all((meta.get("labels") or {}).get(k) == v for k, v in labels.items())
                         and all((meta.get("annotations") or {}).get(k) == v for k, v in (claim_meta.get("annotations") or {}).items())
                         and len(owners) == len(meta.get("ownerReferences") or []))
            if unchanged:
                return obj
            patch = {"metadata": {"resourceVersion": meta["resourceVersion"], "labels": labels, "finalizers": finalizers,
                                  "annotations": dict(claim_meta.get("annotations") or {}), "ownerReferences": owners},
                     "spec": {"taints": wanted}}
            return self.rest.patch(NODE, node, patch)

        return self._retry_on_conflict("patch", NODE, node, attempt)

    def label_node(self, node: str, key: str, value: str) -> dict:
        return self._set_label(NODE, node, key, value)

    def get_nodeclaim(self, name: str) -> dict:
        return self._read(NODECLAIM, name)

    def remove_finalizer(self, name: str, finalizer: str) -> bool:
        return self._remove_finalizer(NODECLAIM, name, finalizer)

    def _remove_finalizer(self, resource: Resource, name: str, finalizer: str) -> bool:
        def attempt() -> bool:
            try:
                obj = self._read(resource, name)
            except ClusterError as error:
                if error.not_found:
                    return False
                raise
            finalizers = list(_meta(obj).get("finalizers") or [])
            if finalizer not in finalizers:
                return True
            patch = {"metadata": {"resourceVersion": _meta(obj)["resourceVersion"],
                                  "finalizers": [f for f in finalizers if f != finalizer]}}
            try:
                self.rest.patch(resource, name, patch)
            except ApiException as exc:
                if exc.status == 404:
                    return False
                raise
            return True

        return self._retry_on_conflict("patch", resource, name, attempt)

    # --- demotion ------------------------------------------------------------------------------
    def demote(self, *, nodeclaim: str | None = None, node: str | None = None) -> DemotionResult:
        """Relabel capacity-type=on-demand and remove every reservation label (id, type AND
        interruptible; upstream forgets the last one) from the NodeClaim and its Node. Objects being
        deleted, and spot capacity, are left alone (reported in ``skipped``)."""
        if not nodeclaim and not node:
            raise ValueError("demote needs a nodeclaim or a node")
        result = DemotionResult()
        if nodeclaim:
            claim = self._relabel_on_demand(NODECLAIM, nodeclaim, result)
            if node is None and claim is not None:
                node = (claim.get("status") or {}).get("nodeName") or None
        if node:
            self._relabel_on_demand(NODE, node, result)
        return result

    def _relabel_on_demand(self, resource: Resource, name: str, result: DemotionResult) -> dict | None:
        subject = resource.describe(name)

        def attempt() -> dict | None:
            obj = self._read(resource, name)
            labels = _meta(obj).get("labels") or {}
            if _meta(obj).get("deletionTimestamp"):
                result.skipped[subject] = "being deleted"
                return obj
            if labels.get(L.CAPACITY_TYPE) == L.SPOT:
                result.skipped[subject] = "capacity-type is spot, not reserved"
                return obj
            remove = [key for key in L.RESERVATION_LABELS if key in labels]
            if labels.get(L.CAPACITY_TYPE) == L.ON_DEMAND and not remove:
                result.skipped[subject] = "already on-demand without reservation labels"
                return obj
            patch = {"metadata": {
                "resourceVersion": _meta(obj)["resourceVersion"],
                "labels": {L.CAPACITY_TYPE: L.ON_DEMAND, **{key: None for key in remove}},
            }}
            updated = self.rest.patch(resource, name, patch)
            result.changed[subject] = remove
            return updated

        try:
            return self._retry_on_conflict("patch", resource, name, attempt)
        except ClusterError as error:
            if error.not_found:
                result.skipped[subject] = "not found"
                return None
            raise

    # --- status --------------------------------------------------------------------------------
    def set_conditions(self, kind: str, name: str, conditions: list[Condition], status_fields: dict | None = None) -> dict:
        resource = resource_for(kind)
        if resource not in (EC2NODECLASS, NODEPOOL, NODECLAIM):
            raise ValueError(f"karpweb writes conditions on EC2NodeClasses, NodePools and NodeClaims, not {kind}")
        if status_fields and "conditions" in status_fields:
            raise ValueError("pass conditions as Condition objects, not in status_fields")

        def attempt() -> dict:
            obj = self._read(resource, name)
            status = obj.get("status") or {}
            merged = merge_conditions(status.get("conditions") or [], conditions, _meta(obj).get("generation"), self.clock())
            new_status = {"conditions": merged, **(status_fields or {})}
            if all(status.get(key) == value for key, value in new_status.items()):
                return obj
            patch = {"metadata": {"resourceVersion": _meta(obj)["resourceVersion"]}, "status": new_status}
            return self.rest.patch(resource, name, patch, subresource="status")

        return self._retry_on_conflict("patch", resource, name, attempt)

    # --- selector terms ------------------------------------------------------------------------
    def get_selector_terms(self, nodeclass: str) -> tuple[list[dict], str]:
        """The terms as the cluster has them, and the resourceVersion to pass back with an edit."""
        obj = self.get(EC2NODECLASS.kind, nodeclass)
        terms = merge_terms(list((obj.get("spec") or {}).get("capacityReservationSelectorTerms") or []),
                            _meta(obj).get("annotations"))
        return terms, _meta(obj)["resourceVersion"]

    def update_selector_terms(self, nodeclass: str, terms: list[dict], resource_version: str) -> dict:
        subject = EC2NODECLASS.describe(nodeclass)
        if not resource_version:
            raise ValueError("update_selector_terms needs the resourceVersion the edit was based on")
        cleaned = [{key: value for key, value in term.items() if value is not None} if isinstance(term, dict) else term
                   for term in terms]
        _, problems = parse_terms(cleaned)
        if problems:
            raise ClusterError(f"{subject}: capacityReservationSelectorTerms not written, they are invalid: "
                               + "; ".join(problems), status=422, reason="Invalid", verb="patch", subject=subject,
                               causes=problems)
        # Karpenter's CRD has no resourceGroupARN (the API server would prune it, leaving an empty,
        # invalid term): group terms go to karpweb's annotation, the others to spec.
        spec_terms, group_arns = split_terms(cleaned)
        patch = {"metadata": {"resourceVersion": resource_version,
                              "annotations": {GROUPS_ANNOTATION: annotation_value(group_arns)}},
                 "spec": {"capacityReservationSelectorTerms": spec_terms}}
        return self._patch_edit(EC2NODECLASS, nodeclass, patch, "capacityReservationSelectorTerms")

    def update_nodepool_requirements(self, nodepool: str, requirements: list[dict], resource_version: str) -> dict:
        """Replace a NodePool's spec.template.spec.requirements (a merge patch replaces the list whole)
        if it is still at `resource_version`; a conflict is reported, never retried, as for selector terms."""
        if not resource_version:
            raise ValueError("update_nodepool_requirements needs the resourceVersion the edit was based on")
        patch = {"metadata": {"resourceVersion": resource_version},
                 "spec": {"template": {"spec": {"requirements": list(requirements)}}}}
        return self._patch_edit(NODEPOOL, nodepool, patch, "requirements")

    def set_annotations(self, nodeclass: str, annotations: dict[str, str | None], resource_version: str) -> dict:
        """karpweb's settings on an EC2NodeClass (e.g. karpweb.io/open-reservations), as annotations
        that Karpenter ignores; None removes one. A stale resourceVersion is a conflict."""
        if not resource_version:
            raise ValueError("set_annotations needs the resourceVersion the edit was based on")
        patch = {"metadata": {"resourceVersion": resource_version, "annotations": dict(annotations)}}
        return self._patch_edit(EC2NODECLASS, nodeclass, patch, "annotations")

    def _patch_edit(self, resource: Resource, name: str, patch: dict, written: str) -> dict:
        """PATCH an operator's edit at the resourceVersion it was based on (patch's metadata): a stale
        version is a conflict, reported with what was not written (never retried: the edit was made
        on what the operator saw); any other failure as a ClusterError."""
        try:
            return self.rest.patch(resource, name, patch)
        except ApiException as exc:
            error = self._error(exc, "patch", resource, name)
            if error.conflict:
                error.message = (f"{resource.describe(name)}: {written} not written: the {resource.kind} changed after "
                                 f"resourceVersion {patch['metadata']['resourceVersion']} was read (someone else edited "
                                 "it); reload it and apply the edit again")
            raise error from exc
        except Exception as exc:
            raise self._error(exc, "patch", resource, name) from exc

    # --- termination (kubernetes-sigs/karpenter pkg/controllers/node/termination) --------------
    def eviction_api_version(self) -> str:
        """policy/v1 where served (Kubernetes >= 1.22 drops nothing, 1.21 adds it), else policy/v1beta1."""
        if self._eviction_version is None:
            group = self._call("get", resource_for("Pod"), None, lambda: self.rest.request("GET", "/apis/policy"))
            versions = [v.get("groupVersion") for v in group.get("versions") or []]
            self._eviction_version = "policy/v1" if "policy/v1" in versions else "policy/v1beta1"
        return self._eviction_version

    def _pods_on(self, node: str) -> list[dict]:
        return self._call("list", POD, None, lambda: self.rest.list(POD, field_selector=f"spec.nodeName={node}"))["items"]

    def cordon(self, node: str) -> dict:
        """Upstream's Taint: karpenter.sh/disrupted:NoSchedule, and the
        node.kubernetes.io/exclude-from-external-load-balancers label (load balancers stop sending
        to a node that is going away); karpweb also sets spec.unschedulable, as kubectl drain does."""

        def attempt() -> dict:
            obj = self._read(NODE, node)
            taints = list((obj.get("spec") or {}).get("taints") or [])
            has_taint = any(t.get("key") == DISRUPTED_TAINT["key"] and t.get("effect") == DISRUPTED_TAINT["effect"]
                            for t in taints)
            labelled = (_meta(obj).get("labels") or {}).get(EXCLUDE_LB_LABEL) is not None
            if (obj.get("spec") or {}).get("unschedulable") and has_taint and labelled:
                return obj
            if not has_taint:  # a karpenter.sh/disrupted taint of another effect is replaced
                taints = [t for t in taints if t.get("key") != DISRUPTED_TAINT["key"]]
                taints.append({**DISRUPTED_TAINT, "timeAdded": format_time(self.clock().replace(microsecond=0))})
            patch = {"metadata": {"resourceVersion": _meta(obj)["resourceVersion"],
                                  **({} if labelled else {"labels": {EXCLUDE_LB_LABEL: "karpenter"}})},
                     "spec": {"unschedulable": True, "taints": taints}}
            return self.rest.patch(NODE, node, patch)

        return self._retry_on_conflict("patch", NODE, node, attempt)

    def _evict(self, pod: dict) -> None:
        meta = _meta(pod)
        body = {
            "apiVersion": self.eviction_api_version(), "kind": "Eviction",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            # Never evict a replacement that took the same name meanwhile.
            "deleteOptions": {"preconditions": {"uid": meta["uid"]}},
        }
        self.rest.create(POD, body, namespace=meta["namespace"], subresource="eviction", name=meta["name"])

    def drain(self, node: str, *, termination_time: datetime | None = None) -> DrainResult:
        """One pass of Karpenter's drain (call again on the next pass until ``drained``; nothing is
        kept between passes). The node is tainted first, always. Pods whose grace period would
        outlast ``termination_time`` are deleted with a clamped grace period, whatever their tier,
        PDBs and do-not-disrupt notwithstanding. The others are evicted tier by tier (see
        :mod:`.termination`), each tier only once the earlier ones are gone; do-not-disrupt pods are
        waited for, never evicted. A 429 (a PodDisruptionBudget) is retried with backoff up to
        ``eviction_attempts`` / ``eviction_timeout`` and then reported in ``blocked``. The pass
        waits up to ``pod_wait`` seconds for a tier to go before moving on. A Node that is gone is
        drained."""
        result = DrainResult(node=node)
        try:
            self.cordon(node)
            result.cordoned = True
        except ClusterError as error:
            if not error.not_found:
                result.errors.append(error)
            return result
        deadline = time.monotonic() + self.pod_wait
        try:
            while True:
                waiting = self._waiting_pods(node)
                self._force_delete_past_deadline(waiting, termination_time, result)
                graceful = [p for p in waiting if not T.needs_force_delete(p, termination_time, self.clock())]
                tier = next((group for group in T.tiers(graceful) if group), [])
                if not tier:
                    break
                self._evict_tier(tier, result)
                waiting = self._wait_for(node, tier, deadline)
                still_there = {T.pod_key(pod) for pod in waiting}
                if result.errors or time.monotonic() >= deadline or any(T.pod_key(p) in still_there for p in tier):
                    break  # this tier is not gone yet: the next pass goes on
        except ClusterError as error:
            result.errors.append(error)
            return result
        result.remaining = sorted(T.pod_key(pod) for pod in waiting)
        return result

    def _waiting_pods(self, node: str) -> list[dict]:
        now = self.clock()
        return [pod for pod in self._pods_on(node) if T.is_waited_for(pod, now)]

    def _wait_for(self, node: str, tier: list[dict], deadline: float) -> list[dict]:
        """The waited-for pods once the tier just evicted is gone, or at the pass's deadline."""
        keys = {T.pod_key(pod) for pod in tier}
        while True:
            waiting = self._waiting_pods(node)
            left = [pod for pod in waiting if T.pod_key(pod) in keys and T.is_terminating(pod)]
            if not left or time.monotonic() >= deadline:
                return waiting
            self.sleep(0.2)

    def _evict_tier(self, tier: list[dict], result: DrainResult) -> None:
        now = self.clock()
        for pod in tier:
            if T.do_not_disrupt_active(pod, now) and not T.is_terminating(pod):
                result.blocked[T.pod_key(pod)] = f"annotated {DO_NOT_DISRUPT}: waits for the node's termination time"
        self._evict_all([pod for pod in tier if T.is_evictable(pod, now)], result)

    def _force_delete_past_deadline(self, pods: list[dict], termination_time: datetime | None,
                                    result: DrainResult) -> None:
        """Upstream's forceDelete: DELETE with the grace period clamped to the time left, UID-safe."""
        now = self.clock()
        for pod in pods:
            if not T.needs_force_delete(pod, termination_time, now):
                continue
            meta = _meta(pod)
            grace = T.clamped_grace_seconds(termination_time, now)
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": grace,
                    "preconditions": {"uid": meta["uid"]}}
            try:
                self.rest.delete(POD, meta["name"], meta["namespace"], body=body)
                result.deleted_pods.append(T.pod_key(pod))
            except ApiException as exc:
                if exc.status not in (404, 409):  # gone, or a new pod took the name
                    result.errors.append(self._error(exc, "delete", POD, meta["name"], meta["namespace"]))
            except Exception as exc:
                result.errors.append(self._error(exc, "delete", POD, meta["name"], meta["namespace"]))

    def _evict_all(self, pods: list[dict], result: DrainResult) -> None:
        pending = pods
        delay, max_delay = self.eviction_backoff
        started = time.monotonic()
        attempt = 0
        while pending:
            refused: list[tuple[dict, ClusterError]] = []
            for pod in pending:
                meta = _meta(pod)
                try:
                    self._evict(pod)
                    result.evicted.append(T.pod_key(pod))
                except ApiException as exc:
                    if exc.status == 404:
                        continue  # already gone
                    error = self._error(exc, "create", POD, f"{meta['name']}/eviction", meta["namespace"])
                    if exc.status == 429 or MULTIPLE_PDBS in error.message:
                        refused.append((pod, error))
                    elif exc.status == 409:
                        continue  # the uid precondition failed: the pod we meant is gone
                    else:
                        result.errors.append(error)
                except ClusterError as error:
                    result.errors.append(error)
                except Exception as exc:
                    result.errors.append(self._error(exc, "create", POD, f"{meta['name']}/eviction", meta["namespace"]))
            if not refused:
                return
            attempt += 1
            elapsed = time.monotonic() - started
            if attempt >= self.eviction_attempts or elapsed + delay > self.eviction_timeout:
                for pod, error in refused:
                    result.blocked[T.pod_key(pod)] = (
                        f"eviction refused {attempt} time(s) over {elapsed:.1f} s: "
                        + error.message.split(": ", 1)[-1]
                    )
                return
            self.sleep(delay)
            delay = min(delay * 2, max_delay)
            pending = [pod for pod, _ in refused]

    def pending_volume_attachments(self, node: str) -> list[str]:
        """The node's VolumeAttachments (storage.k8s.io/v1) the termination waits for: all but those
        of pods the drain does not wait for (upstream's filterVolumeAttachments) and those without a
        PersistentVolume."""
        attachments = [va for va in self._call("list", VOLUMEATTACHMENT, None,
                                                lambda: self.rest.list(VOLUMEATTACHMENT))["items"]
                       if (va.get("spec") or {}).get("nodeName") == node
                       and ((va.get("spec") or {}).get("source") or {}).get("persistentVolumeName")]
        if not attachments:
            return []
        kept = self._volumes_of_undrainable_pods(node)
        return sorted(_meta(va)["name"] for va in attachments
                      if va["spec"]["source"]["persistentVolumeName"] not in kept)

    def _volumes_of_undrainable_pods(self, node: str) -> set[str]:
        now, volumes = self.clock(), set()
        for pod in self._pods_on(node):
            if T.is_waited_for(pod, now) or T.is_terminal(pod):
                continue
            namespace = _meta(pod).get("namespace")
            for volume in (pod.get("spec") or {}).get("volumes") or []:
                claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
                if not claim:
                    continue
                try:
                    pvc = self._read(PVC, claim, namespace)
                except ClusterError as error:
                    if error.not_found:
                        continue
                    raise
                if (pvc.get("spec") or {}).get("volumeName"):
                    volumes.add(pvc["spec"]["volumeName"])
        return volumes

    def delete_node(self, name: str) -> bool:
        """DELETE the Node (its karpenter.sh/termination finalizer then holds it for the drain);
        False if it was already gone."""
        try:
            self.rest.delete(NODE, name)
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise self._error(exc, "delete", NODE, name) from exc
        except Exception as exc:
            raise self._error(exc, "delete", NODE, name) from exc

    def add_node_finalizer(self, name: str, finalizer: str = TERMINATION_FINALIZER) -> bool:
        """Put ``finalizer`` on a Node that is not being deleted (one karpweb registered before it
        added the finalizer at registration); False if the Node is gone or already being deleted."""

        def attempt() -> bool:
            try:
                obj = self._read(NODE, name)
            except ClusterError as error:
                if error.not_found:
                    return False
                raise
            finalizers = list(_meta(obj).get("finalizers") or [])
            if _meta(obj).get("deletionTimestamp"):
                return False
            if finalizer not in finalizers:
                self.rest.patch(NODE, name, {"metadata": {"resourceVersion": _meta(obj)["resourceVersion"],
                                                          "finalizers": [*finalizers, finalizer]}})
            return True

        return self._retry_on_conflict("patch", NODE, name, attempt)

    def remove_node_finalizer(self, name: str, finalizer: str = TERMINATION_FINALIZER) -> bool:
        """Take ``finalizer`` off a Node (a deleted one then goes); False if the Node is gone."""
        return self._remove_finalizer(NODE, name, finalizer)

    def annotate_nodeclaim(self, name: str, key: str, value: str) -> dict:
        """Set one annotation on a NodeClaim unless it has one under that key already (upstream
        never moves a termination timestamp once written)."""

        def attempt() -> dict:
            obj = self._read(NODECLAIM, name)
            if key in (_meta(obj).get("annotations") or {}):
                return obj
            patch = {"metadata": {"resourceVersion": _meta(obj)["resourceVersion"], "annotations": {key: value}}}
            return self.rest.patch(NODECLAIM, name, patch)

        return self._retry_on_conflict("patch", NODECLAIM, name, attempt)

    # --- events ----------------------------------------------------------------------------------
    def create_events(self, events: list[Event]) -> int:
        """Write each event (core/v1, involvedObject set: `kubectl describe` shows it); returns how many
        the API server took. An event it refuses is logged and dropped, never an error of the step that
        wrote it (upstream's recorder drops them too)."""
        written = 0
        for event in events:
            body = event_body(event, self.clock())
            try:
                self.rest.create(EVENTS, body, namespace=body["metadata"]["namespace"])
                written += 1
            except Exception as exc:  # noqa: BLE001 - an event is best effort
                error = self._error(exc, "create", EVENTS, body["metadata"]["name"], body["metadata"]["namespace"])
                log.warning("event %s on %s %s not written: %s", event.reason, event.regarding.resource.kind,
                            event.regarding.name, error.message)
        return written
