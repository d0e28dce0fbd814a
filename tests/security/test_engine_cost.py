"""The engine endpoints' cost limit (karpweb/costlimit.py): per user, simulations at once and engine
seconds per minute, counted in the shared cache. One user looping on simulate is refused (429 with
Retry-After) while other users' simulations and reads go on."""

import datetime
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import time_machine
from django.test import Client

from karpweb.costlimit import EngineBusy, engine_run
from scheduling.bench import diverse_pods, world
from tests.support.api_clients import token_client

ROOT = Path(__file__).resolve().parents[2]
SMALL_WORLD = json.dumps(world(diverse_pods(20)))


@pytest.fixture
def one_run_each(settings):
    settings.KARPWEB_ENGINE_RUNS_PER_USER = 1
    settings.KARPWEB_ENGINE_SECONDS_PER_MINUTE = 30
    settings.KARPWEB_API_RATE = "10000/min"
    return settings


def simulate(client):
    return client.post("/api/v1/simulate/", SMALL_WORLD, content_type="application/json")


@pytest.mark.django_db
def test_a_second_simulation_of_one_user_waits_for_the_first(one_run_each, viewer, operator):
    mine, theirs = token_client(viewer), token_client(operator)
    with engine_run(viewer):  # the user's first simulation, still running
        refused = simulate(mine)
        assert refused.status_code == 429
        assert int(refused["Retry-After"]) >= 1 and "at most 1 simulation" in refused.json()["detail"]
        assert simulate(theirs).status_code == 200  # another user is not affected
        assert mine.get("/api/v1/nodepools/").status_code == 200  # nor the user's reads
    assert simulate(mine).status_code == 200  # and the slot is given back


@pytest.mark.django_db
def test_engine_seconds_per_minute_are_a_budget(one_run_each, viewer, operator):
    one_run_each.KARPWEB_ENGINE_SECONDS_PER_MINUTE = 1
    mine, theirs = token_client(viewer), token_client(operator)
    with time_machine.travel(datetime.datetime(2026, 11, 26, 10, 0, 5, tzinfo=datetime.UTC), tick=True):
        with engine_run(viewer):
            time.sleep(1.05)  # a long simulation: the minute's budget is spent
        refused = simulate(mine)
        assert refused.status_code == 429 and "budget" in refused.json()["detail"]
        assert 1 <= int(refused["Retry-After"]) <= 55
        assert simulate(theirs).status_code == 200
    with time_machine.travel(datetime.datetime(2026, 11, 26, 10, 1, 1, tzinfo=datetime.UTC)):
        assert simulate(mine).status_code == 200  # a new minute, a new budget


@pytest.mark.django_db
def test_the_what_if_pages_are_limited_too(one_run_each, viewer_client, viewer):
    from tests.factories.reservations import CapacityReservationFactory

    CapacityReservationFactory(reservation_id="cr-0000000000000000a")  # the form picks reservations karpweb knows
    with engine_run(viewer):
        page = viewer_client.post("/what-if/", {"world": SMALL_WORLD})
        assert page.status_code == 429 and "engine busy" in page.content.decode()
        edit = viewer_client.post("/what-if/edit/", {"count_id": "cr-0000000000000000a", "count": "1"})
        assert edit.status_code == 429 and "engine busy" in edit.content.decode()
    assert viewer_client.post("/what-if/", {"world": SMALL_WORLD}).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_concurrent_simulations_of_one_user_are_limited_while_another_reads(one_run_each, viewer, operator):
    """Four simulate loops from one viewer, started together, in threads of this process (as a web
    worker's threads would run them); the operator reads the node pools meanwhile."""
    big_world = json.dumps(world(diverse_pods(600)))
    viewer_auth = token_client(viewer)._credentials["HTTP_AUTHORIZATION"]
    reader = token_client(operator)
    start = threading.Barrier(5)
    codes: list[int] = []

    def loop():
        client = Client(HTTP_AUTHORIZATION=viewer_auth)
        start.wait()
        for _ in range(2):
            codes.append(client.post("/api/v1/simulate/", big_world, content_type="application/json").status_code)

    threads = [threading.Thread(target=loop) for _ in range(4)]
    for thread in threads:
        thread.start()
    start.wait()
    read_seconds = []
    while any(thread.is_alive() for thread in threads):
        began = time.monotonic()
        assert reader.get("/api/v1/nodepools/").status_code == 200
        read_seconds.append(time.monotonic() - began)
    for thread in threads:
        thread.join()
    assert sorted(set(codes)) == [200, 429], codes
    assert codes.count(200) < len(codes)
    assert read_seconds and max(read_seconds) < 5, read_seconds


def test_the_limit_is_shared_across_processes_through_redis(settings):
    """A simulation running in another process (another web worker or replica) holds the slot."""
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url}}
    settings.KARPWEB_ENGINE_RUNS_PER_USER = 1
    user = SimpleNamespace(pk=f"test-{uuid.uuid4().hex}")  # a key no other test uses
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import django, sys, time; django.setup()\n"
            "from types import SimpleNamespace\n"
            "from karpweb.costlimit import engine_run\n"
            f"with engine_run(SimpleNamespace(pk={user.pk!r})):\n"
            "    print('holding', flush=True); sys.stdin.readline()\n")],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "karpweb.settings", "DEBUG": "true", "KARPWEB_CACHE_URL": redis_url,
             "KARPWEB_ENGINE_RUNS_PER_USER": "1"})
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(EngineBusy):
            with engine_run(user):
                pass
    finally:
        holder.communicate("done\n", timeout=60)
    with engine_run(user):  # released by the other process
        pass
