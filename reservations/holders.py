"""Who holds the reserved units now, by namespace and by a team label (the usage page, #48).

A reserved node is one unit of its reservation. Its unit is shared among the namespaces (or team
label values) of the pods running on it, by their CPU requests (by count where none requests CPU);
a reserved node that runs none of them is idle. DaemonSet pods are not counted: every node runs them,
they hold no unit."""

from __future__ import annotations

from collections import defaultdict

from scheduling.engine.world import TERMINAL_PHASES
from scheduling.models import CapacityType, Node, Pod

IDLE = "(idle)"


def reserved_units_held(team_label: str) -> dict[str, list[tuple[str, float]]]:
    """{"namespace": [(namespace, units)], "team": [(label value, units)]}, most units first, in the
    working scope (the cluster the page shows, or the fleet)."""
    reserved = list(Node.objects.filter(capacity_type=CapacityType.RESERVED).values_list("pk", flat=True))
    pods = defaultdict(list)
    for node_id, namespace, labels, cpu in Pod.objects.filter(node_id__in=reserved).exclude(
            phase__in=TERMINAL_PHASES).exclude(owner_kind="DaemonSet").values_list(
            "node_id", "namespace", "labels", "cpu_request_millicores"):
        pods[node_id].append((namespace, (labels or {}).get(team_label, f"(no {team_label} label)"), cpu))
    by_namespace, by_team = defaultdict(float), defaultdict(float)
    for node_id in reserved:
        on_node = pods.get(node_id)
        if not on_node:
            by_namespace[IDLE] += 1
            by_team[IDLE] += 1
            continue
        requested = sum(cpu for _, _, cpu in on_node)
        for namespace, team, cpu in on_node:
            share = cpu / requested if requested else 1 / len(on_node)
            by_namespace[namespace] += share
            by_team[team] += share
    order = lambda held: sorted(((name, round(units, 2)) for name, units in held.items()),  # noqa: E731
                                key=lambda item: (-item[1], item[0]))
    return {"namespace": order(by_namespace), "team": order(by_team)}
