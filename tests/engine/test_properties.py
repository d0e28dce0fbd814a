"""Property tests over random worlds: whatever the input, the plan keeps the engine's promises.

The checks are written independently of the engine (label matching, tolerations, anti-affinity,
reservation usability and selection are re-implemented here from the Kubernetes/EC2 semantics);
only the quantity parser is shared. Node classes use zero kubelet overhead, so an instance type's
allocatable is its capacity.
"""

import functools
from collections import Counter
from datetime import datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


from scheduling.engine import ReservedMode, parse_world, plan, simulate
from scheduling.engine.decisions import decisions as to_decisions
from scheduling.engine.quantities import parse_quantity
from tests.support.properties import examples

from .builders import node_class, node_pool

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)
ZONES = ["z-a", "z-b", "z-c"]
CPUS = ["100m", "500m", "1", "1500m", "3", "7"]
MEMORIES = ["128Mi", "1Gi", "3Gi", "12Gi"]


def iso(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@st.composite
def instance_types(draw):
    types = []
    for i in range(draw(st.integers(1, 5))):
        cpu = draw(st.sampled_from([1, 2, 4, 8]))
        zones = draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=3, unique=True))
        offerings = []
        for zone in zones:
            od = round(cpu * 0.05 + draw(st.integers(0, 9)) / 1000, 4)
            offerings.append({"capacityType": "on-demand", "zone": zone, "price": od, "available": draw(st.booleans()) or True})
            if draw(st.booleans()):
                offerings.append({"capacityType": "spot", "zone": zone, "price": round(od / 3, 4), "available": draw(st.booleans())})
        types.append({
            "name": f"it{i}", "cpu": cpu, "memory": f"{draw(st.sampled_from([2, 4, 8, 16]))}Gi",
            "pods": draw(st.sampled_from([3, 8, 110])),
            "labels": {"kubernetes.io/arch": draw(st.sampled_from(["amd64", "arm64"])),
                       "example.com/family": draw(st.sampled_from(["a", "b"]))},
            "offerings": offerings,
        })
    return types


@st.composite
def reservations(draw, types):
    result = []
    for i in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["default", "default", "capacity-block"]))
        end = draw(st.sampled_from([None, 10, 35, 45, 65, 75, 300]))
        if kind == "capacity-block" and end is None:
            end = 300
        available = draw(st.integers(0, 3))
        item = {
            "CapacityReservationId": f"cr-{i}", "OwnerId": "123456789012",
            "InstanceType": draw(st.sampled_from([t["name"] for t in types])),
            "AvailabilityZone": draw(st.sampled_from(ZONES)),
            "AvailableInstanceCount": available, "TotalInstanceCount": available + draw(st.integers(0, 2)),
            "State": draw(st.sampled_from(["active"] * 6 + ["expired", "cancelled"])),
            "InstanceMatchCriteria": draw(st.sampled_from(["open", "targeted"])), "ReservationType": kind,
            "Tags": [{"Key": "team", "Value": draw(st.sampled_from(["ml", "web"]))}],
            "Interruptible": draw(st.booleans()),
        }
        if end is not None:
            item["EndDate"] = iso(NOW + timedelta(minutes=end))
        if kind == "capacity-block" and draw(st.booleans()):
            item["UltraserverType"] = "u-p6e-gb200x72"
        result.append(item)
    return result


TERMS = [None, [{"tags": {"team": "ml"}}], [{"tags": {"team": "ml"}}], [{"tags": {"team": "*"}}], [{"tags": {"team": "*"}}],
         [{"id": "cr-0"}, {"id": "cr-2"}], [{"instanceMatchCriteria": "open"}], [{"id": "bad"}]]
CAPACITY_TYPES = [["reserved"], ["reserved"], ["reserved", "on-demand"], ["reserved", "on-demand"],
                  ["reserved", "spot", "on-demand"], ["on-demand"], ["spot"], ["spot", "on-demand"]]


