import gc
import os
from pathlib import Path

import hypothesis
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from tests.support import properties  # registers the "ci" Hypothesis profile before Hypothesis loads it

# Without DATABASE_URL the test databases are SQLite files under var/ (one per test process).
Path(settings.VAR_DIR).mkdir(exist_ok=True)

# The record of a `./karpweb.sh run` in this checkout (var/celery-restarts.log) is not the tests':
# the loop-health tests that read one give their own (tests/loop/test_health.py).
settings.KARPWEB_WORKER_RESTARTS = None

# Tests run with DEBUG off (as production does) but without collectstatic's manifest.
settings.STORAGES = {
    **settings.STORAGES,
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}


# WhiteNoise finds static files as they are asked for rather than indexing all of staticfiles/ (931
# files, compressed copies included) when its middleware is made: Django's test client makes the
# middleware afresh for every client, hundreds of times a run, at 0.23 s of CPU each here.
settings.WHITENOISE_AUTOREFRESH = True

# Passwords hashed with MD5 in the tests' own process: Django's PBKDF2 (1,000,000 rounds) costs 0.24 s of
# CPU a hash here, and hundreds of tests make a user (tests/conftest.py's role fixtures) or sign one in.
# Django's hashers stay behind it, so a hash made elsewhere (a server process the test started, with
# production's settings) still verifies.
settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", *settings.PASSWORD_HASHERS]


