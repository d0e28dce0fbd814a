"""`kustomize build` for deploy/kustomize, in Python, for the tests: only the features that
kustomization.yaml uses, each as kustomize (v5) does it. Anything else in a kustomization (another
field, a generator option, a directory or URL as a resource) raises NotImplementedError naming it,
so a kustomization that outgrows this fails the test that renders it instead of being half-built.

Why not kustomize itself: the test machines need not have `kubectl` or `kustomize`, and the test
that applies the manifests (tests/kube/test_manifests.py) must run wherever the suite runs.

Supported: `resources` (files), `namespace`, `images` (`name`, `newName`, `newTag`, `digest`),
`secretGenerator` and `configMapGenerator` with `envs` and `literals`, `generatorOptions`
with `disableNameSuffixHash: true` (the hash suffix is not implemented).
"""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

FIELDS = {"apiVersion", "kind", "namespace", "resources", "images", "secretGenerator", "configMapGenerator",
          "generatorOptions"}
GENERATOR_FIELDS = {"name", "envs", "literals", "type"}
# Kinds without a namespace, of those a kustomization here may hold (kustomize knows them all).
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "PriorityClass",
                  "StorageClass", "PersistentVolume", "ValidatingWebhookConfiguration",
                  "MutatingWebhookConfiguration", "APIService", "IngressClass"}
# Where pod templates keep their containers, per workload kind.
POD_SPEC = {"Deployment": ("spec", "template", "spec"), "StatefulSet": ("spec", "template", "spec"),
            "DaemonSet": ("spec", "template", "spec"), "Job": ("spec", "template", "spec"),
            "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"), "Pod": ("spec",)}


def build(directory: Path, *, namespace: str | None = None, files: dict[str, str] | None = None) -> list[dict]:
    """The objects `kustomize build directory` prints. `namespace` replaces the kustomization's;
    `files` gives the content of files by their name in the kustomization (e.g. the git-ignored
    `secret.env`) instead of reading them from disk."""
    files = files or {}

    def read(name: str) -> str:
        return files[name] if name in files else (directory / name).read_text()

    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    if unknown := set(kustomization) - FIELDS:
        raise NotImplementedError(f"kustomization.yaml: {sorted(unknown)} (tests/support/kustomize.py does not build these)")
    options = kustomization.get("generatorOptions") or {}
    if options != {"disableNameSuffixHash": True} and options:
        raise NotImplementedError(f"generatorOptions {options}: only disableNameSuffixHash: true is built")
    if not options.get("disableNameSuffixHash") and (kustomization.get("secretGenerator")
                                                     or kustomization.get("configMapGenerator")):
        raise NotImplementedError("generated names with a hash suffix")

    objects: list[dict] = []
    for resource in kustomization.get("resources") or []:
        path = directory / resource
        if not path.is_file():
            raise NotImplementedError(f"resource {resource!r}: only files are built")
        objects += [document for document in yaml.safe_load_all(read(resource)) if document]
    for kind, field in (("ConfigMap", "configMapGenerator"), ("Secret", "secretGenerator")):
        for generator in kustomization.get(field) or []:
            objects.append(generated(kind, generator, read))

    namespace = namespace or kustomization.get("namespace")
    for document in objects:
        if namespace:
            set_namespace(document, namespace)
        for image in kustomization.get("images") or []:
            set_image(document, image)
    return objects


def env_pairs(text: str) -> list[tuple[str, str]]:
    """kustomize's env file: KEY=VALUE per line, the value as written; blank lines and # comments skipped."""
    pairs = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key:
            raise ValueError(f"line {number}: {line!r} is not KEY=VALUE")
        pairs.append((key, value))
    return pairs


def generated(kind: str, generator: dict, read) -> dict:
    if unknown := set(generator) - GENERATOR_FIELDS:
        raise NotImplementedError(f"{kind} generator fields {sorted(unknown)}")
    pairs = [pair for name in generator.get("envs") or [] for pair in env_pairs(read(name))]
    pairs += [tuple(literal.split("=", 1)) for literal in generator.get("literals") or []]
    values = dict(pairs)
    document = {"apiVersion": "v1", "kind": kind, "metadata": {"name": generator["name"]}}
    if kind == "Secret":
        document["type"] = generator.get("type", "Opaque")
        document["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}
    else:
        document["data"] = values
    return document


def set_namespace(document: dict, namespace: str) -> None:
    """kustomize's namespace transformer: namespaced objects get it, a Namespace object is renamed to
    it, and the ServiceAccount subjects of (Cluster)RoleBindings without a namespace or in `default`
    get it (v5's `setRoleBindingSubjects: defaultOnly`); a subject naming another namespace keeps it."""
    metadata = document.setdefault("metadata", {})
    kind = document.get("kind")
    if kind == "Namespace":
        metadata["name"] = namespace
    elif kind not in CLUSTER_SCOPED:
        metadata["namespace"] = namespace
    if kind in ("RoleBinding", "ClusterRoleBinding"):
        for subject in document.get("subjects") or []:
            if subject.get("kind") == "ServiceAccount" and subject.get("namespace") in (None, "", "default"):
                subject["namespace"] = namespace


def set_image(document: dict, image: dict) -> None:
    path = POD_SPEC.get(document.get("kind"))
    if path is None:
        return
    spec = document
    for key in path:
        spec = spec.get(key) or {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        current = container.get("image", "")
        name = current.split("@", 1)[0]
        name = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
        if name != image["name"]:
            continue
        new = image.get("newName", name)
        if image.get("digest"):
            container["image"] = f"{new}@{image['digest']}"
        elif image.get("newTag"):
            container["image"] = f"{new}:{image['newTag']}"
        else:
            container["image"] = new + current[len(name):]
