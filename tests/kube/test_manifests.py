"""The kustomize manifests (deploy/kustomize) as the real API server takes them.

The kustomization is built (tests/support/kustomize.py: kustomize's behaviour for the features it
uses) into a namespace of the test's own, with a filled-in secret.env; the Namespace is created and
every other object is created with `dryRun=All`, so the API server validates and defaults it and
stores nothing. The test API server is v1.20: a kind or API version it does not serve fails here.

v1.20 has no strict field validation (`fieldValidation=Strict` came in 1.25): it drops a field it
does not know without a word. So the answer is compared with what was sent: every field sent must
come back with the value sent, or the server did not know it (a misspelt key, a field newer than
the server).
"""

import re
from pathlib import Path

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from scheduling.adapters.kube.resources import Resource
from tests.support.kustomize import build

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZE = ROOT / "deploy/kustomize"


def filled_secret_env() -> str:
    """secret.env.example with every value given, as an operator writes it."""
    values = {"DATABASE_URL": "postgres://karpweb:pw@db:5432/karpweb", "REDIS_URL": "redis://redis:6379/0",
              "SECRET_KEY": "k" * 20 + "-a-test-secret-key-with-many-distinct-characters-0123456789",
              "KARPWEB_CACHE_URL": "redis://redis:6379/1", "KARPWEB_METRICS_TOKEN": "a-metrics-token"}
    lines = []
    for line in (KUSTOMIZE / "secret.env.example").read_text().splitlines():
        key = line.partition("=")[0]
        lines.append(f"{key}={values[key]}" if line and not line.startswith("#") else line)
    return "\n".join(lines) + "\n"


def resource_for(rest, api_version: str, kind: str) -> Resource:
    """The served resource of a kind, from the API server's discovery documents."""
    group, _, version = api_version.rpartition("/")
    path = f"/apis/{group}/{version}" if group else f"/api/{version}"
    try:
        listing = rest.request("GET", path)
    except ApiException as exc:
        pytest.fail(f"the API server (v1.20) does not serve {api_version} (for {kind}): {exc.status}")
    for entry in listing["resources"]:
        if entry["kind"] == kind and "/" not in entry["name"]:
            return Resource(kind, group, version, entry["name"], entry["namespaced"])
    pytest.fail(f"the API server (v1.20) serves no {kind} in {api_version}")


def dropped(sent, answer, path: str = "") -> list[str]:
    """The fields of `sent` that `answer` lacks or holds another value for."""
    if isinstance(sent, dict):
        if not isinstance(answer, dict):
            return [path or "."]
        return [p for key, value in sent.items() for p in dropped(value, answer.get(key, _MISSING), f"{path}.{key}")]
    if isinstance(sent, list):
        if not isinstance(answer, list) or len(answer) != len(sent):
            return [path]
        return [p for i, (s, a) in enumerate(zip(sent, answer, strict=True)) for p in dropped(s, a, f"{path}[{i}]")]
    return [] if sent == answer else [path]


_MISSING = object()