@st.composite
def pools(draw, class_names):
    result = []
    for i in range(draw(st.integers(1, 3))):
        requirements = []
        if draw(st.booleans()):
            requirements.append({"key": "topology.kubernetes.io/zone", "operator": "In",
                                 "values": draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=2, unique=True))})
        if draw(st.booleans()):
            requirements.append({"key": "team", "operator": "In", "values": draw(st.lists(st.sampled_from(["a", "b"]), min_size=1, unique=True))})
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if draw(st.integers(0, 5)) == 0 else []
        result.append(node_pool(
            f"pool{i}", node_class=draw(st.sampled_from(class_names)), weight=draw(st.sampled_from([None, 10, 20])),
            capacity_types=draw(st.sampled_from(CAPACITY_TYPES)),
            requirements=requirements, taints=taints,
            limits={"cpu": str(draw(st.integers(2, 24)))} if draw(st.booleans()) else None,
            labels={"tier": "gold"} if draw(st.booleans()) else None,
        ))
    return result


def expression(draw, reservation_ids):
    key = draw(st.sampled_from(["topology.kubernetes.io/zone", "kubernetes.io/arch", "karpenter.sh/capacity-type",
                                "team", "example.com/family", "karpenter.k8s.aws/capacity-reservation-id", "tier"]))
    values = {"topology.kubernetes.io/zone": ZONES, "kubernetes.io/arch": ["amd64", "arm64"],
              "karpenter.sh/capacity-type": ["reserved", "spot", "on-demand"], "team": ["a", "b"],
              "example.com/family": ["a", "b"], "tier": ["gold", "silver"],
              "karpenter.k8s.aws/capacity-reservation-id": reservation_ids or ["cr-9"]}[key]
    operator = draw(st.sampled_from(["In", "In", "NotIn", "Exists", "DoesNotExist"]))
    chosen = draw(st.lists(st.sampled_from(values), min_size=1, max_size=2, unique=True)) if operator in ("In", "NotIn") else []
    return {"key": key, "operator": operator, "values": chosen}


@st.composite
def pods(draw, reservation_ids, count):
    result = []
    for i in range(count):
        spec = {"containers": [{"name": "c", "resources": {"requests": {
            "cpu": draw(st.sampled_from(CPUS)), "memory": draw(st.sampled_from(MEMORIES))}}}]}
        labels = {"app": draw(st.sampled_from(["web", "db"]))}
        if draw(st.integers(0, 3)) == 0:
            spec["nodeSelector"] = {"topology.kubernetes.io/zone": draw(st.sampled_from(ZONES))}
        if draw(st.integers(0, 2)) == 0:
            terms = [{"matchExpressions": [expression(draw, reservation_ids) for _ in range(draw(st.integers(1, 2)))]}
                     for _ in range(draw(st.integers(1, 2)))]
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
        if draw(st.integers(0, 3)) == 0:
            spec.setdefault("affinity", {})["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": labels["app"]}}, "topologyKey": "kubernetes.io/hostname"}]}
        if draw(st.integers(0, 2)) == 0:
            spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        result.append({"metadata": {"name": f"p{i}", "namespace": "default", "labels": labels}, "spec": spec})
    return result


