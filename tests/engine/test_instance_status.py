"""EC2 status checks read as aws/karpenter-provider-aws `pkg/providers/instancestatus` and
`pkg/controllers/interruption` (suite_test "should forcefully terminate ... status checks"): a
failed instance or system check counts once it has been impaired for 120 s and terminates
forcefully; a scheduled event drains; EBS checks and passing checks are not acted on. The input
is DescribeInstanceStatus's InstanceStatuses as EC2 answers them."""

from datetime import datetime, timedelta, timezone

from scheduling.engine.interruptions import (EVENT_STATUS, INSTANCE_STATUS, SYSTEM_STATUS, UNHEALTHY_THRESHOLD,
                                             status_check_failures)

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)


def status(instance, instance_check=None, system_check=None, ebs_check=None, events=()):
    def summary(since):
        if since is None:
            return {"Status": "ok", "Details": [{"Name": "reachability", "Status": "passed"}]}
        return {"Status": "impaired", "Details": [{"Name": "reachability", "Status": "failed", "ImpairedSince": since}]}
    return {"InstanceId": instance, "InstanceStatus": summary(instance_check), "SystemStatus": summary(system_check),
            "AttachedEbsStatus": summary(ebs_check), "Events": [{"Code": code} for code in events]}


def test_should_forcefully_terminate_when_an_instance_has_a_system_status_check_failure():
    (found,) = status_check_failures([status("i-1", system_check=NOW - UNHEALTHY_THRESHOLD)], NOW)
    assert found.kind == SYSTEM_STATUS and found.instance_ids == ("i-1",) and found.forceful and found.drains
    assert "SystemStatus check failed (reachability)" in found.detail


def test_should_forcefully_terminate_when_an_instance_has_an_instance_status_check_failure():
    (found,) = status_check_failures([status("i-2", instance_check=(NOW - timedelta(hours=1)).isoformat())], NOW)
    assert found.kind == INSTANCE_STATUS and found.forceful


def test_should_not_act_before_the_unhealthy_threshold():
    assert status_check_failures([status("i-3", system_check=NOW - UNHEALTHY_THRESHOLD + timedelta(seconds=1))], NOW) == []


def test_should_drain_on_a_scheduled_event_and_ignore_ebs_and_passing_checks():
    found = status_check_failures([status("i-4", events=("system-maintenance",)), status("i-5", ebs_check=NOW - timedelta(hours=1)),
                                   status("i-6")], NOW)
    assert [(f.kind, f.instance_ids, f.forceful) for f in found] == [(EVENT_STATUS, ("i-4",), False)]


def test_should_act_on_each_failed_category_of_one_instance():
    both = status("i-7", system_check=NOW - timedelta(hours=1), events=("instance-retirement",))
    assert sorted(f.kind for f in status_check_failures([both], NOW)) == [EVENT_STATUS, SYSTEM_STATUS]
