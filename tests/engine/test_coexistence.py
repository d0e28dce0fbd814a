"""Is Karpenter the active controller? The verdict from plain signals, in words."""

import datetime

import pytest

from scheduling.engine.coexistence import DeploymentSignal, KarpenterSignals, LeaseSignal, assess

NOW = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=datetime.timezone.utc)
S = datetime.timedelta(seconds=1)


def lease(renewed_ago, duration=15, holder="karpenter-7d9f-abcde_1234"):
    return LeaseSignal("kube-system", "karpenter-leader-election", holder,
                       None if renewed_ago is None else NOW - renewed_ago * S, duration)


def test_a_renewed_lease_is_live_until_its_duration_passes():
    assert assess(KarpenterSignals(leases=(lease(15),)), NOW).live  # renewTime + 15 s == now
    presence = assess(KarpenterSignals(leases=(lease(16),)), NOW)
    assert not presence.live
    assert presence.reason == ("Karpenter is not running: Lease kube-system/karpenter-leader-election held by "
                               "karpenter-7d9f-abcde_1234, renewed 16 s ago (expired after 15 s)")
    live = assess(KarpenterSignals(leases=(lease(3),)), NOW)
    assert live.reason == ("Karpenter is the active controller: Lease kube-system/karpenter-leader-election held by "
                           "karpenter-7d9f-abcde_1234, renewed 3 s ago (live)")


def test_an_unheld_lease_is_not_live():
    assert not assess(KarpenterSignals(leases=(lease(1, holder=""),)), NOW).live
    assert not assess(KarpenterSignals(leases=(lease(None),)), NOW).live


def test_leader_election_off_still_shows_in_the_deployment():
    running = DeploymentSignal("karpenter", "karpenter", 2)
    presence = assess(KarpenterSignals(leases=(lease(600),), deployments=(running,)), NOW)
    assert presence.live and presence.reason == "Karpenter is running: Deployment karpenter/karpenter has 2 ready replica(s)"
    scaled_down = DeploymentSignal("karpenter", "karpenter", 0)
    assert not assess(KarpenterSignals(deployments=(scaled_down,)), NOW).live


def test_nothing_found_and_unreadable_signals():
    assert assess(KarpenterSignals(), NOW).reason.startswith("no Karpenter found")
    unreadable = assess(KarpenterSignals(error="forbidden: may not list leases.coordination.k8s.io"), NOW)
    assert unreadable.live and "treated as running" in unreadable.reason  # in doubt: never two controllers


def test_the_operator_declares_it():
    assert assess(KarpenterSignals(), NOW, "present").live
    assert not assess(KarpenterSignals(leases=(lease(1),)), NOW, "absent").live
    with pytest.raises(ValueError, match="override 'maybe'"):
        assess(KarpenterSignals(), NOW, "maybe")