def test_the_manifests_build_into_every_object():
    objects = build(KUSTOMIZE, files={"secret.env": filled_secret_env()})
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objects)
    assert kinds == [("ClusterRole", "karpweb"), ("ClusterRoleBinding", "karpweb"), ("ConfigMap", "karpweb"),
                     ("Deployment", "karpweb-beat"), ("Deployment", "karpweb-watch"),
                     ("Deployment", "karpweb-watch-shard-eu"), ("Deployment", "karpweb-web"),
                     ("Deployment", "karpweb-worker"), ("Deployment", "karpweb-worker-shard-eu"),
                     ("Namespace", "karpweb"), ("NetworkPolicy", "karpweb-nothing-in"),
                     ("NetworkPolicy", "karpweb-web-from-ingress"), ("Role", "karpweb-cluster-kubeconfigs"),
                     ("RoleBinding", "karpweb-cluster-kubeconfigs"), ("Secret", "karpweb"),
                     ("Service", "karpweb"), ("ServiceAccount", "karpweb")]
    for document in objects:
        if document["kind"] == "Deployment":
            spec = document["spec"]["template"]["spec"]
            images = {c["image"] for c in [*spec.get("initContainers", []), *spec["containers"]]}
            assert images == {"registry.example.com/karpweb:0.1.0"}  # the kustomization's `images`
        elif document["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert document["metadata"]["namespace"] == "karpweb"


def test_the_api_server_accepts_every_object(rest, unique):
    namespace = f"karpweb-manifests-{unique}"
    objects = build(KUSTOMIZE, namespace=namespace, files={"secret.env": filled_secret_env()})
    (ns,) = [o for o in objects if o["kind"] == "Namespace"]
    assert ns["metadata"]["name"] == namespace
    namespaces = resource_for(rest, "v1", "Namespace")
    rest.create(namespaces, ns)  # for real: a namespaced dry run needs its namespace to exist
    refused, lost = [], {}
    try:
        for document in objects:
            if document is ns:
                continue
            resource = resource_for(rest, document["apiVersion"], document["kind"])
            name = f"{document['kind']} {document['metadata']['name']}"
            assert resource.namespaced == ("namespace" in document["metadata"]), name
            try:
                answer = rest.request("POST", resource.path(namespace=document["metadata"].get("namespace")),
                                      query={"dryRun": "All"}, body=document)
            except ApiException as exc:
                refused.append(f"{name}: {exc.status} {exc.body}")
                continue
            if missing := dropped(document, answer):
                lost[name] = missing
        assert refused == []
        assert lost == {}
        # Dry runs store nothing.
        deployments = resource_for(rest, "apps/v1", "Deployment")
        assert rest.list(deployments, namespace=namespace)["items"] == []
    finally:
        rest.delete(namespaces, namespace)


def test_a_field_the_server_does_not_know_is_caught(rest, unique):
    """The comparison above is what catches it: v1.20 answers 201 and leaves the field out."""
    objects = build(KUSTOMIZE, namespace="default", files={"secret.env": filled_secret_env()})
    (web,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "karpweb-web"]
    web["metadata"]["name"] = f"karpweb-web-{unique}"
    web["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["periodSecond"] = 10  # misspelt
    deployments = resource_for(rest, "apps/v1", "Deployment")
    answer = rest.request("POST", deployments.path(namespace="default"), query={"dryRun": "All"}, body=web)
    assert dropped(web, answer) == [".spec.template.spec.containers[0].readinessProbe.periodSecond"]
    web["spec"]["replicas"] = "two"  # a wrong type is refused outright
    with pytest.raises(ApiException) as refused:
        rest.request("POST", deployments.path(namespace="default"), query={"dryRun": "All"}, body=web)
    assert refused.value.status == 400


def test_the_docs_kubernetes_examples_are_accepted(rest, unique):
    """The Ingresses (and any other object) the walkthrough and the operations guide show."""
    namespace = f"karpweb-doc-examples-{unique}"
    namespaces = resource_for(rest, "v1", "Namespace")
    rest.create(namespaces, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    examples = []
    for guide in ("docs/getting-started-eks.md", "docs/operations.md"):
        for block in re.findall(r"^```yaml\n(.*?)^```", (ROOT / guide).read_text(), re.S | re.M):
            document = yaml.safe_load(block)
            if isinstance(document, dict) and "apiVersion" in document and "kind" in document:
                examples.append((guide, document))
    assert {(guide, d["kind"]) for guide, d in examples} >= {("docs/getting-started-eks.md", "Ingress"),
                                                            ("docs/operations.md", "Ingress")}
    try:
        for guide, document in examples:
            document["metadata"]["namespace"] = namespace
            resource = resource_for(rest, document["apiVersion"], document["kind"])
            answer = rest.request("POST", resource.path(namespace=namespace), query={"dryRun": "All"}, body=document)
            assert dropped(document, answer) == [], guide
    finally:
        rest.delete(namespaces, namespace)
