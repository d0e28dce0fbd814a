"""#48: the Nominated events' rate limit (upstream's token bucket: 5 a second, bursts of 10) and the
event's body as client-go's recorder writes it (no server: tests/kube/test_events.py writes them)."""

import datetime

from scheduling.adapters.kube import events as E
from scheduling.loop.kube_events import TokenBucket


def test_the_bucket_gives_a_burst_then_five_a_second():
    now = [0.0]
    bucket = TokenBucket(rate=5, burst=10, clock=lambda: now[0])
    assert [bucket.take() for _ in range(11)] == [True] * 10 + [False]
    now[0] += 0.2
    assert bucket.take() and not bucket.take()


def test_a_cluster_scoped_object_s_event_goes_to_default_with_its_reference():
    at = datetime.datetime(2026, 11, 28, 9, 0, tzinfo=datetime.timezone.utc)
    [event] = E.unconsolidatable(E.node_ref("ip-10-0-0-1", "uid-1"), None, 'NodePool "web" has consolidation disabled')
    body = E.event_body(event, at, "karpweb-worker-0")
    assert body["metadata"]["namespace"] == "default" and body["metadata"]["name"].startswith("ip-10-0-0-1.")
    assert body["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "ip-10-0-0-1", "uid": "uid-1"}
    assert (body["type"], body["reason"], body["count"], body["firstTimestamp"]) == (
        "Normal", "Unconsolidatable", 1, "2026-11-28T09:00:00Z")
    assert event.dedupe_timeout == datetime.timedelta(minutes=15)
    claim = E.nodeclaim_ref("web-abcde", "uid-2").reference()
    assert claim == {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "web-abcde", "uid": "uid-2"}
    assert E.disruption_terminating(None, E.nodeclaim_ref("web-abcde"), "underutilized")[0].message == \
        "Disrupting NodeClaim: Underutilized"
