"""Kubernetes Events as Karpenter writes them (kubernetes-sigs/karpenter pkg/events and the
controllers' events.go): the same reasons and message wording on pods, nodes and NodeClaims, plus
karpweb's own about reservations. Each event is a core/v1 Event whose involvedObject names the
object (kind, name, namespace, uid), so `kubectl describe` shows it; a cluster-scoped object's
events go to the `default` namespace, as client-go's recorder puts them.

This module says what an event is and writes it; which events to write, only in control mode and
without repeating one within its dedupe window, is the loop's (scheduling/loop/kube_events.py)."""

from __future__ import annotations

import datetime
import itertools
import logging
import socket
from dataclasses import dataclass

from .resources import NODE, NODECLAIM, POD, Resource

log = logging.getLogger(__name__)

COMPONENT = "karpweb"
NORMAL, WARNING = "Normal", "Warning"
DEFAULT_DEDUPE = datetime.timedelta(minutes=2)  # upstream's defaultDedupeTimeout
_sequence = itertools.count()  # two events in one nanosecond (a node and its NodeClaim of the same name)
EVENTS = Resource("Event", "", "v1", "events", namespaced=True)

# Upstream's reasons (pkg/events/reason.go).
NOMINATED = "Nominated"
DISRUPTION_BLOCKED = "DisruptionBlocked"
DISRUPTION_TERMINATING = "DisruptionTerminating"
UNCONSOLIDATABLE = "Unconsolidatable"
# karpweb's own, about reservations.
LAUNCHED_INTO_RESERVATION = "LaunchedIntoReservation"
CAPACITY_BLOCK_DRAINING = "CapacityBlockDraining"


@dataclass(frozen=True)
class ObjectRef:
    resource: Resource
    name: str
    namespace: str = ""
    uid: str = ""

    def reference(self) -> dict:
        ref = {"apiVersion": self.resource.api_version, "kind": self.resource.kind, "name": self.name}
        if self.namespace:
            ref["namespace"] = self.namespace
        if self.uid:
            ref["uid"] = self.uid
        return ref


def pod_ref(namespace: str, name: str, uid: str = "") -> ObjectRef:
    return ObjectRef(POD, name, namespace, uid)


def node_ref(name: str, uid: str = "") -> ObjectRef:
    return ObjectRef(NODE, name, "", uid)


def nodeclaim_ref(name: str, uid: str = "") -> ObjectRef:
    return ObjectRef(NODECLAIM, name, "", uid)


@dataclass(frozen=True)
class Event:
    regarding: ObjectRef
    type: str
    reason: str
    message: str
    dedupe_values: tuple[str, ...] = ()
    dedupe_timeout: datetime.timedelta = DEFAULT_DEDUPE

    def dedupe_key(self) -> str:
        """Upstream's key (reason and dedupe values, the object's UID first), with the object's kind
        and name for the objects karpweb mirrors without a UID."""
        ref = self.regarding
        return "-".join([self.reason.lower(), ref.resource.kind, ref.namespace, ref.name, *self.dedupe_values])


# --- the events (upstream's wording) ------------------------------------------------------------

def nominated(pod: ObjectRef, *, nodeclaim: str = "", node: str = "") -> Event:
    """scheduling.NominatePodEvent: the pod should land on this NodeClaim / node."""
    where = ", ".join([f"nodeclaim/{nodeclaim}"] * bool(nodeclaim) + [f"node/{node}"] * bool(node))
    return Event(pod, NORMAL, NOMINATED, f"Pod should schedule on: {where}", (pod.uid,))


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]  # upstream's pretty.Sentence


def _title(reason: str) -> str:
    return reason[:1].upper() + reason[1:]  # cases.Title with NoLower on one word: "underutilized" -> "Underutilized"


def _node_and_claim(node: ObjectRef | None, claim: ObjectRef | None):
    return [ref for ref in (node, claim) if ref is not None]


def disruption_blocked(node: ObjectRef | None, claim: ObjectRef | None, message: str) -> list[Event]:
    """disruption/events.Blocked: on the node and its NodeClaim."""
    return [Event(ref, NORMAL, DISRUPTION_BLOCKED, _sentence(message), (ref.uid,))
            for ref in _node_and_claim(node, claim)]


def unconsolidatable(node: ObjectRef | None, claim: ObjectRef | None, message: str) -> list[Event]:
    """disruption/events.Unconsolidatable: deduped for 15 minutes."""
    return [Event(ref, NORMAL, UNCONSOLIDATABLE, message, (ref.uid,), datetime.timedelta(minutes=15))
            for ref in _node_and_claim(node, claim)]


def disruption_terminating(node: ObjectRef | None, claim: ObjectRef | None, reason: str) -> list[Event]:
    """disruption/events.Terminating: "Disrupting Node: Underutilized" and the same on the NodeClaim."""
    return [Event(ref, NORMAL, DISRUPTION_TERMINATING,
                  f"Disrupting {'Node' if ref.resource is NODE else 'NodeClaim'}: {_title(reason)}", (ref.uid, reason))
            for ref in _node_and_claim(node, claim)]


def launched_into_reservation(claim: ObjectRef, reservation_id: str, instance_type: str, zone: str) -> Event:
    return Event(claim, NORMAL, LAUNCHED_INTO_RESERVATION,
                 f"Launched {instance_type} in {zone} into capacity reservation {reservation_id}",
                 (claim.uid, reservation_id))


def capacity_block_draining(node: ObjectRef | None, claim: ObjectRef | None, reservation_id: str,
                            ends_at: datetime.datetime | None) -> list[Event]:
    ends = f" ends at {ends_at.astimezone(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC" if ends_at else " ends"
    return [Event(ref, WARNING, CAPACITY_BLOCK_DRAINING,
                  f"Capacity Block {reservation_id}{ends}: draining before EC2 reclaims its instances",
                  (ref.uid, reservation_id))
            for ref in _node_and_claim(node, claim)]


# --- writing --------------------------------------------------------------------------------------

def event_body(event: Event, now: datetime.datetime, instance: str | None = None) -> dict:
    """A core/v1 Event as client-go's recorder makes one (name: the object's name and the time in
    nanoseconds, in hex)."""
    ref = event.regarding
    stamp = now.astimezone(datetime.timezone.utc)
    when = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    nanos = int(stamp.timestamp() * 1_000_000) * 1000 + next(_sequence) % 1000
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{ref.name}.{nanos:x}", "namespace": ref.namespace or "default"},
        "involvedObject": ref.reference(),
        "reason": event.reason, "message": event.message[:1024], "type": event.type,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT, "reportingInstance": instance or socket.gethostname()[:128],
        "firstTimestamp": when, "lastTimestamp": when, "count": 1,
    }
