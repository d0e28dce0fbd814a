from scheduling.engine.podaffinity import AffinityTerm, LabelSelector, hostname_anti_affinity_conflict
from scheduling.engine.requirements import Requirement, Requirements
from scheduling.engine.taints import Taint, Toleration, untolerated


def test_tolerations():
    gpu = Taint("nvidia.com/gpu", "true", "NoSchedule")
    assert Toleration("nvidia.com/gpu", "Equal", "true", "NoSchedule").tolerates(gpu)
    assert Toleration("nvidia.com/gpu", "Exists").tolerates(gpu)
    assert Toleration("", "Exists").tolerates(gpu)  # tolerates everything
    assert not Toleration("nvidia.com/gpu", "Equal", "false").tolerates(gpu)
    assert not Toleration("nvidia.com/gpu", "Exists", effect="NoExecute").tolerates(gpu)
    assert not Toleration("", "Equal").tolerates(gpu)


def test_untolerated_ignores_prefer_no_schedule():
    taints = [Taint("soft", "", "PreferNoSchedule"), Taint("hard", "x", "NoExecute")]
    assert untolerated(taints, []) == taints[1]
    assert untolerated(taints, [Toleration("hard", "Exists")]) is None
    assert str(taints[1]) == "hard=x:NoExecute"


class P:
    def __init__(self, namespace, labels, terms=()):
        self.namespace, self.labels, self.anti_affinity = namespace, labels, tuple(terms)


def term(app, namespaces=("default",), key="kubernetes.io/hostname"):
    selector = LabelSelector(Requirements([Requirement.single("app", app)]))
    return AffinityTerm(selector, None if namespaces is None else frozenset(namespaces), key)


def test_hostname_anti_affinity_is_symmetric():
    web = P("default", {"app": "web"}, [term("web")])
    other_web = P("default", {"app": "web"})
    db = P("default", {"app": "db"})
    assert hostname_anti_affinity_conflict(web, [db]) is None
    assert hostname_anti_affinity_conflict(web, [db, other_web]) is other_web
    assert hostname_anti_affinity_conflict(other_web, [web]) is web  # the node's pod refuses it


def test_anti_affinity_scopes():
    web = P("default", {"app": "web"}, [term("web")])
    assert hostname_anti_affinity_conflict(web, [P("prod", {"app": "web"})]) is None  # other namespace
    everywhere = P("default", {"app": "web"}, [term("web", namespaces=None)])
    assert hostname_anti_affinity_conflict(everywhere, [P("prod", {"app": "web"})]) is not None
    zonal = P("default", {"app": "web"}, [term("web", key="topology.kubernetes.io/zone")])
    assert hostname_anti_affinity_conflict(zonal, [P("default", {"app": "web"})]) is None
    no_selector = P("default", {"app": "web"}, [AffinityTerm(None, frozenset({"default"}), "kubernetes.io/hostname")])
    assert hostname_anti_affinity_conflict(no_selector, [P("default", {"app": "web"})]) is None
