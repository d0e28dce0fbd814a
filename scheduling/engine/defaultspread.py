"""Cluster-level default topology spread constraints, as kube-scheduler applies them and Karpenter
anticipates them (kubernetes-sigs/karpenter
`pkg/controllers/provisioning/scheduling/defaultconstraints.go`): a pending pod with no
`topologySpreadConstraints` of its own gets the defaults (kube-scheduler's `PodTopologySpread`
`defaultConstraints`), each with the label selector kube-scheduler deduces for it:

- the `selector` of every Service in its namespace that selects it, merged;
- its controller's selector: a ReplicationController's (its labels win over a Service's on the same
  key), a ReplicaSet's or StatefulSet's (as `In` expressions ANDed with the rest, so a selector that
  disagrees with a Service's selects nothing, as upstream);
- no Service and no such controller: no selector, and the pod gets no default constraint.

WORLD.json: `defaultTopologySpreadConstraints` (a list of constraints without `labelSelector`),
`services`, `replicaSets`, `statefulSets` and `replicationControllers` as the API server writes them
(only `metadata` and `spec.selector` are read). Pure: the document is copied where pods change."""

from __future__ import annotations

import copy
from typing import Any

WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
# (apiVersion, kind) of the controllers whose selector counts, and the WORLD.json list that holds them.
OWNER_LISTS = {("v1", "ReplicationController"): "replicationControllers", ("apps/v1", "ReplicaSet"): "replicaSets",
               ("apps/v1", "StatefulSet"): "statefulSets"}


def inject_default_spread(data: dict, problem) -> dict:
    """`data` with the default constraints added to each pending pod that has none (the same dict when
    there are no defaults). `problem(path, message)` is told what is wrong with the defaults."""
    defaults = _defaults(data.get("defaultTopologySpreadConstraints"), problem)
    pods = data.get("pods")
    if not defaults or not isinstance(pods, list):
        return data
    services = _by_namespace(data.get("services"))
    owners = {key: _by_name(data.get(name)) for key, name in OWNER_LISTS.items()}
    changed = []
    for pod in pods:
        selector = _selector_for(pod, services, owners) if _wants_defaults(pod) else None
        if selector is None:
            changed.append(pod)
            continue
        pod = copy.deepcopy(pod)
        pod["spec"]["topologySpreadConstraints"] = [{**constraint, "labelSelector": copy.deepcopy(selector)}
                                                    for constraint in defaults]
        changed.append(pod)
    return {**data, "pods": changed}


def default_constraint_problems(value: Any) -> list[str]:
    """What is wrong with a list of default constraints, one line per problem naming its place."""
    problems = []
    _defaults(value, lambda path, message: problems.append(f"{path.split('defaultTopologySpreadConstraints', 1)[1] or 'the value'}: {message}"))
    return problems


def _defaults(value: Any, problem) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list):
        problem("defaultTopologySpreadConstraints", "expected a list of topology spread constraints")
        return []
    kept = []
    for index, item in enumerate(value):
        path = f"defaultTopologySpreadConstraints[{index}]"
        if not isinstance(item, dict):
            problem(path, "expected an object")
            continue
        wrong = []
        if "labelSelector" in item:
            wrong.append((f"{path}.labelSelector", "a default constraint takes its selector from the pod's Services "
                                                   "and controller: leave it out"))
        if not isinstance(item.get("topologyKey"), str) or not item.get("topologyKey"):
            wrong.append((f"{path}.topologyKey", "is required"))
        skew = item.get("maxSkew")
        if isinstance(skew, bool) or not isinstance(skew, int) or skew < 1:
            wrong.append((f"{path}.maxSkew", f"expected an integer of at least 1, got {skew!r}"))
        if item.get("whenUnsatisfiable") not in WHEN_UNSATISFIABLE:
            wrong.append((f"{path}.whenUnsatisfiable", f"expected one of {', '.join(WHEN_UNSATISFIABLE)}"))
        for where, message in wrong:
            problem(where, message)
        if not wrong:
            kept.append(item)
    return kept


def _wants_defaults(pod: Any) -> bool:
    if not isinstance(pod, dict) or not isinstance(pod.get("spec"), dict):
        return False
    spec = pod["spec"]
    return not spec.get("nodeName") and not spec.get("topologySpreadConstraints")


def _selector_for(pod: dict, services: dict, owners: dict) -> dict | None:
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    namespace = meta.get("namespace") or "default"
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    if not isinstance(namespace, str):
        return None
    match_labels: dict[str, str] = {}
    for service in services.get(namespace, ()):
        spec = service.get("spec") if isinstance(service.get("spec"), dict) else {}
        selector = spec.get("selector")
        if isinstance(selector, dict) and selector and all(labels.get(k) == v for k, v in selector.items()):
            match_labels.update(selector)
    expressions: list[dict] = []
    owner = _controller(meta, namespace, owners)
    if owner is not None:
        kind, selector = owner
        if kind == "ReplicationController":
            if isinstance(selector, dict):
                match_labels.update(selector)
        elif isinstance(selector, dict):
            labels_of = selector.get("matchLabels") if isinstance(selector.get("matchLabels"), dict) else {}
            expressions += [{"key": k, "operator": "In", "values": [v]} for k, v in sorted(labels_of.items(), key=str)]
            more = selector.get("matchExpressions")
            expressions += copy.deepcopy(more) if isinstance(more, list) else []
    if not match_labels and not expressions:
        return None
    found: dict[str, Any] = {}
    if match_labels:
        found["matchLabels"] = match_labels
    if expressions:
        found["matchExpressions"] = expressions
    return found


def _controller(meta: dict, namespace: str, owners: dict) -> tuple[str, Any] | None:
    refs = meta.get("ownerReferences") if isinstance(meta.get("ownerReferences"), list) else []
    ref = next((r for r in refs if isinstance(r, dict) and r.get("controller")), None)
    if ref is None:
        return None
    key = (ref.get("apiVersion"), ref.get("kind"))
    if not all(isinstance(part, str) for part in (*key, ref.get("name"), namespace)):
        return None
    found = owners.get(key, {}).get((namespace, ref["name"]))
    if found is None:
        return None  # not a supported controller, or one that no longer exists
    spec = found.get("spec") if isinstance(found.get("spec"), dict) else {}
    return ref["kind"], spec.get("selector")


def _by_namespace(items: Any) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for item in _objects(items):
        meta = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
        namespace = meta.get("namespace") or "default"
        if isinstance(namespace, str):
            grouped.setdefault(namespace, []).append(item)
    return grouped


def _by_name(items: Any) -> dict[tuple[str, str], dict]:
    found = {}
    for item in _objects(items):
        meta = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
        key = (meta.get("namespace") or "default", meta.get("name"))
        if all(isinstance(part, str) for part in key):
            found[key] = item
    return found


def _objects(items: Any) -> list[dict]:
    if isinstance(items, dict):
        items = items.get("items")
    return [item for item in items or () if isinstance(item, dict)] if isinstance(items, list) else []
