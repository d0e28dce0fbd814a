"""Bad environment values stop start-up with a message that names the variable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_check(*command, **env_overrides):
    env = {key: value for key, value in os.environ.items() if key not in env_overrides}
    env.update({key: value for key, value in env_overrides.items() if value is not None})
    env["DJANGO_SETTINGS_MODULE"] = "karpweb.settings"
    return subprocess.run(
        [sys.executable, *(command or ("manage.py", "check"))], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("DEBUG", "maybe", "DEBUG='maybe' is not a boolean"),
        ("DATABASE_URL", "mysql://root@localhost/karpweb", "DATABASE_URL"),
        ("REDIS_URL", "http://localhost:6379", "REDIS_URL"),
        ("TIME_ZONE", "Europe/Paris", "TIME_ZONE='Europe/Paris'"),
        ("KARPWEB_MODE", "yolo", "KARPWEB_MODE='yolo' must be one of: observe, control"),
        ("KARPWEB_KARPENTER", "maybe", "KARPWEB_KARPENTER='maybe' must be one of: auto, present, absent"),
        ("KARPWEB_PROVIDER", "gcp", "KARPWEB_PROVIDER"),
        ("KARPWEB_SAMPLE_RETENTION_DAYS", "ten", "KARPWEB_SAMPLE_RETENTION_DAYS='ten' is not an integer"),
        ("KARPWEB_HOURLY_RETENTION_DAYS", "1", "KARPWEB_HOURLY_RETENTION_DAYS"),
        ("KARPWEB_TASK_RUN_RETENTION_DAYS", "0", "KARPWEB_TASK_RUN_RETENTION_DAYS"),
        ("KARPWEB_DECISION_RETENTION_DAYS", "-5", "KARPWEB_DECISION_RETENTION_DAYS"),
        ("KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT", "-5", "KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT=-5 must be at least 0"),
        ("KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT", "$500", "KARPWEB_CAPACITY_BLOCK_SPEND_LIMIT='$500' is not an integer"),
        ("KARPWEB_CAPACITY_BLOCK_DRAIN_WARNING_HOURS", "0", "KARPWEB_CAPACITY_BLOCK_DRAIN_WARNING_HOURS"),
        ("KARPWEB_PAGE_REFRESH_SECONDS", "1", "KARPWEB_PAGE_REFRESH_SECONDS"),
        ("KARPWEB_LEND_IDLE_HOURS", "0", "KARPWEB_LEND_IDLE_HOURS"),
        ("KARPWEB_LEND_IDLE_HOURS", "a day", "KARPWEB_LEND_IDLE_HOURS='a day' is not an integer"),
        ("KARPWEB_LEND_MARGIN_INSTANCES", "-1", "KARPWEB_LEND_MARGIN_INSTANCES"),
        ("KARPWEB_TEAM_LABEL", "team name", "KARPWEB_TEAM_LABEL='team name' is not a Kubernetes label key"),
        ("KARPWEB_TEAM_LABEL", "Example.com/team", "KARPWEB_TEAM_LABEL='Example.com/team' is not a Kubernetes label key"),
        ("KARPWEB_TEAM_LABEL", "/team", "KARPWEB_TEAM_LABEL='/team' is not a Kubernetes label key"),
        ("KARPWEB_CAPACITY_BLOCK_DRAIN_WARNING_HOURS", "6h", "KARPWEB_CAPACITY_BLOCK_DRAIN_WARNING_HOURS='6h' is not an integer"),
        ("ALLOWED_HOSTS", "a.example.com,,b", "ALLOWED_HOSTS"),
        ("KARPWEB_EC2_ENDPOINT_URL", "localhost:5000", "KARPWEB_EC2_ENDPOINT_URL"),
        ("KARPWEB_VM_MEMORY_OVERHEAD_PERCENT", "7.5", "KARPWEB_VM_MEMORY_OVERHEAD_PERCENT=7.5 must be at least 0 and below 1"),
    ],
)
def test_bad_value_names_the_variable(variable, value, expected):
    result = run_check(**{variable: value})
    assert result.returncode == 2
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_secret_key_required_to_serve_pages_when_debug_off():
    result = run_check("manage.py", "runserver", "--noreload", SECRET_KEY=None, DEBUG="false")
    assert result.returncode == 2
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr
    wsgi = run_check("-c", "import karpweb.wsgi", SECRET_KEY=None, DEBUG="false")
    assert wsgi.returncode != 0 and "SECRET_KEY must be set when DEBUG is off" in wsgi.stderr


STRONG_KEY = "Zq8-vN3rTw_pL6yXc2bH9mKe4sJd7fGa1uRo5iWt0hYbV-nC8xEq_3zMl6kP"


WEAK_KEYS = [
    ("CHANGE-ME", "is a placeholder, not a secret"),
    ("django-insecure-" + STRONG_KEY, "is a placeholder, not a secret"),
    ("s3cr3t-but-short", "is 16 characters long; use at least 50"),
    ("abab" * 20, "has 2 distinct characters; use at least 5"),
]


@pytest.mark.parametrize(("key", "problem"), WEAK_KEYS)
def test_a_weak_secret_key_is_named_for_what_is_wrong_and_never_shown(key, problem):
    from karpweb.env import secret_key_problem

    assert secret_key_problem(key) == problem and key not in problem
    assert secret_key_problem(STRONG_KEY) == ""


def test_a_weak_secret_key_stops_the_web_and_the_workers():
    """The check above runs at the start of both processes (one weak key: each shape is tested in-process)."""
    key, problem = WEAK_KEYS[1]
    for command in (("-c", "import karpweb.wsgi"), ("-m", "celery", "-A", "karpweb", "worker", "--pool=solo")):
        result = run_check(*command, SECRET_KEY=key, DEBUG="false")
        assert result.returncode != 0 and f"SECRET_KEY {problem}" in result.stderr, (command, result.stderr[-500:])
        assert key not in result.stderr  # the message never shows the key
    # A strong key starts the web process: test_the_web_process_freezes_what_it_loaded_out_of_the_cyclic_collector
    # imports karpweb.wsgi with STRONG_KEY and DEBUG off (once, not once per weak key).
    # The manifests' placeholder never signs anything, but commands that serve no page still run.
    assert run_check("manage.py", "simulate", "examples/reserved-first.json", SECRET_KEY=key, DEBUG="false").returncode == 0


def test_rotation_keeps_old_keys_as_fallbacks_only_if_they_are_strong():
    old = STRONG_KEY[::-1]
    script = "from django.conf import settings as s; print(s.SECRET_KEY_FALLBACKS == [%r])" % old
    ok = run_check("-c", f"import django; django.setup(); {script}", SECRET_KEY=STRONG_KEY, SECRET_KEY_FALLBACKS=old,
                   DEBUG="false")
    assert ok.returncode == 0 and ok.stdout.strip() == "True", ok.stderr
    weak = run_check("-c", "import karpweb.wsgi", SECRET_KEY=STRONG_KEY, SECRET_KEY_FALLBACKS="CHANGE-ME", DEBUG="false")
    assert weak.returncode != 0 and "SECRET_KEY_FALLBACKS is a placeholder" in weak.stderr


def test_commands_that_serve_no_page_run_in_a_fresh_shell(tmp_path):
    """The `simulate` line (README, docs/simulate.md) in a shell with none of karpweb's variables set."""
    fresh = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "manage.py", "simulate", "examples/reserved-first.json"], cwd=ROOT,
                            env=fresh, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert '"nodeClaims"' in result.stdout
    assert "SECRET_KEY" not in result.stderr


