"""Property tests with topology spread, pod affinity and anti-affinity, preferences and minValues.

Every promise of test_properties.py still holds (`check_plan`), and the topology terms are
checked here against the final placement, again without the engine's code:
  * required anti-affinity (any key, and symmetric with running pods): no two pods share a domain
    where one's term selects the other (pairs of pods that were both running already excepted);
  * required affinity: a placed pod shares its domain with a pod its term selects, or selects
    itself (the first pod of a self-affine group seeds a domain);
  * DoNotSchedule spread, for a Deployment whose pods are the only ones its selector selects: every
    domain that received one of its pods holds at most min + maxSkew of them, min being the
    smallest count over the domains its pods could use (0 while fewer than minDomains exist; 0 for
    hostname, where a new node is always possible);
  * minValues on instance types: every on-demand or spot claim keeps that many options.
Worlds have reservations too, so the reserved-capacity rules meet the topology ones.
"""

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


from scheduling.engine import ReservedMode, parse_world, plan, simulate
from scheduling.engine.decisions import decisions as to_decisions
from tests.support.properties import examples

from .builders import node_class, node_pool
from .test_properties import CPUS, MEMORIES, NOW, ZONES, check_plan, expression_holds, instance_types, iso

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
KINDS = ["plain", "zone-spread", "host-spread", "zone-anti", "host-anti", "zone-self-affinity", "affinity-to-other",
         "host-affinity-to-other", "soft-spread", "preferred-zone", "preferred-host-anti"]


