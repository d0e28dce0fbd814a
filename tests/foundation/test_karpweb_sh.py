"""./karpweb.sh picks its interpreter by running it, quietly: a pyenv shim for a Python that is not
installed is found on PATH but prints "command not found" blocks when run."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

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