# --- layers: every test gets exactly one of these markers (CONTRIBUTING.md) ----------------------
# The heaviest part a test touches names its layer: browser > servers > db > engine. Fixtures say it
# for most tests; the modules listed here start processes themselves (manage.py, promtool, node,
# redis-server) and count as servers.
LAYERS = ("browser", "servers", "db", "engine")
SERVER_FIXTURES = {"kube_server", "second_kube_server", "ec2_server", "celery_worker", "live_server"}
DB_FIXTURES = {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback"}
TESTS = Path(__file__).resolve().parent
LAYER_OF_PATH = {
    "browser/": "browser",
    "faults/": "servers",  # Celery workers in processes, throwaway Redis servers, the API server restarted
    "api/test_walkthrough.py": "servers",  # curl + jq against a live server
    "foundation/test_settings.py": "servers",  # manage.py in fresh processes
    "foundation/test_deploy.py": "servers",
    "foundation/test_getting_started_eks.py": "servers",
    "foundation/test_karpweb_sh.py": "servers",
    "foundation/test_embedded_broker.py": "servers",  # a writer process, manage.py in fresh processes
    "security/test_sign_in_settings.py": "servers",
    "security/test_secrets.py": "servers",
    "ops/test_prometheus.py": "servers",  # promtool and a real Prometheus
    "ops/test_grafana.py": "servers",
    "engine/test_simulate_command.py": "servers",
}


def layer_of(item) -> str:
    """The layer of one collected test (explicit marker first, then its path, then its fixtures)."""
    for layer in LAYERS:
        if item.get_closest_marker(layer):
            return layer
    path = Path(str(item.fspath))
    relative = path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else path.as_posix()
    for prefix, layer in LAYER_OF_PATH.items():
        if relative.startswith(prefix):
            return layer
    fixtures = set(getattr(item, "fixturenames", ()))  # every fixture the test uses, directly or not
    if fixtures & SERVER_FIXTURES or item.get_closest_marker("kube"):
        return "servers"
    if fixtures & DB_FIXTURES or item.get_closest_marker("django_db"):
        return "db"
    return "engine"


def pytest_configure(config):
    profile = config.getoption("hypothesis_profile", None) or os.environ.get("HYPOTHESIS_PROFILE")
    if profile and not config.getoption("hypothesis_profile", None):
        hypothesis.settings.load_profile(profile)  # .ci/run names it in the environment
    properties.full_counts = profile == properties.CI_PROFILE


def pytest_collection_modifyitems(config, items):
    for item in items:
        layer = layer_of(item)
        if not item.get_closest_marker(layer):
            item.add_marker(getattr(pytest.mark, layer))


@pytest.fixture(autouse=True, scope="module")
def _settled_heap():
    """Each module starts with what earlier modules left alive moved out of the cyclic collector's
    way (gc.freeze, as karpweb/wsgi.py and the watch loop do): a worker's heap grows with every
    module it runs, and each full collection (the engine benchmark's and the GC tests' own, the
    interpreter's) would otherwise scan all of it. Each collect here scans only the last module's."""
    gc.collect()
    gc.freeze()
    yield


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Each test starts with an empty cache (rate-limit counts, the pod page's engine answer)."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _empty_kube_servers(request):
    """Each test that uses a kube-apiserver starts with none of the pods, Nodes, NodeClaims,
    NodePools and EC2NodeClasses earlier tests on this worker left there (tests/kube/conftest.py)."""
    for name in ("kube_server", "second_kube_server"):
        if name in request.fixturenames:
            request.getfixturevalue(name).empty()


@pytest.fixture(autouse=True)
def _fresh_default_cluster(request):
    """Each test looks the default cluster up afresh (fleet/scope.py caches it per process): a
    transactional test elsewhere may have flushed the one the migration made. A test with the
    database has it looked up before it starts, as a process that has run before has it cached, so
    that the queries a test counts are the same as before the fleet."""
    from fleet.scope import default_cluster, fleet_clusters, forget_default

    forget_default()  # the process's one kept list of clusters (fleet/scope.py)
    database = [name for name in ("transactional_db", "db") if name in request.fixturenames]
    if database or request.node.get_closest_marker("django_db"):
        if database:
            request.getfixturevalue(database[0])
        default_cluster()
        fleet_clusters()


@pytest.fixture
def admin_user_client(client, db):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    client.force_login(user)
    client.user = user
    return client


# --- users in the UI's roles (the pages' and the API's tests) ----------------------------------

def _user_in(group_name, username):
    from django.contrib.auth.models import Group

    user = get_user_model().objects.create_user(username, f"{username}@example.com", "pw-for-tests-only")
    if group_name:
        # get_or_create: a transactional test elsewhere may have flushed the migration-made groups.
        user.groups.add(Group.objects.get_or_create(name=group_name)[0])
    return user


@pytest.fixture
def viewer(db):
    return _user_in("viewer", "vera")


@pytest.fixture
def operator(db):
    return _user_in("operator", "otto")


@pytest.fixture
def nobody(db):
    return _user_in(None, "nora")


@pytest.fixture
def as_viewer(viewer):
    """The API as a viewer, through a token (tests/support/api_clients.py)."""
    from tests.support.api_clients import token_client

    return token_client(viewer)


@pytest.fixture
def as_operator(operator):
    from tests.support.api_clients import token_client

    return token_client(operator)


@pytest.fixture
def fleet_admin(db):
    return _user_in("fleet-admin", "fay")


@pytest.fixture
def as_fleet_admin(fleet_admin):
    from tests.support.api_clients import token_client

    return token_client(fleet_admin)


@pytest.fixture
def as_nobody(nobody):
    from tests.support.api_clients import token_client

    return token_client(nobody)


@pytest.fixture
def viewer_client(client, viewer):
    client.force_login(viewer)
    return client


@pytest.fixture
def operator_client(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def demo_world(db):
    from django.core.management import call_command

    from fleet.scope import default_cluster, fleet_clusters

    call_command("seed_demo")
    # The demo made its fleet's clusters (which forgets what the process kept of them): looked up again,
    # as a process that has served pages since has them, so a page's first query count is its usual one.
    default_cluster()
    fleet_clusters()


@pytest.fixture(scope="module")
def demo_world_for_module(django_db_setup, django_db_blocker):
    """The demo world seeded once for a module whose every test uses it (tests/support/module_rows.py
    says when that is safe). Such a module overrides ``demo_world`` with a fixture that asks for this
    one and for ``db``; each test's own writes are still rolled back after it."""
    from django.core.management import call_command

    from tests.support.module_rows import rolled_back_at_the_end

    with rolled_back_at_the_end(django_db_blocker, lambda: call_command("seed_demo")):
        yield


# --- the workers' PostgreSQL databases: migrated once, copied for the others (issue #35) ---------
# Each pytest-xdist worker makes its own test database. On PostgreSQL the first worker to get here
# migrates its own and copies it into a template (CREATE DATABASE ... TEMPLATE needs the source
# without connections, so it closes its own for the moment); the others wait for that under a file
# lock and create theirs from the template, where migrate then finds nothing to do. The controller
# drops the template at the end. SQLite, a single process and --reuse-db are left to pytest-django.
# KARPWEB_TEST_DB_TEMPLATE=off turns it off.

TEMPLATE_WAIT_SECONDS = 300


def _template_plan(request):
    """(lock path, marker path, template name) when the workers' databases are copied; else None."""
    worker = getattr(request.config, "workerinput", None)
    database = settings.DATABASES["default"]
    if (worker is None or database["ENGINE"] != "django.db.backends.postgresql" or request.config.getoption("reuse_db")
            or os.environ.get("KARPWEB_TEST_DB_TEMPLATE") == "off"):
        return None
    base = _marker_base(worker["testrunuid"])
    return f"{base}.lock", f"{base}.ready", _template_name()


def _marker_base(run: str) -> Path:
    """The lock and ready files of one run, named after the template (the controller removes its own)."""
    import tempfile

    return Path(tempfile.gettempdir()) / f"karpweb-{_template_name()}-{run}"


def _template_name() -> str:
    return f"test_{settings.DATABASES['default']['NAME']}_template"[:63]


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings, request):
    """pytest-django's (the worker's suffix), then: wait for the template, or become the worker that makes it."""
    import fcntl
    import time

    plan = _template_plan(request)
    request.config._karpweb_template_lock = None
    if plan is None:
        return
    lock_path, ready_path, template = plan
    lock = open(lock_path, "a")
    deadline = time.monotonic() + TEMPLATE_WAIT_SECONDS
    while True:  # the worker making the template holds the lock while it migrates
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:  # it failed or hangs: migrate this worker's own, as without the template
                lock.close()
                return
            time.sleep(0.2)
    if Path(ready_path).exists():
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
        settings.DATABASES["default"]["TEST"]["TEMPLATE"] = template
    else:
        request.config._karpweb_template_lock = (lock, ready_path, template)  # released once this worker migrated


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker, request):
    """pytest-django's; then, in the worker that migrated first, its database copied into the template.
    At the end, no other session left on this worker's database."""
    import fcntl

    held = getattr(request.config, "_karpweb_template_lock", None)
    if held is not None:
        lock, ready_path, template = held
        try:
            from django.db import connection, connections

            with django_db_blocker.unblock():
                source = connection.settings_dict["NAME"]
                connections.close_all()
                with connection._nodb_cursor() as cursor:
                    cursor.execute(f'DROP DATABASE IF EXISTS "{template}"')
                    cursor.execute(f'CREATE DATABASE "{template}" TEMPLATE "{source}"')
            Path(ready_path).touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            lock.close()
            request.config._karpweb_template_lock = None
    yield
    _own_database_released(django_db_blocker)


def _own_database_released(django_db_blocker) -> None:
    """End every session still on this worker's own test database, so that pytest-django can drop it.
    Some full runs end with one more session than the worker's own, opened by a thread of some test
    late in the run (its owner is gone by then: no live connection object holds it). PostgreSQL then
    waits 5 s for it and refuses the drop, which leaves the database behind with a warning."""
    from django.db import connection, connections

    if connection.vendor != "postgresql":
        return
    connections.close_all()
    with django_db_blocker.unblock(), connection._nodb_cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                       [connection.settings_dict["NAME"]])


def pytest_sessionfinish(session):
    """The controller drops the template the workers' databases were copied from (workers leave it)."""
    if hasattr(session.config, "workerinput") or not session.config.pluginmanager.hasplugin("dsession"):
        return
    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        return
    try:
        import psycopg

        database = settings.DATABASES["default"]
        with psycopg.connect(dbname="postgres", user=database.get("USER") or None, password=database.get("PASSWORD") or None,
                             host=database.get("HOST") or None, port=database.get("PORT") or None, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{_template_name()}"')
    except Exception:  # noqa: BLE001 - a leftover template is harmless (the next run replaces it)
        pass
    for marker in _marker_base("*").parent.glob(_marker_base("*").name + ".*"):
        marker.unlink(missing_ok=True)
