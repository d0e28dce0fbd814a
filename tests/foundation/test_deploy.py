"""The deployment files agree with the code, and production settings pass Django's deploy checks."""

import os
import subprocess
import sys
from pathlib import Path

import yaml

from scheduling.adapters.kube.rbac import RULES

ROOT = Path(__file__).resolve().parents[2]


def test_kustomize_cluster_role_is_the_adapters_rules():
    documents = list(yaml.safe_load_all((ROOT / "deploy/kustomize/rbac.yaml").read_text()))
    role = next(d for d in documents if d["kind"] == "ClusterRole")
    assert role["rules"] == RULES


def test_kustomization_lists_every_manifest():
    kustomization = yaml.safe_load((ROOT / "deploy/kustomize/kustomization.yaml").read_text())
    manifests = {p.name for p in (ROOT / "deploy/kustomize").glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == manifests
    for name in ("web.yaml", "worker.yaml", "beat.yaml", "watch.yaml"):
        for document in yaml.safe_load_all((ROOT / "deploy/kustomize" / name).read_text()):
            if document["kind"] == "Deployment":
                assert document["spec"]["template"]["spec"]["serviceAccountName"] == "karpweb"


def test_production_settings_pass_the_deploy_checks():
    env = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "DATABASE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"}}
    env.update(SECRET_KEY="x" * 64 + "-production-like-secret-key-0123456789", ALLOWED_HOSTS="karpweb.example.com",
               SECURE_SSL_REDIRECT="true", DJANGO_SETTINGS_MODULE="karpweb.settings")
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_healthz(client, db):
    assert client.get("/healthz").json() == {"status": "ok"}


def test_healthz_answers_a_load_balancers_health_check(client, db):
    """An ALB's health check (and a probe without a Host header) names the pod by its address, which
    ALLOWED_HOSTS does not list: /healthz answers it; every other path still refuses that host."""
    assert client.get("/healthz", HTTP_HOST="10.0.12.34:8000").json() == {"status": "ok"}
    assert client.head("/healthz", HTTP_HOST="10.0.12.34:8000").status_code == 200
    assert client.get("/login/", HTTP_HOST="10.0.12.34:8000").status_code == 400
    assert client.post("/healthz", HTTP_HOST="10.0.12.34:8000").status_code == 400


def test_healthz_is_not_redirected_to_https(db, settings):
    """Probes and health checks speak plain HTTP to the pod, also with SECURE_SSL_REDIRECT on."""
    from django.test import Client

    settings.SECURE_SSL_REDIRECT = True  # read when the middleware is built: a fresh client below
    client = Client()
    assert client.get("/healthz", HTTP_HOST="10.0.12.34:8000").status_code == 200
    assert client.get("/login/").status_code == 301  # every other page is


def test_the_web_probes_need_no_host_header():
    """So that changing ALLOWED_HOSTS cannot make every web pod unready."""
    (web, _service) = yaml.safe_load_all((ROOT / "deploy/kustomize/web.yaml").read_text())
    for container in web["spec"]["template"]["spec"]["containers"]:
        for probe in ("readinessProbe", "livenessProbe"):
            assert container[probe]["httpGet"]["path"] == "/healthz"
            assert "httpHeaders" not in container[probe]["httpGet"]


def test_the_manifests_ship_no_secret_value():
    """The Secret comes from a file the operator writes (secretGenerator); nothing in the manifests
    holds a value, and the example file holds none either."""
    kustomization = yaml.safe_load((ROOT / "deploy/kustomize/kustomization.yaml").read_text())
    assert kustomization["secretGenerator"] == [{"name": "karpweb", "envs": ["secret.env"]}]
    assert kustomization["generatorOptions"] == {"disableNameSuffixHash": True}  # the Deployments name "karpweb"
    for path in (ROOT / "deploy/kustomize").glob("*.yaml"):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind") == "Secret":
                raise AssertionError(f"{path.name} ships a Secret")
    example = (ROOT / "deploy/kustomize/secret.env.example").read_text().splitlines()
    values = [line.split("=", 1)[1] for line in example if line and not line.startswith("#")]
    assert values and all(value == "" for value in values)
    assert "/deploy/kustomize/secret.env" in (ROOT / ".gitignore").read_text().splitlines()
