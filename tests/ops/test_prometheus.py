"""karpweb's alert rules and metrics with Debian's promtool: the rules load, every alert fires and
stays quiet where it should (karpweb-rules.test.yaml), a weakened rule is caught, the Operator's
PrometheusRule holds the same groups, a scrape of a seeded karpweb is clean, and a real Prometheus
server scrapes it with the bearer token."""

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests
import yaml
from django.core.management import call_command
from django.utils import timezone

from scheduling.models import TaskRun
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy/prometheus/karpweb-rules.yaml"
RULE_TESTS = Path(__file__).with_name("karpweb-rules.test.yaml")


def promtool(*args, cwd=None, stdin=None):
    binary = shutil.which("promtool")
    if binary is None:
        pytest.fail("promtool is missing: apt-get install -y prometheus (.ci/run does this)")
    return subprocess.run([binary, *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=120)


def test_the_rules_load_and_every_alert_is_tested():
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    alerts = {rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]}
    tested = {case["alertname"] for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
              for case in test.get("alert_rule_test", [])}
    assert alerts == tested
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in {"critical", "warning"}
            assert {"summary", "description", "runbook_url"} <= set(rule["annotations"])
            anchor = rule["annotations"]["runbook_url"].split("#", 1)[1]
            assert f"### {rule['alert']}" in (ROOT / "docs/operations.md").read_text(), anchor


def test_every_alert_fires_and_stays_quiet_as_the_unit_tests_say():
    result = promtool("test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_weakened_rule_is_caught(tmp_path):
    weakened = RULES.read_text().replace("sum(karpweb_reservation_idle_cost_dollars_per_hour) > 50",
                                         "sum(karpweb_reservation_idle_cost_dollars_per_hour) > 500")
    assert weakened != RULES.read_text()
    (tmp_path / "deploy/prometheus").mkdir(parents=True)
    (tmp_path / "deploy/prometheus/karpweb-rules.yaml").write_text(weakened)
    (tmp_path / "tests/ops").mkdir(parents=True)
    shutil.copy(RULE_TESTS, tmp_path / "tests/ops")
    result = promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path / "tests/ops")
    assert result.returncode != 0 and "KarpwebIdlePrepaidCostHigh" in result.stdout + result.stderr


def test_the_operator_rule_is_the_same_rules():
    documents = [d for d in yaml.safe_load_all((ROOT / "deploy/prometheus/karpweb-prometheusrule.yaml").read_text()) if d]
    (rule,) = documents
    assert rule["kind"] == "PrometheusRule" and rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]


@pytest.mark.django_db
def test_a_scrape_of_a_seeded_karpweb_is_clean(client):
    call_command("seed_demo")
    TaskRun.objects.create(task="sync_ec2", status="succeeded", finished_at=timezone.now())
    scrape = client.get("/metrics").content.decode()
    assert "karpweb_reservation_used_instances{" in scrape and "karpweb_missed_reservation_dollars_total" in scrape
    linted = promtool("check", "metrics", stdin=scrape)
    assert linted.returncode == 0 and linted.stdout.strip() == "" and linted.stderr.strip() == "", linted.stdout + linted.stderr


def test_a_real_prometheus_scrapes_karpweb_with_the_bearer_token(transactional_db, live_server, settings, tmp_path):
    """Debian's Prometheus server, configured as docs/operations.md says, scrapes the live karpweb:
    with the token the target is up and the reservation series are queryable; without it, down."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is missing: apt-get install -y prometheus (.ci/run does this)")
    call_command("seed_demo")
    settings.KARPWEB_METRICS_TOKEN = token = "scrape-token-for-the-prometheus-test-0123456789"
    target = live_server.url.removeprefix("http://")
    (tmp_path / "token").write_text(token)
    config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s"}, "scrape_configs": [
        {"job_name": "karpweb", "metrics_path": "/metrics", "static_configs": [{"targets": [target]}],
         "authorization": {"type": "Bearer", "credentials_file": str(tmp_path / "token")}},
        {"job_name": "karpweb-without-token", "metrics_path": "/metrics", "static_configs": [{"targets": [target]}]},
    ]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    server = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
                               f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        health = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and set(health.values()) != {"up", "down"}:
            time.sleep(0.5)
            try:
                targets = requests.get(f"http://127.0.0.1:{port}/api/v1/targets", timeout=2).json()["data"]["activeTargets"]
            except (requests.ConnectionError, ValueError, KeyError):
                continue
            health = {t["labels"]["job"]: t["health"] for t in targets if t["health"] != "unknown"}
            errors = {t["labels"]["job"]: t["lastError"] for t in targets}
        assert health == {"karpweb": "up", "karpweb-without-token": "down"}, health
        assert "401" in errors["karpweb-without-token"]
        series = requests.get(f"http://127.0.0.1:{port}/api/v1/query", timeout=5,
                              params={"query": 'karpweb_reservation_total_instances{job="karpweb"}'}).json()["data"]["result"]
        assert series and all(s["metric"]["reservation_id"].startswith("cr-") for s in series)
    finally:
        server.terminate()
        server.wait(10)
