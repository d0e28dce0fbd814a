"""A throwaway redis-server for one test: its own port and directory, started, killed and started
again on the same port by the test (never the shared Redis other test runs use)."""

import subprocess
import time
from pathlib import Path

import redis

from tests.support.ports import free_port


class ThrowawayRedis:
    def __init__(self, directory: Path):
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.directory), "--logfile", str(self.directory / f"redis-{self.starts}.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.starts += 1
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if client.ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not start; see {self.directory}")

    def kill(self) -> None:
        """SIGKILL: a crash, not a shutdown; everything in it is gone (no persistence)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def restart(self) -> None:
        self.kill()
        self.start()
