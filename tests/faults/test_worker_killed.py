"""A real `celery worker` process SIGKILLed in the middle of a launch: EC2 (the test server) has
started the instance but its answer has not reached the worker. A new worker gets the task again
(acks_late) and finishes the claim with that instance: exactly one instance for the claim."""

import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from celery import Celery
from django.db import connection
from django.utils import timezone

from scheduling.adapters.ec2 import EC2CloudProvider
from scheduling.adapters.ec2.client import make_ec2_client, make_resource_groups_client
from scheduling.adapters.ec2.launch import NODECLAIM_TAG
from scheduling.loop.provisioning import PROVISIONER_LABEL
from scheduling.models import Decision, Lease, NodeClaim, TaskRun

from . import worlds
from .redis_server import ThrowawayRedis

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("aws")]
ROOT = Path(__file__).resolve().parents[2]
WAIT = 90
VISIBILITY_TIMEOUT = 2  # seconds before an unacknowledged message goes back to the queue


def database_url() -> str:
    """The test database, as the worker processes must reach it."""
    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{Path(s['NAME']).resolve()}"
    from urllib.parse import quote

    auth = quote(s["USER"] or "") + (f":{quote(s['PASSWORD'])}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


class Workers:
    """`celery worker` processes (solo pool: the worker is the one process that runs the task)."""

    def __init__(self, directory: Path, env: dict):
        self.directory, self.env, self.processes = directory, env, []

    def start(self) -> subprocess.Popen:
        log = open(self.directory / f"worker-{len(self.processes)}.log", "wb")  # noqa: SIM115 - closed in stop
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.faults.celery_app", "worker", "--pool=solo",
             "--without-heartbeat", "--without-mingle", "--without-gossip", "--loglevel=INFO",
             "-Q", self.env["KARPWEB_TEST_QUEUE"], "-n", f"killed-test-{len(self.processes)}@%h"],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        process.log = log
        self.processes.append(process)
        return process

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
            process.log.close()

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(self.directory.glob("worker-*.log")))


def wait_for(condition, what: str, workers: Workers, seconds: float = WAIT):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    pytest.fail(f"{what}: not within {seconds} s\n{workers.logs()}")


@pytest.fixture
def redis_server(tmp_path):
    """The test's own Redis: a 2-second visibility timeout must never touch the shared Redis's
    unacknowledged messages (restoring them is done for the whole Redis database)."""
    server = ThrowawayRedis(tmp_path)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def provider(config, boto_session, world):
    """The EC2 provider on the test server in real time (the workers use real time too)."""
    return EC2CloudProvider(config, ec2=make_ec2_client(config, boto_session),
                            resource_groups=make_resource_groups_client(config, boto_session),
                            instance_type_patterns=("m5.*",))


@pytest.fixture
def workers(tmp_path, redis_server, ec2_endpoint):
    env = {
        **os.environ,
        "DATABASE_URL": database_url(), "REDIS_URL": redis_server.url,
        "KARPWEB_TEST_QUEUE": f"karpweb-killed-{uuid.uuid4().hex[:8]}",
        "KARPWEB_TEST_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
        "KARPWEB_PROVIDER": "aws", "KARPWEB_CLUSTER": "simulated", "KARPWEB_MODE": "control",
        "KARPWEB_EC2_ENDPOINT_URL": ec2_endpoint, "KARPWEB_AWS_REGION": "us-east-1", "KARPWEB_EC2_MAX_ATTEMPTS": "2",
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_EC2_METADATA_DISABLED": "true",
    }
    env.pop("AWS_PROFILE", None)
    started = Workers(tmp_path, env)
    yield started
    started.stop()


@pytest.fixture
def producer(redis_server, workers):
    app = Celery("karpweb-producer", set_as_current=False)
    app.conf.update(broker_url=redis_server.url, result_backend=redis_server.url,
                    task_default_queue=workers.env["KARPWEB_TEST_QUEUE"])
    yield app
    app.close()


