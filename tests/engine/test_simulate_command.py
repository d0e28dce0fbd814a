"""`python manage.py simulate`: a thin shell around the engine (no database needed)."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from .builders import instance_type, node_class, pod, reservation, world

ROOT = Path(__file__).resolve().parents[2]


def good_world():
    return world(instance_types=[instance_type("m5.large", "2", "8Gi", od=0.096)],
                 reservations=[reservation("cr-0abc", "m5.large", tags={"team": "ml"}, available=1)],
                 node_classes=[node_class("default", [{"tags": {"team": "ml"}}])],
                 pods=[pod("a", "1500m", "1Gi"), pod("b", "1500m", "1Gi")])


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("simulate", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exit:
        code = exit.code
    return code, out.getvalue(), err.getvalue()


def test_valid_world_prints_decisions(tmp_path):
    path = tmp_path / "world.json"
    path.write_text(json.dumps(good_world()))
    code, out, err = run(str(path))
    assert code == 0 and err == ""
    decisions = json.loads(out)
    assert sorted(decisions) == ["bindings", "deferred", "demotions", "disruptions", "nodeClaims", "nodeClasses",
                                 "nodePools", "unschedulable"]
    assert sorted(c["launch"]["capacityType"] for c in decisions["nodeClaims"]) == ["on-demand", "reserved"]


def test_out_writes_a_file(tmp_path):
    path, out_path = tmp_path / "world.json", tmp_path / "decisions.json"
    path.write_text(json.dumps(good_world()))
    code, out, _ = run(str(path), "--out", str(out_path))
    assert code == 0 and out == ""
    assert len(json.loads(out_path.read_text())["nodeClaims"]) == 2


def test_bad_input_exits_2_with_one_line_per_problem(tmp_path):
    doc = good_world()
    doc["pods"][1]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "abc"
    doc["nodes"] = 3
    path = tmp_path / "world.json"
    path.write_text(json.dumps(doc))
    code, out, err = run(str(path))
    assert code == 2 and out == ""
    assert err.splitlines() == ["nodes: expected a list",
                                'pods[1].spec.containers[0].resources.requests.cpu: "abc" is not a quantity']


@pytest.mark.parametrize("content, message", [
    ("{", "invalid JSON: Expecting property name enclosed in double quotes (line 1, column 2)"),
    ("[]", None),
])
def test_invalid_json_exits_2(tmp_path, content, message):
    path = tmp_path / "world.json"
    path.write_text(content)
    code, _, err = run(str(path))
    assert code == 2
    assert err.strip() == (f"{path}: {message}" if message else "world: expected a JSON object")


def test_unreadable_file_exits_2(tmp_path):
    code, _, err = run(str(tmp_path / "missing.json"))
    assert code == 2 and err.strip() == f"{tmp_path / 'missing.json'}: cannot read: No such file or directory"
    code, _, err = run(str(tmp_path))
    assert code == 2 and "cannot read" in err


def test_real_process_exit_status_and_no_traceback(tmp_path):
    path = tmp_path / "world.json"
    path.write_text('{"pods": [{"metadata": {"name": "x"}, "spec": {"containers": [{"resources": {"requests": {"cpu": "abc"}}}]}}]}')
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "karpweb.settings"}
    result = subprocess.run([sys.executable, "manage.py", "simulate", str(path)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == 'pods[0].spec.containers[0].resources.requests.cpu: "abc" is not a quantity'
    assert "Traceback" not in result.stderr and result.stdout == ""
