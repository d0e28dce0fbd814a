"""#48: Kubernetes Events as Karpenter writes them, on the real kube-apiserver and the EC2 test server,
read back as `kubectl describe` finds them (core/v1 Events whose involvedObject is the object, by kind,
name and UID): Nominated on a pod karpweb launches a NodeClaim for, DisruptionBlocked and
Unconsolidatable with upstream's reasons on a node and its NodeClaim, each once within its dedupe
window, and none in observe mode."""

import pytest

from scheduling.adapters.kube.events import EVENTS
from scheduling.adapters.kube.resources import NODE, NODECLAIM, POD
from scheduling.loop import disruption
from scheduling.models import Mode, NodePool
from tests.support.ec2_fixtures import *  # noqa: F403 - the EC2 test server and providers

from . import helpers as h
from .test_claim_lifecycle import Lifecycle, cluster_settings  # noqa: F401 - the settings fixture

pytestmark = [pytest.mark.kube, pytest.mark.django_db]


def described(rest, resource, name, namespace=""):
    """The events `kubectl describe <kind> <name>` lists: by involvedObject kind, name, namespace and UID."""
    obj = rest.get(resource, name, namespace or None)
    selector = (f"involvedObject.kind={resource.kind},involvedObject.name={name},"
                f"involvedObject.uid={obj['metadata']['uid']}")
    return sorted(rest.list(EVENTS, namespace=namespace or "default", field_selector=selector)["items"],
                  key=lambda e: e["reason"])


def brief(events):
    return [(e["type"], e["reason"], e["message"], e["source"]["component"]) for e in events]


def test_a_pod_karpweb_launches_for_is_nominated_to_its_nodeclaim_once(rest, adapter, provider, raw_ec2, unique):
    life = Lifecycle(rest, adapter, provider, raw_ec2, unique)
    life.pod("app")
    assert life.provision()["events_written"] == 1
    [claim] = life.claims()
    assert brief(described(rest, POD, "app", life.ns)) == [
        ("Normal", "Nominated", f"Pod should schedule on: nodeclaim/{claim}", "karpweb")]
    life.provision()  # the pod still waits, for its claim in flight: no second event within the window
    assert len(described(rest, POD, "app", life.ns)) == 1


def test_observe_mode_writes_no_event(rest, adapter, provider, raw_ec2, unique):
    life = Lifecycle(rest, adapter, provider, raw_ec2, unique, mode=Mode.OBSERVE)
    life.pod("app")
    counts = life.provision()
    assert counts["launched"] == 0 and counts["events_written"] == 0
    assert described(rest, POD, "app", life.ns) == []


def running_node(life, pod, **pod_fields):
    """A pod, the NodeClaim karpweb launches for it, its Node registered and Ready, the pod bound to it."""
    life.pod(pod, cpu="1500m", **pod_fields)
    before = set(life.claims())
    life.provision()
    [claim] = set(life.claims()) - before
    node = life.kubelet_registers(claim, ready=True)
    life.after_launch()
    h.bind(life.rest, life.ns, pod, node)
    life.sync.sync_once()
    return claim, node


def test_why_a_node_is_left_alone_is_written_on_it_and_its_nodeclaim(rest, adapter, provider, raw_ec2, unique):
    life = Lifecycle(rest, adapter, provider, raw_ec2, unique, startup_taints=())
    guarded_claim, guarded = running_node(life, "guarded", annotations={"karpenter.sh/do-not-disrupt": "true"})
    busy_claim, busy = running_node(life, "busy")
    NodePool.objects.filter(name=life.pool).update(consolidation_policy="WhenEmpty")

    counts = disruption.act_on_disruptions(provider, adapter, {disruption.CONSOLIDATION, disruption.DRIFT})

    assert counts["events_written"] == 4
    blocked = f'Pod has "karpenter.sh/do-not-disrupt" annotation (Pod={life.ns}/guarded)'
    assert brief(described(rest, NODE, guarded)) == [("Normal", "DisruptionBlocked", blocked, "karpweb")]
    assert brief(described(rest, NODECLAIM, guarded_claim)) == [("Normal", "DisruptionBlocked", blocked, "karpweb")]
    whenempty = f'NodePool "{life.pool}" has consolidation policy WhenEmpty, but node is not empty'
    assert brief(described(rest, NODE, busy)) == [("Normal", "Unconsolidatable", whenempty, "karpweb")]
    assert brief(described(rest, NODECLAIM, busy_claim)) == [("Normal", "Unconsolidatable", whenempty, "karpweb")]

    # The next pass within the dedupe window writes nothing again; in observe mode nothing at all.
    assert disruption.act_on_disruptions(provider, adapter, {disruption.CONSOLIDATION})["events_written"] == 0
    from django.core.cache import cache

    cache.clear()  # the windows are over
    NodePool.objects.filter(name=life.pool).update(mode=Mode.OBSERVE)
    assert disruption.act_on_disruptions(provider, adapter, {disruption.CONSOLIDATION})["events_written"] == 0
    assert len(described(rest, NODE, guarded)) == len(described(rest, NODE, busy)) == 1


def test_a_node_a_pod_disruption_budget_holds_says_so(rest, adapter, provider, raw_ec2, unique):
    """Upstream's DisruptionBlocked for a PDB (state/statenode.go): "pdb prevents pod evictions", naming the
    budget, on the node and its NodeClaim, from the budget the sync mirrored with its status."""
    from scheduling.adapters.kube.sync import ClusterSync

    life = Lifecycle(rest, adapter, provider, raw_ec2, unique, startup_taints=())
    held_claim, held = running_node(life, "held", labels={"app": "ledger"})
    h.pdb(rest, life.ns, "ledger", {"app": "ledger"}, disruptions_allowed=0, healthy=1)
    ClusterSync(adapter, kinds=["PodDisruptionBudget"]).sync_once()

    disruption.act_on_disruptions(provider, adapter, {disruption.CONSOLIDATION, disruption.DRIFT})

    blocked = f"Pdb prevents pod evictions (PodDisruptionBudget=[{life.ns}/ledger])"
    assert brief(described(rest, NODE, held)) == [("Normal", "DisruptionBlocked", blocked, "karpweb")]
    assert brief(described(rest, NODECLAIM, held_claim)) == [("Normal", "DisruptionBlocked", blocked, "karpweb")]
