"""The quick start's Celery broker (no REDIS_URL): kombu's SQLAlchemy transport on a SQLite file
under var/. The file-system transport it replaces let a consumer read a message while the producer
was still writing it, and the worker died on the JSONDecodeError; here a writer process and a reader
race through a real broker file."""

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from queue import Empty

from django.conf import settings
from kombu import Connection

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = 2000

WRITER = """
import json, sys
from kombu import Connection
url, options, count = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
with Connection(url, transport_options=options) as connection:
    queue = connection.SimpleQueue("race")
    for n in range(count):
        # A payload of some size, so that a half-written message could be read if the transport allowed it.
        queue.put({"n": n, "padding": "x" * 2000}, serializer="json")
    queue.close()
"""


def test_settings_name_the_sqlite_broker_under_var_by_an_absolute_path(tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in ("REDIS_URL", "KARPWEB_VAR_DIR")}
    show = "from django.conf import settings as s; print(s.CELERY_BROKER_URL); print(s.CELERY_BROKER_TRANSPORT_OPTIONS)"
    # From another directory: the broker file stays under the project's var/, not the cwd's.
    embedded = subprocess.run([sys.executable, str(ROOT / "manage.py"), "shell", "-v", "0", "-c", show], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=120)
    assert embedded.returncode == 0, embedded.stderr
    assert embedded.stdout.splitlines() == [f"sqla+sqlite:///{ROOT / 'var' / 'celery-broker.sqlite3'}",
                                            "{'connect_args': {'timeout': 30}}"]
    # Production's broker is unchanged: Redis, with no transport options.
    redis = subprocess.run([sys.executable, str(ROOT / "manage.py"), "shell", "-v", "0", "-c", show], cwd=tmp_path,
                           env={**env, "REDIS_URL": "redis://127.0.0.1:6379/7"}, capture_output=True, text=True,
                           timeout=120)
    assert redis.returncode == 0, redis.stderr
    assert redis.stdout.splitlines() == ["redis://127.0.0.1:6379/7", "{}"]


def test_2000_messages_race_through_once_each(tmp_path):
    # The broker settings make without REDIS_URL (checked above), on a file of the test's own.
    url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    options = settings.EMBEDDED_BROKER_TRANSPORT_OPTIONS
    received = []
    while_writing = 0  # messages taken before the writer had finished: the race was run
    with Connection(url, transport_options=options) as connection:
        queue = connection.SimpleQueue("race")  # declared (tables made) before the writer starts
        writer = subprocess.Popen([sys.executable, "-c", WRITER, url, json.dumps(options), str(MESSAGES)],
                                  stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 240
            # The reader takes each message as soon as it is there, while the writer is still writing.
            while len(received) < MESSAGES and time.monotonic() < deadline:
                try:
                    message = queue.get(timeout=0.5)
                except Empty:
                    assert writer.poll() in (None, 0), writer.stderr.read()
                    continue
                received.append(message.payload["n"])
                while_writing += writer.poll() is None
                assert message.payload["padding"] == "x" * 2000
                message.ack()
            assert writer.wait(timeout=60) == 0, writer.stderr.read()
        finally:
            if writer.poll() is None:
                writer.kill()
                writer.wait()
        assert sorted(received) == list(range(MESSAGES)), f"{len(received)} received, {len(set(received))} distinct"
        assert received == sorted(received)  # and in the order they were sent
        try:  # nothing left over to be delivered twice
            extra = queue.get(timeout=1)
        except Empty:
            extra = None
        assert extra is None, extra.payload
        queue.close()
    assert while_writing > MESSAGES // 10, while_writing


def test_delivered_messages_older_than_an_hour_are_pruned(tmp_path, settings):
    """kombu's SQLAlchemy transport keeps every delivered message: the EC2 step deletes those older than
    an hour and never one still waiting to be read."""
    import datetime

    from scheduling.loop import broker

    path = tmp_path / "broker.sqlite3"
    settings.REDIS_URL, settings.CELERY_BROKER_FILE = None, path
    assert broker.prune_delivered() == {}  # no file yet: nothing sent
    with Connection(f"sqla+sqlite:///{path}", transport_options=settings.EMBEDDED_BROKER_TRANSPORT_OPTIONS) as connection:
        queue = connection.SimpleQueue("loop")
        for n in range(5):
            queue.put({"n": n}, serializer="json")
        for _ in range(3):
            queue.get(timeout=5).ack()
        queue.close()
    assert broker.prune_delivered() == {"broker_messages_pruned": 0}  # delivered just now: kept an hour
    two_hours_ago = (datetime.datetime.now() - datetime.timedelta(hours=2)).strftime("%Y-%m-%d %H:%M:%S.%f")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE kombu_message SET timestamp = ?", (two_hours_ago,))
    assert broker.prune_delivered() == {"broker_messages_pruned": 3}
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM kombu_message WHERE visible = 1").fetchone() == (2,)  # still to read
        assert db.execute("SELECT count(*) FROM kombu_message").fetchone() == (2,)
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    assert broker.prune_delivered() == {}  # a real broker keeps its own house


def test_the_queue_rows_are_made_before_the_worker_and_beat_race_for_them(tmp_path, settings, db):
    """karpweb.sh run declares the queues first: a second declaration (the worker's, beat's) finds the row."""
    from scheduling.loop import broker

    path = tmp_path / "broker.sqlite3"
    settings.REDIS_URL, settings.CELERY_BROKER_FILE = None, path
    settings.CELERY_BROKER_URL = f"sqla+sqlite:///{path}"
    assert broker.declare_queues() == ["celery"]
    assert broker.declare_queues() == ["celery"]
    with sqlite3.connect(path) as rows:
        assert rows.execute("SELECT name FROM kombu_queue").fetchall() == [("celery",)]
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    assert broker.declare_queues() == []
