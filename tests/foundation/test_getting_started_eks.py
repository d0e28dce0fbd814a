"""docs/getting-started-eks.md names only what exists: every variable is a setting karpweb reads (or
a name the walkthrough itself defines), every `manage.py` command line parses as that command's
own, and the settings it gives pass `manage.py check --deploy` with no warning."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml
from django.core.management import get_commands, load_command_class

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs/getting-started-eks.md"
POLICY_PLACEHOLDERS = {"AWS_PARTITION", "AWS_REGION", "AWS_ACCOUNT_ID", "CLUSTER_NAME", "NODE_ROLE_NAME",
                       "INTERRUPTION_QUEUE"}
NOT_SETTINGS = {
    "DJANGO_SUPERUSER_PASSWORD": "Django's createsuperuser --no-input reads it",
    "EC2_LINUX": "an EKS access entry type",
}


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", GUIDE.read_text(), re.S | re.M)


def settings_read() -> set[str]:
    """The environment variables karpweb/settings.py reads (its string literals in upper case)."""
    return set(re.findall(r'"([A-Z][A-Z0-9_]+)"', (ROOT / "karpweb/settings.py").read_text()))


def guide_settings() -> dict[str, str]:
    """The settings the walkthrough puts in config.yaml: the indented `NAME: value` lines of its
    YAML blocks that are not Kubernetes objects."""
    found = {}
    for block in blocks("yaml"):
        if re.search(r"^apiVersion:", block, re.M):
            continue
        found.update({k: str(v) for k, v in yaml.safe_load(block).items()})
    return found


def test_every_variable_the_guide_names_exists():
    text = GUIDE.read_text()
    names = set(re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b", text))
    defined_here = {name for block in blocks("sh") for name in re.findall(r"\b([A-Z][A-Z0-9_]+)=", block)}
    unknown = names - settings_read() - POLICY_PLACEHOLDERS - defined_here - set(NOT_SETTINGS)
    assert unknown == set()
    assert {name for name in names if name.startswith("KARPWEB_")} - settings_read() == set()
    assert set(guide_settings()) <= settings_read()
    assert POLICY_PLACEHOLDERS <= defined_here  # the walkthrough exports every placeholder the policies use


def test_every_manage_py_command_line_parses():
    commands = get_commands()
    lines = re.findall(r"manage\.py ([^\n`#]*)", GUIDE.read_text())
    assert len(lines) >= 5
    for line in lines:
        argv = shlex.split(line.replace("\\", " "))
        name, args = argv[0], argv[1:]
        assert name in commands, line
        parser = load_command_class(commands[name], name).create_parser("manage.py", name)
        parser.parse_args(args)  # CommandError on an option the command does not have


def test_the_shipped_config_alone_passes_the_deploy_checks():
    """config.yaml as shipped, with only the Secret's values: no warning (W008 was one)."""
    config = yaml.safe_load((ROOT / "deploy/kustomize/config.yaml").read_text())["data"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KARPWEB_", "DJANGO_ALLOW")) and k not in
           {"DEBUG", "DATABASE_URL", "REDIS_URL", "SECRET_KEY", "ALLOWED_HOSTS", "SECURE_SSL_REDIRECT"}}
    env.update(config)
    env.update(SECRET_KEY="s" * 30 + "-a-production-like-key-0123456789abcdef", KARPWEB_METRICS_TOKEN="m" * 32,
               DJANGO_SETTINGS_MODULE="karpweb.settings")
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_guides_settings_pass_the_deploy_checks():
    """config.yaml as shipped, with what the walkthrough adds (the ingress, sign-on), and a Secret."""
    config = yaml.safe_load((ROOT / "deploy/kustomize/config.yaml").read_text())["data"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KARPWEB_", "DJANGO_ALLOW")) and k not in
           {"DEBUG", "DATABASE_URL", "REDIS_URL", "SECRET_KEY", "ALLOWED_HOSTS"}}
    env.update(config)
    env.update(guide_settings())
    env.update(SECRET_KEY="s" * 30 + "-a-production-like-key-0123456789abcdef", KARPWEB_OIDC_CLIENT_SECRET="x" * 32,
               KARPWEB_METRICS_TOKEN="m" * 32, DJANGO_SETTINGS_MODULE="karpweb.settings")
    assert env["KARPWEB_MODE"] == "observe" and env["SECURE_SSL_REDIRECT"] == "true"
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
