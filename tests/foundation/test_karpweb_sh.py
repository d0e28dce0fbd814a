"""./karpweb.sh picks its interpreter by running it, quietly: a pyenv shim for a Python that is not
installed is found on PATH but prints "command not found" blocks when run."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BROKEN_SHIM = """#!/bin/sh
echo "pyenv: $(basename "$0"): command not found" >&2
echo "The \\`$(basename "$0")' command exists in these Python versions:" >&2
exit 127
"""


def test_a_broken_shim_is_skipped_without_a_word(tmp_path):
    for name in ("python3.13", "python3.12"):
        shim = tmp_path / name
        shim.write_text(BROKEN_SHIM)
        shim.chmod(0o755)
    # The test's own interpreter stands in as python3.11, after the broken shims on PATH.
    real = tmp_path / "real"
    real.mkdir()
    (real / "python3.11").symlink_to(sys.executable)
    env = {**os.environ, "PATH": f"{tmp_path}:{real}:/usr/bin:/bin"}
    result = subprocess.run([str(ROOT / "karpweb.sh"), "python"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "command not found" not in result.stdout and "python3.13" not in result.stdout
    assert result.stdout.startswith(str(real / "python3.11")) and "Python 3." in result.stdout


def test_no_usable_python_is_one_clear_line(tmp_path):
    shim = tmp_path / "python3"
    shim.write_text(BROKEN_SHIM)
    shim.chmod(0o755)
    tools = tmp_path / "tools"  # what the script needs besides Python, and no Python at all
    tools.mkdir()
    (tools / "dirname").symlink_to(shutil.which("dirname"))
    env = {**os.environ, "PATH": f"{tmp_path}:{tools}"}
    result = subprocess.run(["/bin/bash", str(ROOT / "karpweb.sh"), "python"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert result.stderr.strip() == "karpweb needs Python 3.11 or newer"


SUPERVISE = ROOT / "scripts" / "supervise.sh"


def wait_for(condition, seconds=30):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_the_worker_is_restarted_and_each_exit_recorded(tmp_path):
    # ./karpweb.sh run's supervision of the Celery worker, with a worker that dies as the file-system
    # broker's did: a line of output, then its error, then exit code 3.
    log, record, runs = tmp_path / "celery.log", tmp_path / "celery-restarts.log", tmp_path / "runs"
    worker = f'echo started >>{runs}; echo "worker up"; echo "Unrecoverable error: JSONDecodeError(x)" >&2; echo; exit 3'
    supervisor = subprocess.Popen([str(SUPERVISE), str(log), str(record), "--", "bash", "-c", worker],
                                  env={**os.environ, "KARPWEB_RESTART_BACKOFF_MAX": "1"}, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: record.exists() and len(record.read_text().splitlines()) >= 3)
    finally:
        supervisor.terminate()
    assert supervisor.wait(timeout=30) == 0, supervisor.stderr.read()
    lines = [line.split("\t") for line in record.read_text().splitlines()]
    assert len(runs.read_text().splitlines()) in (len(lines), len(lines) + 1)  # restarted after each exit
    for exited, code, restart_at, last in lines:
        assert code == "3" and last == "Unrecoverable error: JSONDecodeError(x)"  # this run's last non-blank line
        assert len(exited) == len(restart_at) == len("2026-11-28T06:58:10Z") and restart_at >= exited
    assert log.read_text().count("worker up") >= 3
    assert "exited with code 3; restarting in 1 s" in log.read_text()


def gone(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    try:
        return "zombie" in status.read_text()
    except FileNotFoundError:
        return True


def end(pids_file: Path):
    """Kills what a failed test would otherwise leave running."""
    for pid in map(int, pids_file.read_text().split() if pids_file.exists() else ()):
        if not gone(pid):
            os.kill(pid, 9)


def test_what_a_dead_worker_left_behind_is_ended_before_the_restart(tmp_path):
    # `celery worker --beat` forks beat; killed, the worker leaves it running, and a second beat would
    # start with the restart. The stand-in leaves a child behind and exits.
    leftovers = tmp_path / "leftovers"
    worker = f"sleep 300 & echo $! >>{leftovers}; exit 1"
    supervisor = subprocess.Popen([str(SUPERVISE), str(tmp_path / "log"), str(tmp_path / "record"), "--",
                                   "bash", "-c", worker], env={**os.environ, "KARPWEB_RESTART_BACKOFF_MAX": "1"})
    try:
        wait_for(lambda: leftovers.exists() and len(leftovers.read_text().split()) >= 2)
        first = int(leftovers.read_text().split()[0])
        wait_for(lambda: gone(first), 10)
        supervisor.terminate()
        assert supervisor.wait(timeout=30) == 0
        for pid in map(int, leftovers.read_text().split()):
            wait_for(lambda: gone(pid), 10)
    finally:
        supervisor.kill()
        end(leftovers)


def test_stopping_the_supervisor_stops_the_worker_and_its_children(tmp_path):
    pids = tmp_path / "pids"
    supervisor = subprocess.Popen([str(SUPERVISE), str(tmp_path / "log"), str(tmp_path / "record"), "--",
                                   "bash", "-c", f"sleep 300 & echo $$ $! >{pids}; wait"])
    try:
        wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2)
        worker, child = map(int, pids.read_text().split())
        supervisor.terminate()  # what ./karpweb.sh run's trap sends on Ctrl-C
        assert supervisor.wait(timeout=30) == 0
        wait_for(lambda: gone(worker) and gone(child), 10)
    finally:
        supervisor.kill()
        end(pids)
    assert not (tmp_path / "record").exists()  # stopped, not an exit to restart after


@pytest.mark.parametrize(("arguments", "env", "expected"), [
    (["log", "record", "true"], {}, "usage: scripts/supervise.sh LOG RECORD -- COMMAND [ARG...]"),
    (["log", "record", "--", "true"], {"KARPWEB_RESTART_BACKOFF_MAX": "1m"},
     "KARPWEB_RESTART_BACKOFF_MAX='1m' is not a whole number of seconds"),
])
def test_bad_supervisor_arguments_are_one_clear_line(tmp_path, arguments, env, expected):
    result = subprocess.run([str(SUPERVISE), *arguments], cwd=tmp_path, env={**os.environ, **env},
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 64
    assert result.stderr.strip() == expected
    assert not (tmp_path / "record").exists()
