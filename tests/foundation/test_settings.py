"""Bad environment values stop start-up with a message that names the variable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_check(**env_overrides):
    env = {key: value for key, value in os.environ.items() if key not in env_overrides}
    env.update({key: value for key, value in env_overrides.items() if value is not None})
    env["DJANGO_SETTINGS_MODULE"] = "karpweb.settings"
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("DEBUG", "maybe", "DEBUG='maybe' is not a boolean"),
        ("DATABASE_URL", "mysql://root@localhost/karpweb", "DATABASE_URL"),
        ("REDIS_URL", "http://localhost:6379", "REDIS_URL"),
        ("TIME_ZONE", "Europe/Paris", "TIME_ZONE='Europe/Paris'"),
        ("KARPWEB_MODE", "yolo", "KARPWEB_MODE='yolo' must be one of: observe, control"),
        ("KARPWEB_PROVIDER", "gcp", "KARPWEB_PROVIDER"),
        ("KARPWEB_SAMPLE_RETENTION_DAYS", "ten", "KARPWEB_SAMPLE_RETENTION_DAYS='ten' is not an integer"),
        ("KARPWEB_HOURLY_RETENTION_DAYS", "1", "KARPWEB_HOURLY_RETENTION_DAYS"),
        ("KARPWEB_TASK_RUN_RETENTION_DAYS", "0", "KARPWEB_TASK_RUN_RETENTION_DAYS"),
        ("KARPWEB_DECISION_RETENTION_DAYS", "-5", "KARPWEB_DECISION_RETENTION_DAYS"),
        ("ALLOWED_HOSTS", "a.example.com,,b", "ALLOWED_HOSTS"),
        ("KARPWEB_EC2_ENDPOINT_URL", "localhost:5000", "KARPWEB_EC2_ENDPOINT_URL"),
    ],
)
def test_bad_value_names_the_variable(variable, value, expected):
    result = run_check(**{variable: value})
    assert result.returncode == 2
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_secret_key_required_when_debug_off():
    result = run_check(SECRET_KEY=None, DEBUG="false")
    assert result.returncode == 2
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr


def test_database_password_is_not_echoed():
    result = run_check(DATABASE_URL="mysql://root:hunter2@localhost/karpweb")
    assert result.returncode == 2
    assert "hunter2" not in result.stderr


def test_good_values_start():
    result = run_check(DEBUG="true", SECRET_KEY=None, ALLOWED_HOSTS="karpweb.example.com")
    assert result.returncode == 0, result.stderr
