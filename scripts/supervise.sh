#!/usr/bin/env bash
# Keeps one command running, as ./karpweb.sh run does with the Celery worker (+ beat) of the quick
# start: in production the process manager (systemd, Kubernetes) restarts it instead.
#
#   scripts/supervise.sh LOG RECORD -- COMMAND [ARG...]
#
# COMMAND's output is appended to LOG. Each time it exits, one line goes to RECORD:
#   <exited at, UTC ISO 8601> TAB <exit code> TAB <restart at> TAB <last line of its output>
# then it is started again after a back-off (1 s, doubled each quick exit, at most
# KARPWEB_RESTART_BACKOFF_MAX s, 60 by default; back to 1 s after a run of 10 minutes). The overview
# reads RECORD (scheduling/loop/health.py) to say why the loop stopped and when it restarted.
# SIGTERM/SIGINT stop the command and the loop.
set -uo pipefail
# Each run of COMMAND in a process group of its own, ended whole when COMMAND exits: `celery worker
# --beat` forks beat, which outlives a killed worker, and a second beat would double every schedule.
set -m

usage() { echo "usage: scripts/supervise.sh LOG RECORD -- COMMAND [ARG...]" >&2; exit 64; }
[ $# -ge 4 ] && [ "$3" = "--" ] || usage
log="$1" record="$2"
shift 3
max_backoff="${KARPWEB_RESTART_BACKOFF_MAX:-60}"
case "$max_backoff" in
    '' | *[!0-9]*) echo "KARPWEB_RESTART_BACKOFF_MAX='$max_backoff' is not a whole number of seconds" >&2; exit 64 ;;
esac
STEADY_AFTER=600  # a run this long was not a crash loop: the next back-off starts at 1 s again

child=""
stop() {
    if [ -n "$child" ]; then
        kill -TERM -- "-$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    exit 0
}
trap stop TERM INT

backoff=1
while true; do
    offset="$(stat -c %s "$log" 2>/dev/null || echo 0)"
    started="$(date +%s)"
    "$@" >>"$log" 2>&1 &
    child=$!
    # `wait` returns early when a trapped signal arrives; then stop() ends the loop.
    wait "$child"
    code=$?
    kill -TERM -- "-$child" 2>/dev/null  # what it left behind (beat)
    child=""
    now="$(date +%s)"
    if [ $((now - started)) -ge "$STEADY_AFTER" ]; then backoff=1; fi
    # The last non-blank line this run wrote: the error it died on, usually.
    last="$(tail -c +$((offset + 1)) "$log" 2>/dev/null | grep -v '^[[:space:]]*$' | tail -n 1 | tr '\t' ' ' | cut -c1-300)"
    printf '%s\t%s\t%s\t%s\n' "$(date -u -d "@$now" +%Y-%m-%dT%H:%M:%SZ)" "$code" \
        "$(date -u -d "@$((now + backoff))" +%Y-%m-%dT%H:%M:%SZ)" "${last:-no output}" >>"$record"
    echo "[supervise.sh] $(date -u +%Y-%m-%dT%H:%M:%SZ) exited with code $code; restarting in ${backoff} s" >>"$log"
    sleep "$backoff" &
    child=$!
    wait "$child"
    child=""
    backoff=$((backoff * 2 > max_backoff ? max_backoff : backoff * 2))
    [ "$backoff" -ge 1 ] || backoff=1
done