@st.composite
def topology_worlds(draw):
    types = draw(instance_types())
    reservations = [{"CapacityReservationId": f"cr-{i}", "OwnerId": "123456789012",
                     "InstanceType": draw(st.sampled_from([t["name"] for t in types])),
                     "AvailabilityZone": draw(st.sampled_from(ZONES)), "AvailableInstanceCount": draw(st.integers(0, 2)),
                     "InstanceMatchCriteria": "targeted", "State": "active", "ReservationType": "default",
                     "Tags": [{"Key": "team", "Value": "ml"}]}
                    for i in range(draw(st.integers(0, 3)))]
    pools = []
    for i in range(draw(st.integers(1, 2))):
        requirements = []
        if draw(st.integers(0, 2)) == 0:
            requirements.append({"key": ZONE, "operator": "In",
                                 "values": draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=2, unique=True))})
        if draw(st.integers(0, 3)) == 0:
            requirements.append({"key": "node.kubernetes.io/instance-type", "operator": "Exists",
                                 "minValues": draw(st.integers(1, 3))})
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if draw(st.integers(0, 4)) == 0 else []
        pools.append(node_pool(f"pool{i}", node_class="nc0", weight=draw(st.sampled_from([None, 10])),
                               capacity_types=draw(st.sampled_from([["on-demand"], ["spot", "on-demand"], None,
                                                                     ["reserved"], ["reserved", "on-demand"]])),
                               requirements=requirements, taints=taints))
    nodes, bound = [], []
    for i in range(draw(st.integers(0, 3))):
        zone = draw(st.sampled_from(ZONES))
        room = {"cpu": str(draw(st.sampled_from([1, 2, 4]))), "memory": "8Gi", "pods": "10"}
        nodes.append({"metadata": {"name": f"node{i}", "labels": {ZONE: zone, HOST: f"node{i}"}}, "spec": {"taints": []},
                      "status": {"allocatable": room, "capacity": room}})
        for j in range(draw(st.integers(0, 2))):
            # Running pods never conflict among themselves: guards repel d1/d2, which never run yet.
            app = draw(st.sampled_from(["d0", "web", "guard"]))
            spec = {"nodeName": f"node{i}", "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}
            if app == "guard":
                spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": draw(st.sampled_from(["d1", "d2"]))}},
                     "topologyKey": draw(st.sampled_from([ZONE, HOST]))}]}}
            bound.append({"metadata": {"name": f"bound{i}-{j}", "namespace": "default", "labels": {"app": app}},
                          "spec": spec})
    pending = []
    for d in range(draw(st.integers(1, 3))):
        app = f"d{d}"
        kind = draw(st.sampled_from(KINDS))
        skew = draw(st.integers(1, 2))
        min_domains = draw(st.sampled_from([None, None, 2, 4]))
        zone_selector = draw(st.sampled_from([None, None, ZONES[0], ZONES[1]]))
        tolerant = draw(st.booleans())
        for k in range(draw(st.integers(1, 5))):
            spec = {"containers": [{"name": "c", "resources": {"requests": {
                "cpu": draw(st.sampled_from(CPUS[:4])), "memory": draw(st.sampled_from(MEMORIES[:3]))}}}]}
            if zone_selector:
                spec["nodeSelector"] = {ZONE: zone_selector}
            if tolerant:
                spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
            mine = {"labelSelector": {"matchLabels": {"app": app}}}
            other = {"labelSelector": {"matchLabels": {"app": draw(st.sampled_from(["d0", "d1", "web"]))}}}
            if kind in ("zone-spread", "host-spread", "soft-spread"):
                spec["topologySpreadConstraints"] = [{
                    "maxSkew": skew, "topologyKey": HOST if kind == "host-spread" else ZONE,
                    "whenUnsatisfiable": "ScheduleAnyway" if kind == "soft-spread" else "DoNotSchedule", **mine,
                    **({"minDomains": min_domains} if min_domains and kind == "zone-spread" else {})}]
            elif kind in ("zone-anti", "host-anti"):
                spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {**mine, "topologyKey": ZONE if kind == "zone-anti" else HOST}]}}
            elif kind == "zone-self-affinity":
                spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{**mine, "topologyKey": ZONE}]}}
            elif kind in ("affinity-to-other", "host-affinity-to-other"):
                spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {**other, "topologyKey": HOST if kind.startswith("host") else ZONE}]}}
            elif kind == "preferred-zone":
                spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": w, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [z]}]}}
                    for w, z in zip((10, 20), draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=2)))]}}
            elif kind == "preferred-host-anti":
                spec["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "podAffinityTerm": {**mine, "topologyKey": HOST}}]}}
            pending.append({"metadata": {"name": f"{app}-{k}", "namespace": "default", "labels": {"app": app}}, "spec": spec})
    return {"now": iso(NOW), "featureGates": {"ReservedCapacity": True}, "instanceTypes": types,
            "capacityReservations": reservations, "ec2NodeClasses": [node_class("nc0", [{"tags": {"team": "ml"}}])],
            "nodePools": pools,
            "nodes": nodes, "pods": bound + pending}


# an independent reading of the plan ----------------------------------------------------------------


def final_places(doc, decisions):
    """pod key -> the labels of the node it ends on (hostname included), for bound and placed pods."""
    nodes = {n["metadata"]["name"]: n for n in doc["nodes"]}
    places = {}
    for p in doc["pods"]:
        name = p["spec"].get("nodeName")
        if name:
            places[f"default/{p['metadata']['name']}"] = {HOST: name, **nodes[name]["metadata"]["labels"]}
    for binding in decisions["bindings"]:
        name = binding["node"]
        places[binding["pod"]] = {HOST: name, **nodes[name]["metadata"]["labels"]}
    for claim in decisions["nodeClaims"]:
        for key in claim["pods"]:
            places[key] = {**claim["labels"], HOST: claim["name"]}
    return places


def selects(term, pod):
    labels = pod["metadata"].get("labels", {})
    return all(labels.get(k) == v for k, v in term["labelSelector"]["matchLabels"].items())


def terms(pod, kind):
    return pod["spec"].get("affinity", {}).get(kind, {}).get("requiredDuringSchedulingIgnoredDuringExecution", [])


def pool_zones(doc, pool, pod):
    """Zones a pod could get from a NodePool: it tolerates the taints, the requirements admit the
    zone and the pod's selector, and some instance type has an available compatible offering."""
    tolerated = all(any(t.get("key") == taint["key"] for t in pod["spec"].get("tolerations", []))
                    for taint in pool["spec"]["template"]["spec"]["taints"])
    if not tolerated:
        return set()
    reqs = pool["spec"]["template"]["spec"]["requirements"]
    selector = pod["spec"].get("nodeSelector", {})
    zones = set()
    reserved = {}
    for cr in doc["capacityReservations"]:  # every one is active, selected and unending
        if cr["AvailableInstanceCount"] > 0:
            reserved.setdefault(cr["InstanceType"], []).append({"capacityType": "reserved", "zone": cr["AvailabilityZone"]})
    for it in doc["instanceTypes"]:
        labels = {**it["labels"], "node.kubernetes.io/instance-type": it["name"]}
        for offer in it["offerings"] + reserved.get(it["name"], []):
            if not offer.get("available", True):
                continue
            full = {**labels, ZONE: offer["zone"], "karpenter.sh/capacity-type": offer["capacityType"]}
            if all(expression_holds(r, full) for r in reqs) and all(full.get(k) == v for k, v in selector.items()):
                zones.add(offer["zone"])
    return zones


def check_topology(doc, decisions):
    pods = {f"default/{p['metadata']['name']}": p for p in doc["pods"]}
    places = final_places(doc, decisions)
    bound = {k for k, p in pods.items() if p["spec"].get("nodeName")}
    # required anti-affinity, both ways
    for key, pod in pods.items():
        if key not in places:
            continue
        for term in terms(pod, "podAntiAffinity"):
            domain = places[key].get(term["topologyKey"])
            for other, where in places.items():
                if other == key or (key in bound and other in bound) or domain is None:
                    continue
                if where.get(term["topologyKey"]) == domain and selects(term, pods[other]):
                    raise AssertionError(f"{key} and {other} share {term['topologyKey']}={domain} against anti-affinity")
    # required affinity
    for key, pod in pods.items():
        if key in bound or key not in places:
            continue
        for term in terms(pod, "podAffinity"):
            domain = places[key].get(term["topologyKey"])
            company = [o for o, where in places.items() if o != key and where.get(term["topologyKey"]) == domain
                       and selects(term, pods[o])]
            assert domain is not None and (company or selects(term, pod)), f"{key} has no company in {domain}"
    # DoNotSchedule spread, per Deployment (all pods of one app share their constraint)
    apps = {}
    for key, pod in pods.items():
        if key not in bound:
            apps.setdefault(pod["metadata"]["labels"]["app"], []).append(pod)
    for app, members in apps.items():
        constraints = [c for c in members[0]["spec"].get("topologySpreadConstraints", [])
                       if c["whenUnsatisfiable"] == "DoNotSchedule"]
        for constraint in constraints:
            key_name, skew = constraint["topologyKey"], constraint["maxSkew"]
            selected = [k for k, p in pods.items() if k in places and selects(constraint, p)]
            counts = Counter(places[k].get(key_name) for k in selected)
            received = {places[f"default/{p['metadata']['name']}"].get(key_name) for p in members
                        if f"default/{p['metadata']['name']}" in places}
            if key_name == HOST:
                lowest = 0
            else:
                selector = members[0]["spec"].get("nodeSelector", {})
                domains = set()
                for pool in doc["nodePools"]:
                    domains |= pool_zones(doc, pool, members[0])
                for n in doc["nodes"]:
                    labels = n["metadata"]["labels"]
                    if all(labels.get(k) == v for k, v in selector.items()):
                        domains.add(labels[ZONE])
                lowest = min((counts.get(d, 0) for d in domains), default=0)
                if len(domains) < constraint.get("minDomains", 0):
                    lowest = 0
            for domain in received:
                assert counts[domain] <= lowest + skew, (app, key_name, dict(counts), domain, lowest)
    # minValues on instance types
    pools = {p["metadata"]["name"]: p for p in doc["nodePools"]}
    for claim in decisions["nodeClaims"]:
        for req in pools[claim["nodePool"]]["spec"]["template"]["spec"]["requirements"]:
            if req.get("minValues") and req["key"] == "node.kubernetes.io/instance-type" \
                    and claim["launch"]["capacityType"] != "reserved":
                assert len(claim["instanceTypeOptions"]) >= req["minValues"], claim


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(topology_worlds())
def test_plans_keep_topology_promises(doc):
    decisions = simulate(doc)
    assert decisions == simulate(doc), "output must be deterministic"
    check_plan(doc, decisions)
    check_topology(doc, decisions)
    for item in decisions["unschedulable"]:
        assert item["reason"]
    # Consolidation's fallback mode keeps the same promises.
    fallback = to_decisions(plan(parse_world(doc), ReservedMode.FALLBACK))
    check_plan(doc, fallback)
    check_topology(doc, fallback)
