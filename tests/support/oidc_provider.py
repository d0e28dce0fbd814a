"""The test identity provider: tests/support/oidc/provider.mjs (panva's oidc-provider, a certified
OpenID Connect implementation) in its own Node.js process. Its npm packages are installed on first
use (pinned in tests/support/oidc/package.json, git-ignored node_modules)."""

import fcntl
import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.support.ports import free_port

HERE = Path(__file__).resolve().parent / "oidc"
CLIENT_ID = "karpweb-console"
# A test-only value; the tests check it never reaches a log line.
CLIENT_SECRET = "test-client-secret-9f8e7d6c5b4a39281706"


@dataclass
class TestProvider:
    issuer: str
    accounts_file: Path
    process: subprocess.Popen

    def set_accounts(self, accounts: dict) -> None:
        """Read by the provider at every sign-in: a changed group shows at the next one."""
        self.accounts_file.write_text(json.dumps(accounts))


def install() -> None:
    # Under a lock: two pytest-xdist workers must not run `npm ci` into one node_modules at once.
    with open(HERE / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (HERE / "node_modules" / "oidc-provider").exists():
            return
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("the sign-in tests need Node.js and npm (Debian: apt-get install nodejs npm)")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True)


def start(redirect_uri: str, accounts: dict, workdir: Path) -> TestProvider:
    install()
    port = free_port()
    accounts_file = workdir / "idp-accounts.json"
    accounts_file.write_text(json.dumps(accounts))
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "ISSUER_PORT": str(port), "CLIENT_ID": CLIENT_ID,
           "CLIENT_SECRET": CLIENT_SECRET, "REDIRECT_URI": redirect_uri, "ACCOUNTS_FILE": str(accounts_file)}
    log = open(workdir / "idp.log", "w")
    process = subprocess.Popen([shutil.which("node") or "node", str(HERE / "provider.mjs")], cwd=HERE, env=env,
                               stdout=log, stderr=subprocess.STDOUT)
    issuer = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the test identity provider exited: {(workdir / 'idp.log').read_text()}")
        try:
            if requests.get(f"{issuer}/.well-known/openid-configuration", timeout=1).ok:
                return TestProvider(issuer, accounts_file, process)
        except requests.ConnectionError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("the test identity provider did not answer within 30 s")
