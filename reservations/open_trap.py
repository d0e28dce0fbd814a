"""The open-reservation trap from the database (the detection is scheduling/engine/opentrap.py):
the facts per cluster and per open reservation, read in a handful of queries; Karpenter's launch
templates, synced from EC2; the fix as YAML and as a diff; and, in control mode, the fix applied in
one confirmed click through the selector-term editor's save and a NodePool requirement write.

How it relates to open mode (reservations/open_mode.py): open mode is karpweb's own answer for the
launches karpweb makes (preference `open`, the instance stays on-demand). The trap's fix is the
answer that works for Karpenter too: the reservation is selected by id and the NodePool allows
`reserved`, so launches target it as reserved capacity."""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass

import yaml
from django.db import transaction
from django.utils import timezone

from fleet.models import DNS_LABEL, Cluster
from karpweb.jsonsafe import printable
from fleet.scope import cluster_scope, current_cluster
from reservations.models import (CapacityReservation, ClusterLaunchTemplate, EC2NodeClass, OpenReservationInstance,
                                 ReservationVisibility)
from scheduling.adapters.kube import clusters as kube_clusters
from reservations.selector_terms import InvalidSelectorTerms, SelectorTermConflict, save_selector_terms
from scheduling.audit import record_change
from scheduling.engine import opentrap
from scheduling.engine.opentrap import (ClusterFacts, LaunchTemplateFacts, NodeClassFacts, NodePoolFacts, OpenReservation,
                                        PaidNode, Trap)
from scheduling.models import CapacityType, Mode, Node, NodePool
from scheduling.modes import control_refusal, global_mode
from scheduling.queries import on_demand_prices

log = logging.getLogger(__name__)


# --- Karpenter's launch templates ------------------------------------------------------------------

def sync_launch_templates(cloud, now=None) -> dict:
    """Read the launch templates tagged karpenter.k8s.aws/cluster in this account and region and keep,
    per cluster of the fleet named by the tag, what their latest versions prefer. An EC2 error leaves
    the rows as they were."""
    from scheduling.adapters.ec2.interface import CloudAPIError

    read = getattr(cloud, "cluster_launch_templates", None)
    if read is None:
        return {}
    try:
        templates = read()
    except CloudAPIError as exc:
        log.warning("Karpenter's launch templates not read: %s", exc)
        return {"launch_template_errors": 1}
    return {"launch_templates": record_launch_templates(templates, now)}


@transaction.atomic
def record_launch_templates(templates, now=None) -> int:
    """Replace the rows of the clusters this account and region serve (the scope's account, or every
    cluster without a scope) with `templates`; a template naming no cluster of the fleet is skipped."""
    now = now or timezone.now()
    here = current_cluster()
    clusters = Cluster.objects.all() if here is None else Cluster.objects.filter(account_id=here.account_id,
                                                                                 region=here.region)
    by_name = {c.name: c for c in clusters}
    ClusterLaunchTemplate.objects.fleet().filter(cluster__in=list(by_name.values())).delete()
    rows = [ClusterLaunchTemplate(cluster=by_name[t.cluster], template_id=t.template_id, name=t.name, version=t.version,
                                  preference=t.preference, node_class=t.node_class, synced_at=now)
            for t in templates if t.cluster in by_name]
    ClusterLaunchTemplate.objects.fleet().bulk_create(rows)
    return len(rows)


# --- the facts -------------------------------------------------------------------------------------

def _clusters() -> list[Cluster]:
    here = current_cluster()
    if here is not None:
        return [Cluster.objects.select_related("account").get(pk=here.pk)]
    return list(Cluster.objects.select_related("account").order_by("name"))