@st.composite
def worlds(draw):
    types = draw(instance_types())
    crs = draw(reservations(types))
    classes = [node_class(f"nc{i}", draw(st.sampled_from(TERMS))) for i in range(draw(st.integers(1, 2)))]
    node_pools = draw(pools([c["metadata"]["name"] for c in classes]))
    nodes, bound = [], []
    for i in range(draw(st.integers(0, 3))):
        cpu = draw(st.sampled_from([1, 2, 4]))
        labels = {"topology.kubernetes.io/zone": draw(st.sampled_from(ZONES)), "kubernetes.io/arch": "amd64"}
        if draw(st.booleans()):
            labels["karpenter.sh/nodepool"] = draw(st.sampled_from([p["metadata"]["name"] for p in node_pools]))
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if draw(st.integers(0, 3)) == 0 else []
        nodes.append({"metadata": {"name": f"node{i}", "labels": labels}, "spec": {"taints": taints},
                      "status": {"allocatable": {"cpu": str(cpu), "memory": "8Gi", "pods": "10"},
                                 "capacity": {"cpu": str(cpu), "memory": "8Gi", "pods": "10"}}})
        if draw(st.booleans()):
            bound.append({"metadata": {"name": f"bound{i}", "namespace": "default", "labels": {"app": "web"}},
                          "spec": {"nodeName": f"node{i}", "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}})
    pending = draw(pods([c["CapacityReservationId"] for c in crs], draw(st.integers(0, 18))))
    return {
        "now": iso(NOW), "featureGates": {"ReservedCapacity": draw(st.sampled_from([True, True, True, False]))},
        "instanceTypes": types, "capacityReservations": crs, "ec2NodeClasses": classes, "nodePools": node_pools,
        "nodes": nodes, "pods": bound + pending,
    }


# independent semantics ---------------------------------------------------------------------------


def expression_holds(expr, labels):
    value = labels.get(expr["key"])
    op = expr["operator"]
    if op == "In":
        return value is not None and value in expr["values"]
    if op == "NotIn":
        return value is None or value not in expr["values"]
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    bound = int(expr["values"][0])
    if value is None or not value.lstrip("-").isdigit():
        return False
    return int(value) > bound if op == "Gt" else int(value) < bound


def pod_matches(pod, labels):
    spec = pod["spec"]
    if any(labels.get(k) != v for k, v in spec.get("nodeSelector", {}).items()):
        return False
    required = spec.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(term.get("matchExpressions") and all(expression_holds(e, labels) for e in term["matchExpressions"])
               for term in required["nodeSelectorTerms"])


def tolerates(pod, taints):
    tolerations = pod["spec"].get("tolerations", [])
    for taint in taints:
        if taint["effect"] == "PreferNoSchedule":
            continue
        if not any(t.get("operator") == "Exists" and t.get("key") in ("", None, taint["key"]) for t in tolerations):
            return False
    return True


def requests(pod):
    asked = pod["spec"]["containers"][0]["resources"]["requests"]
    return (parse_quantity(asked.get("cpu", "0"), milli=True), parse_quantity(asked.get("memory", "0")))


def anti_affinity_conflicts(pods_on_node):
    for a in pods_on_node:
        for term in a["spec"].get("affinity", {}).get("podAntiAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", []):
            wanted = term["labelSelector"]["matchLabels"]
            for b in pods_on_node:
                if b is not a and all(b["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items()):
                    return True
    return False


def reservation_usable(cr):
    if cr["State"] != "active":
        return False
    end = cr.get("EndDate")
    if end is None:
        return True
    end = datetime.strptime(end, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    if cr["ReservationType"] == "capacity-block":
        lead = 70 if cr.get("UltraserverType") else 40
        return NOW < end - timedelta(minutes=lead)
    return NOW < end


def term_selects(term, cr):
    if "id" in term:
        return term["id"] == cr["CapacityReservationId"]
    tags = {t["Key"]: t["Value"] for t in cr["Tags"]}
    if "instanceMatchCriteria" in term and term["instanceMatchCriteria"] != cr["InstanceMatchCriteria"]:
        return False
    return all(k in tags and (v == "*" or tags[k] == v) for k, v in term.get("tags", {}).items())


# the properties ----------------------------------------------------------------------------------


@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(worlds())
def test_plans_keep_every_promise(doc):
    decisions = simulate(doc)
    assert decisions == simulate(doc), "output must be deterministic"
    check_plan(doc, decisions)


@st.composite
def reserved_worlds(draw):
    """Worlds where reservations matter: all selected and active, simple pods, no limits."""
    types = draw(instance_types())
    crs = draw(reservations(types))
    for cr in crs:
        cr.update(State="active", Tags=[{"Key": "team", "Value": "ml"}], EndDate=iso(NOW + timedelta(hours=5)))
    node_pools = []
    for i in range(draw(st.integers(1, 2))):
        zone = [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": [draw(st.sampled_from(ZONES))]}]
        node_pools.append(node_pool(f"pool{i}", node_class="nc0", weight=draw(st.sampled_from([None, 10])),
                                    capacity_types=draw(st.sampled_from(CAPACITY_TYPES)),
                                    requirements=zone if draw(st.integers(0, 3)) == 0 else []))
    pending = []
    for i in range(draw(st.integers(1, 15))):
        spec = {"containers": [{"name": "c", "resources": {"requests": {
            "cpu": draw(st.sampled_from(CPUS)), "memory": draw(st.sampled_from(MEMORIES))}}}]}
        if draw(st.integers(0, 3)) == 0:
            spec["nodeSelector"] = {"topology.kubernetes.io/zone": draw(st.sampled_from(ZONES))}
        if draw(st.integers(0, 2)) == 0:
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
        pending.append({"metadata": {"name": f"p{i}", "namespace": "default", "labels": {"app": "web"}}, "spec": spec})
    return {"now": iso(NOW), "featureGates": {"ReservedCapacity": True}, "instanceTypes": types,
            "capacityReservations": crs, "ec2NodeClasses": [node_class("nc0", [{"tags": {"team": "ml"}}])],
            "nodePools": node_pools, "nodes": [], "pods": pending}


@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(reserved_worlds())
def test_no_reserved_unit_is_left_idle_that_a_paid_claim_could_use(doc):
    decisions = simulate(doc)
    check_plan(doc, decisions)
    # Consolidation's fallback mode keeps the same promises.
    check_plan(doc, to_decisions(plan(parse_world(doc), ReservedMode.FALLBACK)))
    crs = {c["CapacityReservationId"]: c for c in doc["capacityReservations"]}
    used = Counter(c["launch"].get("reservationID") for c in decisions["nodeClaims"])
    types = {t["name"]: t for t in doc["instanceTypes"]}
    pods_by_key = {f"default/{p['metadata']['name']}": p for p in doc["pods"]}
    pools = {p["metadata"]["name"]: p for p in doc["nodePools"]}
    for claim in decisions["nodeClaims"]:
        if claim["launch"]["capacityType"] == "reserved":
            continue
        pool = pools[claim["nodePool"]]
        pods_here = [pods_by_key[k] for k in claim["pods"]]
        for rid, cr in crs.items():
            it = types[cr["InstanceType"]]
            if used[rid] >= cr["AvailableInstanceCount"] or not reservation_usable(cr):
                continue
            labels = {**claim["labels"], **it["labels"], "node.kubernetes.io/instance-type": it["name"],
                      "topology.kubernetes.io/zone": cr["AvailabilityZone"], "karpenter.sh/capacity-type": "reserved",
                      "karpenter.k8s.aws/capacity-reservation-id": rid}
            fits = (sum(requests(p)[0] for p in pods_here) <= it["cpu"] * 1000
                    and sum(requests(p)[1] for p in pods_here) <= parse_quantity(it["memory"])
                    and len(pods_here) <= it["pods"])
            compatible = all(pod_matches(p, labels) for p in pods_here) and all(
                expression_holds(r, labels) for r in pool["spec"]["template"]["spec"]["requirements"])
            assert not (fits and compatible), f"{claim['name']} pays for {claim['launch']} while {rid} has a free unit"
    for item in decisions["deferred"]:
        held = [rid for rid in crs if rid in item["reason"]]
        assert held and all(used[rid] == crs[rid]["AvailableInstanceCount"] for rid in held), item


def check_plan(doc, decisions):
    """Promises every plan keeps, checked without the engine's own code."""

    pods_by_key = {f"default/{p['metadata']['name']}": p for p in doc["pods"]}
    pending = sorted(k for k, p in pods_by_key.items() if not p["spec"].get("nodeName"))
    mentioned = [k for c in decisions["nodeClaims"] for k in c["pods"]] + [b["pod"] for b in decisions["bindings"]] \
        + [u["pod"] for u in decisions["unschedulable"]] + [d["pod"] for d in decisions["deferred"]]
    assert sorted(mentioned) == pending, "every pending pod appears exactly once"
    assert len({c["name"] for c in decisions["nodeClaims"]}) == len(decisions["nodeClaims"])

    types = {t["name"]: t for t in doc["instanceTypes"]}
    pools = {p["metadata"]["name"]: p for p in doc["nodePools"]}
    classes = {c["metadata"]["name"]: c for c in doc["ec2NodeClasses"]}
    crs = {c["CapacityReservationId"]: c for c in doc["capacityReservations"]}
    gate = doc["featureGates"]["ReservedCapacity"]
    used = Counter()
    new_cpu = Counter()
    for claim in decisions["nodeClaims"]:
        pool = pools[claim["nodePool"]]
        it = types[claim["launch"]["instanceType"]]
        launch, labels = claim["launch"], claim["labels"]
        pods_here = [pods_by_key[k] for k in claim["pods"]]
        assert claim["pods"], "a claim carries pods"
        new_cpu[claim["nodePool"]] += it["cpu"] * 1000
        # resources
        assert sum(requests(p)[0] for p in pods_here) <= it["cpu"] * 1000
        assert sum(requests(p)[1] for p in pods_here) <= parse_quantity(it["memory"])
        assert len(pods_here) <= it["pods"]
        # the pods' own constraints, against the labels the node will carry
        for p in pods_here:
            assert pod_matches(p, labels), (p, labels)
            assert tolerates(p, pool["spec"]["template"]["spec"]["taints"])
        assert not anti_affinity_conflicts(pods_here)
        # the NodePool's requirements and labels
        for req in pool["spec"]["template"]["spec"]["requirements"]:
            assert expression_holds(req, labels), (req, labels)
        assert labels["karpenter.sh/nodepool"] == claim["nodePool"]
        assert all(labels.get(k) == v for k, v in pool["spec"]["template"].get("metadata", {}).get("labels", {}).items())
        assert labels["node.kubernetes.io/instance-type"] == it["name"]
        assert labels["topology.kubernetes.io/zone"] == launch["zone"]
        assert labels["karpenter.sh/capacity-type"] == launch["capacityType"]
        assert claim["launch"]["instanceType"] in claim["instanceTypeOptions"]
        reservation_labels = {k for k in labels if k.startswith("karpenter.k8s.aws/capacity-reservation")}
        if launch["capacityType"] == "reserved":
            assert gate
            cr = crs[launch["reservationID"]]
            used[cr["CapacityReservationId"]] += 1
            assert reservation_usable(cr)
            assert cr["InstanceType"] == it["name"] and cr["AvailabilityZone"] == launch["zone"]
            terms = classes[pool["spec"]["template"]["spec"]["nodeClassRef"]["name"]]["spec"].get("capacityReservationSelectorTerms") or []
            assert any(term_selects(t, cr) for t in terms)
            od = [o["price"] for o in it["offerings"] if o["capacityType"] == "on-demand"]
            od_here = [o["price"] for o in it["offerings"] if o["capacityType"] == "on-demand" and o["zone"] == launch["zone"]]
            assert launch["price"] == min(od_here or od or [0.0]) / 10_000_000
            assert labels["karpenter.k8s.aws/capacity-reservation-id"] == cr["CapacityReservationId"]
            assert len(reservation_labels) == 3
        else:
            assert not reservation_labels
            offer = [o for o in it["offerings"] if o["capacityType"] == launch["capacityType"] and o["zone"] == launch["zone"]]
            assert offer and offer[0].get("available", True) and offer[0]["price"] == launch["price"]
    for rid, count in used.items():
        assert count <= crs[rid]["AvailableInstanceCount"], f"reservation {rid} over-committed"

    # NodePool limits, counting existing nodes
    for name, pool in pools.items():
        limit = pool["spec"].get("limits", {}).get("cpu")
        if limit is not None:
            existing = sum(parse_quantity(n["status"]["capacity"]["cpu"], milli=True) for n in doc["nodes"]
                           if n["metadata"]["labels"].get("karpenter.sh/nodepool") == name)
            assert new_cpu[name] == 0 or existing + new_cpu[name] <= parse_quantity(limit, milli=True)

    # bindings to existing nodes
    nodes = {n["metadata"]["name"]: n for n in doc["nodes"]}
    on_node = {name: [p for p in doc["pods"] if p["spec"].get("nodeName") == name] for name in nodes}
    for binding in decisions["bindings"]:
        on_node[binding["node"]].append(pods_by_key[binding["pod"]])
    for name, pods_here in on_node.items():
        node = nodes[name]
        assert sum(requests(p)[0] for p in pods_here) <= parse_quantity(node["status"]["allocatable"]["cpu"], milli=True)
        assert len(pods_here) <= int(node["status"]["allocatable"]["pods"])
        new = [pods_by_key[b["pod"]] for b in decisions["bindings"] if b["node"] == name]
        for p in new:
            assert pod_matches(p, {**node["metadata"]["labels"], "metadata.name": name})
            assert tolerates(p, node["spec"]["taints"])
        assert not (new and anti_affinity_conflicts(pods_here))


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(reserved_worlds(), worlds()))
def test_the_reserved_path_shortcuts_change_no_decision(doc):
    """The scheduler's cheap tests (a strict claim a pod would outgrow, a paid claim that could
    only grow, a first NodePool known to give no unit, no free unit with room for the pod, views
    narrowed to a reservation's types, a claim's room for a pod sized once, the types with a free
    unit kept up to date as units are taken and given back, a held unit's launch without its
    pinned view) answer as the full work would: the plan is the same with them turned off."""
    from unittest import mock

    from scheduling.engine.catalog import Catalog
    from scheduling.engine.ledger import ReservationLedger, _FreeTypes
    from scheduling.engine.nodeclaim import NodeClaim
    from scheduling.engine.scheduler import Scheduler

    def sized_afresh(claim, pod):
        requests = claim.requests.add(pod.requests)
        return requests, claim.template.catalog.fits_mask(requests) & claim.mask

    fast = simulate(doc)
    every_type = lambda self, requirements: range(len(self.instance_types))  # noqa: E731
    with mock.patch.object(NodeClaim, "refuses_outgrowing", lambda *args: False), \
            mock.patch.object(NodeClaim, "could_stay_put", lambda *args: True), \
            mock.patch.object(NodeClaim, "_sized", sized_afresh), \
            mock.patch.object(Scheduler, "_reservable", Scheduler._first_pool_reserves), \
            mock.patch.object(Scheduler, "_free_unit_fits", lambda *args: True), \
            mock.patch.object(Catalog, "_candidate_indexes", every_type), \
            mock.patch.object(ReservationLedger, "free_type_mask", lambda self, view: _FreeTypes(view, self._remaining).mask), \
            mock.patch("scheduling.engine.launch._held_launch", lambda *args: None):
        slow = simulate(doc)
    assert fast == slow


@functools.cache
def bench_world_parsed(reserved: int):
    """The benchmark's 400-type world, parsed once per reservation count: parsing it was two thirds
    of the property below, which tests the catalog built from it (built afresh in every example;
    building it reads the parsed world and changes nothing in it)."""
    from scheduling.bench import world as bench_world

    return parse_world(bench_world([], reserved=reserved))


@settings(max_examples=examples(200), deadline=None)
@given(st.data())
def test_cheapest_open_price_and_types_up_to_a_price_answer_as_a_walk_of_the_price_order(data):
    """CatalogView's bisections over `open_order` prefixes give what walking it gives."""
    from scheduling.engine.planning import build_catalogs, resolve_node_classes
    from scheduling.engine.requirements import Requirement, Requirements

    parsed = bench_world_parsed(data.draw(st.sampled_from([0, 20])))
    catalog = build_catalogs(parsed, resolve_node_classes(parsed))["default"]
    zone = data.draw(st.sampled_from([None, "test-zone-1", "test-zone-3"]))
    requirements = Requirements([] if zone is None else [Requirement.single("topology.kubernetes.io/zone", zone)])
    view = catalog.view(requirements)
    mask = data.draw(st.integers(0, catalog.all_mask))
    walked = next((price for price, _, index in view.open_order if mask >> index & 1), float("inf"))
    assert view.cheapest_open_price(mask) == walked
    price = data.draw(st.one_of(st.sampled_from([p for p, _, _ in view.open_order] or [0.0]), st.floats(0, 100)))
    assert view.open_types_up_to(price) == sum(1 << index for p, _, index in view.open_order if p <= price)
