#!/usr/bin/env bash
# karpweb's two set-up commands (see README "Quick start"):
#   ./karpweb.sh run    install into .venv, migrate, seed the demo world (simulated world only), start web + Celery worker/beat
#   ./karpweb.sh test   install into .venv and run the whole test suite on every core (extra arguments
#                       go to pytest: -m engine for the fast layer, -n 0 for one process; CONTRIBUTING.md)
#   ./karpweb.sh python print the interpreter .venv is built with
set -euo pipefail
cd "$(dirname "$0")"

PORT="${PORT:-8000}"

python_for_venv() {
    # Run each candidate, quietly: a pyenv shim is found by `command -v` even when its version is
    # not installed, and then prints "command not found" blocks when run.
    for candidate in python3.13 python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then
            echo "$candidate"
            return
        fi
    done
    echo "karpweb needs Python 3.11 or newer" >&2
    exit 1
}

install() {
    if [ ! -x .venv/bin/python ]; then
        "$(python_for_venv)" -m venv .venv
    fi
    # Reinstall only when the pinned dependencies changed.
    local stamp=.venv/.karpweb-installed
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        echo "Installing dependencies into .venv ..."
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
        touch "$stamp"
    fi
}

run() {
    install
    # The embedded defaults: SQLite under var/, a Celery broker on a SQLite file there too
    # (var/celery-broker.sqlite3, karpweb/settings.py), the simulated world.
    export DEBUG="${DEBUG:-true}"
    mkdir -p var
    .venv/bin/python manage.py migrate --no-input -v 0
    # The demo world only into the simulated world's database: never beside a real cluster's or account's.
    .venv/bin/python manage.py seed_demo --skip-if-real
    local password="${KARPWEB_ADMIN_PASSWORD:-karpweb}"
    DJANGO_SUPERUSER_PASSWORD="$password" .venv/bin/python manage.py shell -v 0 -c "
from django.contrib.auth import get_user_model
User = get_user_model()
if not User.objects.filter(username='admin').exists():
    User.objects.create_superuser('admin', 'admin@localhost', '$password')
"
    # The worker is restarted whenever it exits (scripts/supervise.sh); each exit is a line of
    # var/celery-restarts.log, which the overview shows. Both files start afresh with each run.
    : >var/celery.log
    : >var/celery-restarts.log
    # The broker's queue rows first: the worker and its beat would race to create them (scheduling/loop/broker.py).
    .venv/bin/python manage.py shell -v 0 -c "from scheduling.loop.broker import declare_queues; declare_queues()"
    scripts/supervise.sh var/celery.log var/celery-restarts.log -- \
        .venv/bin/celery -A karpweb worker --beat --pool=solo --loglevel=INFO --schedule=var/celerybeat-schedule &
    local celery_pid=$!
    local watch_pid=""
    if [ "${KARPWEB_CLUSTER:-simulated}" = "kubernetes" ]; then
        # A real cluster: follow its watches and provision in batch windows (var/watch.log).
        .venv/bin/python manage.py watch >var/watch.log 2>&1 &
        watch_pid=$!
    fi
    trap 'kill "$celery_pid" $watch_pid 2>/dev/null || true' EXIT INT TERM
    echo
    echo "karpweb is starting at http://127.0.0.1:${PORT}/  (admin: http://127.0.0.1:${PORT}/admin/)"
    echo "log in as: admin / ${password}"
    echo "Celery worker + beat log: var/celery.log (restarted when it exits: var/celery-restarts.log).  Stop with Ctrl-C."
    echo
    .venv/bin/python manage.py runserver "127.0.0.1:${PORT}"
}

test_workers() {
    # One pytest-xdist worker per core, at most 4: each worker starts its own kube-apiserver + etcd,
    # EC2 test server and Chromium (CONTRIBUTING.md). KARPWEB_TEST_WORKERS overrides it.
    local cores
    cores="$(nproc 2>/dev/null || echo 2)"
    echo "${KARPWEB_TEST_WORKERS:-$((cores < 4 ? cores : 4))}"
}

test_suite() {
    install
    mkdir -p var  # the SQLite test databases when DATABASE_URL is not set
    local defaults=() arg
    local parallel=yes durations=yes
    for arg in "$@"; do
        case "$arg" in
            -n | -n* | --numprocesses* | --dist* | no:xdist) parallel=no ;;  # the caller's choice wins
            --durations*) durations=no ;;
        esac
    done
    if [ "$parallel" = yes ]; then defaults+=(-n "$(test_workers)"); fi
    if [ "$durations" = yes ]; then defaults+=(--durations=15); fi  # the 15 slowest tests, every run
    # Keep the compiled modules and pytest's assertion-rewritten test modules between runs (the
    # environment may say otherwise): every worker compiles them afresh without it, 9 of the 24
    # CPU-seconds each worker spends collecting (docs/benchmark.md, "The suite's time").
    unset PYTHONDONTWRITEBYTECODE
    .venv/bin/python -m pytest "${defaults[@]}" "$@"
}

case "${1:-}" in
    run) shift; run "$@" ;;
    test) shift; test_suite "$@" ;;
    python) python="$(python_for_venv)"; echo "$(command -v "$python") ($("$python" --version 2>&1))" ;;
    *) echo "usage: ./karpweb.sh run | ./karpweb.sh test [pytest arguments] | ./karpweb.sh python" >&2; exit 64 ;;
esac