def cluster_facts(clusters: list[Cluster]) -> list[ClusterFacts]:
    """Each cluster's classes, pools, paid nodes and Karpenter's launch templates, in five queries
    whatever the fleet's size."""
    ids = [c.pk for c in clusters]
    classes, pools, paid, templates = defaultdict(list), defaultdict(list), defaultdict(list), defaultdict(list)
    for c in EC2NodeClass.objects.fleet().filter(cluster_id__in=ids).prefetch_related("selected_reservations"):
        classes[c.cluster_id].append(NodeClassFacts(
            name=c.name, terms=tuple(c.capacity_reservation_selector_terms or []),
            selected=tuple(sorted(r.reservation_id for r in c.selected_reservations.all())),
            open_mode=c.open_reservations, resource_version=c.resource_version))
    for p in NodePool.objects.fleet().filter(cluster_id__in=ids).select_related("node_class"):
        pools[p.cluster_id].append(NodePoolFacts(
            name=p.name, node_class=p.node_class.name if p.node_class else (p.node_class_ref or {}).get("name", ""),
            requirements=tuple(p.requirements or []), resource_version=p.resource_version))
    # On-demand instances EC2 runs inside a reservation by open matching (open mode) pay nothing twice.
    in_open = set()
    for instance_id, node_name in OpenReservationInstance.objects.values_list("instance_id", "node_name"):
        in_open |= {instance_id, node_name} - {""}
    nodes = (Node.objects.fleet().filter(cluster_id__in=ids, capacity_type=CapacityType.ON_DEMAND, reservation__isnull=True,
                                         deleting_since__isnull=True)
             .values_list("cluster_id", "name", "instance_type", "zone", "provider_id", "node_pool__name"))
    for cluster_id, name, instance_type, zone, provider_id, pool in nodes:
        if name not in in_open and provider_id.rstrip("/").rsplit("/", 1)[-1] not in in_open:
            paid[cluster_id].append(PaidNode(name, instance_type, zone, pool or ""))
    for cluster_id, name, preference in ClusterLaunchTemplate.objects.fleet().filter(cluster_id__in=ids) \
            .values_list("cluster_id", "name", "preference"):
        templates[cluster_id].append(LaunchTemplateFacts(name, preference))
    return [ClusterFacts(name=c.name, account=c.account.account_id, node_classes=tuple(classes[c.pk]),
                         node_pools=tuple(pools[c.pk]), paid_nodes=tuple(paid[c.pk]), launch_templates=tuple(templates[c.pk]))
            for c in clusters]


def open_reservations(clusters: list[Cluster], now) -> list[OpenReservation]:
    """Open, active ODCRs with idle units, each with the clusters whose account sees it in their region
    (as CapacityReservation.objects.visible_to says), in three queries."""
    rows = list(CapacityReservation.objects.fleet().usable(now).filter(
        instance_match_criteria=CapacityReservation.MatchCriteria.OPEN,
        reservation_type=CapacityReservation.ReservationType.DEFAULT, available_instance_count__gt=0))
    accounts = defaultdict(set)
    for pk, account_id in ReservationVisibility.objects.filter(reservation__in=rows).values_list("reservation_id", "account_id"):
        accounts[pk].add(account_id)
    prices = on_demand_prices({r.instance_type for r in rows})

    def sees(cluster, r) -> bool:
        return cluster.account_id in accounts[r.pk] and (not cluster.region or r.region in ("", cluster.region))

    return [OpenReservation(r.reservation_id, r.instance_type, r.availability_zone, r.available_instance_count,
                            prices.get((r.instance_type, r.availability_zone)),
                            tuple(sorted(c.name for c in clusters if sees(c, r))))
            for r in rows]


def find(now=None) -> list[Trap]:
    """The traps of the scope's cluster, or of the whole fleet without a scope."""
    now = now or timezone.now()
    clusters = _clusters()
    return opentrap.find_traps(cluster_facts(clusters), open_reservations(clusters, now))


def find_one(cluster_name: str, reservation_id: str, now=None) -> Trap | None:
    with cluster_scope(cluster_name):
        return next((t for t in find(now) if t.reservation_id == reservation_id), None)


# --- the fix, as people read and apply it -----------------------------------------------------------

def _yaml(value) -> str:
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False)


def fix_yaml(trap: Trap) -> str:
    """One YAML document per object, for `kubectl apply --server-side -f`: each names the object's
    resourceVersion, so a changed object refuses it (read again and generate it again)."""
    head = (f"# karpweb: the open-reservation trap, cluster {trap.cluster}, reservation {trap.reservation_id}\n"
            f"# kubectl apply --server-side --force-conflicts --field-manager=karpweb-open-trap -f this.yaml\n")
    return head + "---\n".join(_yaml(opentrap.patch_object(p)) for p in trap.patches)