def running_instances(raw_ec2, claim=None):
    filters = [{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    if claim:
        filters.append({"Name": f"tag:{NODECLAIM_TAG}", "Values": [claim]})
    answer = raw_ec2.describe_instances(Filters=filters)
    return [i["InstanceId"] for r in answer["Reservations"] for i in r["Instances"]]


def test_a_worker_killed_mid_launch_leaves_exactly_one_instance(world, provider, raw_ec2, workers, producer):
    reservation = worlds.build(world, provider, timezone.now(), units=2, pods=1)
    first = workers.start()
    # The worker's own EC2 provider learns the reservation's free units from its sync, as in production.
    assert producer.send_task("karpweb.sync_ec2").get(timeout=WAIT)["reservations_updated"] == 1

    world.faults.delay("CreateFleet", seconds=WAIT)  # EC2 starts the instance, its answer comes late
    producer.send_task("karpweb.provision")
    wait_for(lambda: world.faults.held == ["CreateFleet"], "the launch reached EC2", workers)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    world.faults.release()  # the answer goes to a dead connection

    claim = NodeClaim.objects.get(labels__has_key=PROVISIONER_LABEL)
    assert claim.provider_id == "", "killed before the launch was recorded"
    [instance] = running_instances(raw_ec2, claim.name)
    assert world.reservation(reservation)["AvailableInstanceCount"] == 1
    # The dead worker still holds the step's lease; it lapses after its TTL (five minutes). The test
    # lets that time pass for the lease only.
    Lease.objects.filter(name__startswith="step:provision").update(expires_at=timezone.now() - timedelta(seconds=1))

    workers.start()  # gets the unacknowledged provision task again after the visibility timeout
    wait_for(lambda: TaskRun.objects.filter(task="provision", status="succeeded").exists(),
             "the new worker ran the provision task", workers)

    claim.refresh_from_db()
    assert claim.provider_id == f"aws:///{worlds.ZONE}/{instance}"
    assert claim.capacity_type == "reserved" and claim.reservation_label == reservation
    assert running_instances(raw_ec2) == [instance], "exactly one instance, for this claim"
    assert world.reservation(reservation)["AvailableInstanceCount"] == 1, "one unit taken, once"
    assert len(world.calls_of("CreateFleet")) == 1, "found by its tag, not launched again"
    retried = TaskRun.objects.get(task="provision", status="succeeded")
    assert retried.counts["relaunched"] == 1 and retried.counts["claims_planned"] == 0
    killed = TaskRun.objects.get(task="provision", status="failed")
    assert killed.finished_at and "worker stopped" in killed.error
    assert Decision.objects.get(subject=f"NodeClaim {claim.name}").outcome == Decision.Outcome.ACTED


def test_a_cluster_step_of_a_fleet_killed_mid_launch_runs_again_and_acts_once(world, provider, raw_ec2, workers,
                                                                                 producer):
    """The same kill, in a fleet of two: the step runs as `karpweb.cluster_step` in its cluster's scope
    under the (step, cluster) lease; the other cluster's rows are untouched."""
    from fleet.models import AwsAccount, Cluster
    from fleet.scope import default_cluster

    reservation = worlds.build(world, provider, timezone.now(), units=2, pods=1)
    home = default_cluster()
    other = Cluster.objects.create(name="other", account=AwsAccount.objects.create(account_id="222222222222", name="other"),
                                   region="us-west-2")
    first = workers.start()
    synced = producer.send_task("karpweb.cluster_step", args=("sync_ec2", home.pk)).get(timeout=WAIT)
    assert synced["reservations_updated"] == 1

    world.faults.delay("CreateFleet", seconds=WAIT)
    producer.send_task("karpweb.cluster_step", args=("provision", home.pk))
    wait_for(lambda: world.faults.held == ["CreateFleet"], "the launch reached EC2", workers)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    world.faults.release()

    claim = NodeClaim.objects.get(labels__has_key=PROVISIONER_LABEL)
    [instance] = running_instances(raw_ec2, claim.name)
    [lease] = Lease.objects.filter(name=f"step:provision:cluster-{home.pk}").exclude(holder="")
    lease.expires_at = timezone.now() - timedelta(seconds=1)  # its TTL passes, for the lease only
    lease.save()

    workers.start()  # gets the unacknowledged cluster_step again (acks late, the worker lost)
    wait_for(lambda: TaskRun.objects.filter(task="provision", status="succeeded").exists(),
             "the new worker ran the cluster's provision step", workers)
    claim.refresh_from_db()
    assert claim.provider_id == f"aws:///{worlds.ZONE}/{instance}" and claim.cluster_id == home.pk
    assert running_instances(raw_ec2) == [instance], "exactly one instance, for this claim"
    assert len(world.calls_of("CreateFleet")) == 1, "found by its tag, not launched again"
    retried = TaskRun.objects.get(task="provision", status="succeeded")
    assert retried.cluster_id == home.pk and retried.counts["relaunched"] == 1
    assert TaskRun.objects.get(task="provision", status="failed").cluster_id == home.pk
    assert not NodeClaim.objects.fleet().filter(cluster=other).exists()


@pytest.mark.parametrize("shared_cache", [True, False], ids=["redis-cache", "no-shared-cache"])
def test_a_worker_that_never_ran_the_ec2_step_launches_into_the_reservation(world, provider, raw_ec2, workers,
                                                                           producer, redis_server, shared_cache):
    """Issue #46, item 2: the worker that synced the account is killed; its replacement, a new process
    that has run no EC2 step, still launches into the reservation's free unit (from the shared cache,
    or without one from the mirror and the ledger), never InsufficientCapacity."""
    if shared_cache:
        workers.env["KARPWEB_CACHE_URL"] = redis_server.url
    reservation = worlds.build(world, provider, timezone.now(), units=2, pods=1)
    syncer = workers.start()
    assert producer.send_task("karpweb.sync_ec2").get(timeout=WAIT)["reservations_updated"] == 1
    syncer.send_signal(signal.SIGKILL)
    syncer.wait(10)

    workers.start()
    counts = producer.send_task("karpweb.provision").get(timeout=WAIT)
    assert counts["claims_planned"] == 1, workers.logs()
    claim = NodeClaim.objects.get(labels__has_key=PROVISIONER_LABEL)
    assert claim.capacity_type == "reserved" and claim.reservation_label == reservation, workers.logs()
    [instance] = running_instances(raw_ec2, claim.name)
    assert claim.provider_id == f"aws:///{worlds.ZONE}/{instance}"
    assert world.reservation(reservation)["AvailableInstanceCount"] == 1
    assert len(world.calls_of("CreateFleet")) == 1, "one launch, into the reservation"