def test_database_password_is_not_echoed():
    result = run_check(DATABASE_URL="mysql://root:hunter2@localhost/karpweb")
    assert result.returncode == 2
    assert "hunter2" not in result.stderr


def test_good_values_start():
    result = run_check(DEBUG="true", SECRET_KEY=None, ALLOWED_HOSTS="karpweb.example.com")
    assert result.returncode == 0, result.stderr


def test_commands_print_no_library_chatter():
    """A newcomer's first commands print what they are for, not libraries announcing themselves."""
    result = run_check("manage.py", "check")
    assert result.returncode == 0
    assert result.stderr.strip() == "" and result.stdout.strip() == "System check identified no issues (0 silenced)."


def test_the_web_process_freezes_what_it_loaded_out_of_the_cyclic_collector():
    """karpweb/wsgi.py loads the URLconf and its views, then gc.freeze(): a full collection in a
    request walks only that request's objects, not the 170,000 the worker loaded (60 to 120 ms)."""
    script = "import gc, sys, karpweb.wsgi; print(gc.get_freeze_count(), 'scheduling.views' in sys.modules)"
    result = run_check("-c", script, SECRET_KEY=STRONG_KEY, DEBUG="false")  # also: a strong key starts it
    frozen, views_loaded = result.stdout.split()
    assert result.returncode == 0 and int(frozen) > 50_000 and views_loaded == "True", result.stderr[-500:]
