"""Is Karpenter the active controller of this cluster? Pure: the signals come in as plain data (read
from the cluster by the Kubernetes adapter), the verdict goes out in words.

Karpenter's controller holds a leader-election Lease (`karpenter-leader-election` by default) and
renews it every few seconds; a Lease whose renewTime + leaseDurationSeconds is past is stale. Leader
election can be switched off, so a Deployment running Karpenter's controller with ready replicas
counts as live too. When the signals cannot be read, the answer is "present": two controllers on
one cluster double every launch, an idle karpweb costs nothing.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

LEASE_NAME = "karpenter-leader-election"
# The Helm chart's label on its Deployment.
DEPLOYMENT_SELECTOR = "app.kubernetes.io/name=karpenter"

AUTO, PRESENT, ABSENT = "auto", "present", "absent"
DECLARED_PRESENT = "KARPWEB_KARPENTER=present: Karpenter is declared the controller of this cluster"
OVERRIDES = (AUTO, PRESENT, ABSENT)


@dataclass(frozen=True)
class LeaseSignal:
    namespace: str
    name: str
    holder: str
    renewed_at: datetime.datetime | None
    duration_seconds: int | None

    def live(self, now: datetime.datetime) -> bool:
        if not self.holder or self.renewed_at is None:
            return False
        return self.renewed_at + datetime.timedelta(seconds=self.duration_seconds or 15) >= now


@dataclass(frozen=True)
class DeploymentSignal:
    namespace: str
    name: str
    ready_replicas: int

    @property
    def live(self) -> bool:
        return self.ready_replicas > 0


@dataclass(frozen=True)
class KarpenterSignals:
    """What the cluster says; `error` when it could not be read (then nothing else is known)."""

    leases: tuple[LeaseSignal, ...] = ()
    deployments: tuple[DeploymentSignal, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class Presence:
    live: bool
    reason: str
    evidence: list[str] = field(default_factory=list)


def assess(signals: KarpenterSignals, now: datetime.datetime, override: str = AUTO) -> Presence:
    """Whether Karpenter controls the cluster now, and why, in words."""
    if override == PRESENT:
        return Presence(True, DECLARED_PRESENT)
    if override == ABSENT:
        return Presence(False, "KARPWEB_KARPENTER=absent: Karpenter is declared absent from this cluster")
    if override != AUTO:
        raise ValueError(f"override {override!r} is not one of {', '.join(OVERRIDES)}")
    if signals.error:
        return Presence(True, f"could not tell whether Karpenter runs ({signals.error}); treated as running")
    evidence = [_lease_words(lease, now) for lease in signals.leases]
    evidence += [_deployment_words(deployment) for deployment in signals.deployments]
    live_leases = [lease for lease in signals.leases if lease.live(now)]
    live_deployments = [deployment for deployment in signals.deployments if deployment.live]
    if live_leases:
        return Presence(True, f"Karpenter is the active controller: {_lease_words(live_leases[0], now)}", evidence)
    if live_deployments:
        return Presence(True, f"Karpenter is running: {_deployment_words(live_deployments[0])}", evidence)
    if evidence:
        return Presence(False, "Karpenter is not running: " + "; ".join(evidence), evidence)
    return Presence(False, f"no Karpenter found (no {LEASE_NAME} Lease, no Deployment labelled {DEPLOYMENT_SELECTOR})")


def _lease_words(lease: LeaseSignal, now: datetime.datetime) -> str:
    where = f"Lease {lease.namespace}/{lease.name}"
    if not lease.holder or lease.renewed_at is None:
        return f"{where} is held by no one"
    ago = max(0, int((now - lease.renewed_at).total_seconds()))
    state = "live" if lease.live(now) else f"expired after {lease.duration_seconds or 15} s"
    return f"{where} held by {lease.holder}, renewed {ago} s ago ({state})"


def _deployment_words(deployment: DeploymentSignal) -> str:
    return f"Deployment {deployment.namespace}/{deployment.name} has {deployment.ready_replicas} ready replica(s)"
