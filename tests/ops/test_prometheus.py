"""karpweb's alert rules and metrics with Debian's promtool: the rules load, every alert fires and
stays quiet where it should (karpweb-rules.test.yaml), a weakened rule is caught, the Operator's
PrometheusRule holds the same groups, and a scrape of a seeded karpweb is clean."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.utils import timezone

from scheduling.models import TaskRun

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