def fix_diff(trap: Trap) -> str:
    return "\n".join(opentrap.patch_diff(p, dump=_yaml) for p in trap.patches)


def versions(trap: Trap) -> dict[str, str]:
    """{"EC2NodeClass/name": resourceVersion, ...}: what the confirmation carries back."""
    return {f"{p.kind}/{p.name}": p.resource_version for p in trap.patches}


def summary(traps: list[Trap]) -> dict:
    return {"traps": traps, "total": opentrap.total_dollars_per_hour(traps),
            "clusters": len({t.cluster for t in traps})}


# --- one confirmed click (control mode) -----------------------------------------------------------

def cluster_exists(name) -> bool:
    """Whether the fleet has a cluster of this name; a string no cluster can be named (a NUL, which
    PostgreSQL refuses, or anything not a DNS label) is answered without asking the database."""
    return isinstance(name, str) and bool(DNS_LABEL.match(name)) and Cluster.objects.filter(name=name).exists()


class FixRefused(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


@dataclass
class FixResult:
    applied: list[str]  # "EC2NodeClass/default", ...; empty: nothing to do

    @property
    def nothing_to_do(self) -> bool:
        return not self.applied


def apply_fix(cluster_name: str, reservation_id: str, seen_versions: dict[str, str], *, user, source: str) -> FixResult:
    """Apply the trap's fix on its cluster. Refused in observe mode (the YAML is the answer then) and
    when an object changed since the page was read; a trap already fixed is nothing to do."""
    if not cluster_exists(cluster_name):
        raise FixRefused("cluster", f"no cluster named {printable(cluster_name, 63)!r} in the fleet")
    with cluster_scope(cluster_name):
        if global_mode() != Mode.CONTROL:
            refusal = control_refusal()
            raise FixRefused("mode", f"cluster {cluster_name} is in observe mode" + (f" ({refusal})" if refusal else "")
                             + ": karpweb changes no EC2NodeClass or NodePool; apply the YAML shown instead")
        trap = next((t for t in find() if t.reservation_id == reservation_id), None)
        if trap is None or not trap.patches:
            return FixResult([])
        now_versions = versions(trap)
        if {k: v for k, v in now_versions.items()} != {k: seen_versions.get(k) for k in now_versions}:
            raise FixRefused("versions", "the EC2NodeClass or NodePool changed since the fix was shown "
                                         f"(now {now_versions}); reload the page")
        applied = []
        with transaction.atomic():
            for patch in trap.patches:
                if patch.kind == "EC2NodeClass":
                    node_class = EC2NodeClass.objects.get(name=patch.name)
                    try:
                        save_selector_terms(node_class, list(patch.after), patch.resource_version, user=user, source=source)
                    except (InvalidSelectorTerms, SelectorTermConflict) as exc:
                        raise FixRefused("versions", f"EC2NodeClass {patch.name}: {exc}") from None
                else:
                    save_requirements(NodePool.objects.get(name=patch.name), list(patch.after), patch.resource_version,
                                      user=user, source=source)
                applied.append(f"{patch.kind}/{patch.name}")
        return FixResult(applied)


def save_requirements(pool: NodePool, requirements: list, read_version: str, *, user, source: str) -> NodePool:
    """A NodePool's requirements replaced if it is still at `read_version` (on a real cluster through
    the Kubernetes API, which refuses a stale version), audited on the NodePool."""
    adapter = kube_clusters.writer_for(pool.cluster)  # the NodePool's own cluster's API server, if it has one
    if adapter is not None:
        try:
            written = adapter.update_nodepool_requirements(pool.name, requirements, read_version)
        except Exception as exc:
            if getattr(exc, "conflict", False):
                raise FixRefused("versions", str(exc)) from exc
            raise
        new_version = written["metadata"]["resourceVersion"]
    else:
        new_version = str(int(read_version) + 1) if read_version.isdigit() else "1"
    updated = NodePool.objects.filter(pk=pool.pk, resource_version=read_version).update(
        requirements=requirements, resource_version=new_version)
    if not updated:
        raise FixRefused("versions", f"NodePool {pool.name} changed after version {read_version or '(none)'} was read; "
                                     "reload the page")
    record_change(user=user, source=source, obj=pool, action="change",
                  changes={"requirements": [pool.requirements, requirements]})
    pool.refresh_from_db()
    return pool
