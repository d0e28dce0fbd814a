"""The Kubernetes side of the loop against the real kube-apiserver (and EC2 on the test server):
a 409 Conflict is retried, and an API server restarted in the middle of a run loses no record."""

import pytest

from fleet.scope import default_cluster
from scheduling.adapters.ec2.launch import NODECLAIM_TAG
from scheduling.adapters.kube.adapter import KubeClusterAdapter
from scheduling.adapters.kube.resources import NODECLAIM
from scheduling.adapters.kube.rest import KubeRest
from scheduling.loop import provisioning
from scheduling.loop.runs import run_step, scope_for
from scheduling.models import Decision, NodeClaim, TaskRun
from tests.kube import helpers as h

from . import worlds

pytestmark = [pytest.mark.kube, pytest.mark.django_db, pytest.mark.usefixtures("aws")]


class RacingRest(KubeRest):
    """Another writer (a controller, kubectl) changes each NodeClaim right after the adapter read
    it, `races` times: the adapter's write then meets a real 409 from the API server."""

    def __init__(self, api_client, other: KubeRest, races: int):
        super().__init__(api_client)
        self.other, self.races, self.conflicts = other, races, 0

    def get(self, resource, name, namespace=None, subresource=None):
        obj = super().get(resource, name, namespace, subresource)
        if resource is NODECLAIM and self.races:
            self.races -= 1
            self.conflicts += 1
            self.other.patch(resource, name, {"metadata": {"annotations": {f"other-writer-{self.conflicts}": "yes"}}})
        return obj


@pytest.fixture
def rest(kube_api_client):
    return KubeRest(kube_api_client)


@pytest.fixture
def loop_world(world, clock, provider, rest, unique, settings):
    settings.KARPWEB_MODE = "control"
    pool = f"general-{unique}"
    h.nodepool(rest, pool, node_class=f"default-{unique}")
    reservation = worlds.build(world, provider, clock(), units=2, pods=1, pool=pool, node_class=f"default-{unique}")
    return {"pool": pool, "reservation": reservation}


def instances_of(raw_ec2, claim):
    answer = raw_ec2.describe_instances(Filters=[{"Name": f"tag:{NODECLAIM_TAG}", "Values": [claim]},
                                                 {"Name": "instance-state-name", "Values": ["running"]}])
    return [i["InstanceId"] for r in answer["Reservations"] for i in r["Instances"]]


def test_a_conflict_on_the_launch_record_is_retried(loop_world, clock, provider, raw_ec2, kube_api_client, rest):
    adapter = KubeClusterAdapter(kube_api_client)
    adapter.rest = RacingRest(kube_api_client, rest, races=2)

    counts = provisioning.provision(provider, adapter, now=clock())

    assert (counts["launched"], counts["launch_failures"]) == (1, 0)
    assert adapter.rest.conflicts == 2, "two real 409s, each answered by reading again"
    row = NodeClaim.objects.get()
    stored = rest.get(NODECLAIM, row.name)
    assert stored["status"]["providerID"] == row.provider_id != ""
    assert [(c["type"], c["status"]) for c in stored["status"]["conditions"]] == [("Launched", "True")]
    # The other writer's changes survived the retried write.
    assert {"other-writer-1": "yes", "other-writer-2": "yes"}.items() <= stored["metadata"]["annotations"].items()
    assert instances_of(raw_ec2, row.name) == [row.provider_id.rsplit("/", 1)[-1]]
    assert Decision.objects.get(kind="launch").outcome == Decision.Outcome.ACTED


def test_conflicts_past_the_bound_fail_the_record_and_the_next_run_finishes_it(loop_world, clock, provider, raw_ec2,
                                                                            kube_api_client, rest):
    adapter = KubeClusterAdapter(kube_api_client, conflict_retries=3)
    adapter.rest = RacingRest(kube_api_client, rest, races=3)

    first = provisioning.provision(provider, adapter, now=clock())

    assert (first["launched"], first["launch_failures"]) == (0, 1)
    failed = Decision.objects.get(kind="launch", outcome=Decision.Outcome.FAILED)
    assert "conflict" in failed.error
    row = NodeClaim.objects.get()
    assert row.provider_id == "" and len(instances_of(raw_ec2, row.name)) == 1, "launched, not yet recorded"

    second = provisioning.provision(provider, adapter, now=clock())

    assert second["relaunched"] == 1 and second["claims_planned"] == 0
    row.refresh_from_db()
    assert instances_of(raw_ec2, row.name) == [row.provider_id.rsplit("/", 1)[-1]], "the same instance, no second one"
    assert rest.get(NODECLAIM, row.name)["status"]["providerID"] == row.provider_id
    assert Decision.objects.filter(subject=f"NodeClaim {row.name}", outcome=Decision.Outcome.ACTED).exists()


def test_an_api_server_restart_in_the_middle_of_a_run_loses_no_record(loop_world, clock, provider, raw_ec2,
                                                                      kube_api_client, kube_server, rest):
    adapter = KubeClusterAdapter(kube_api_client)

    class StopsTheAPIServerAfterTheLaunch:
        """The EC2 provider, except that the API server goes down right after the first launch."""

        def __init__(self):
            self.stopped = False

        def __getattr__(self, name):
            return getattr(provider, name)

        def launch(self, request):
            result = provider.launch(request)
            if not self.stopped:
                self.stopped = True
                kube_server.stop_apiserver()
            return result

    cloud = StopsTheAPIServerAfterTheLaunch()
    try:
        with scope_for(default_cluster()):  # as tasks.run_on runs it
            first = run_step("provision", lambda: provisioning.provision(cloud, adapter, now=clock()))
    finally:
        kube_server.start_apiserver()
    assert cloud.stopped
    assert first.status == TaskRun.Status.SUCCEEDED and first.counts["launch_failures"] == 1
    failed = Decision.objects.get(kind="launch", outcome=Decision.Outcome.FAILED)
    assert "cannot reach the Kubernetes API server" in failed.error
    row = NodeClaim.objects.get()
    assert row.provider_id == ""

    with scope_for(default_cluster()):
        second = run_step("provision", lambda: provisioning.provision(cloud, adapter, now=clock()))

    assert second.status == TaskRun.Status.SUCCEEDED
    assert (second.counts["relaunched"], second.counts["claims_planned"]) == (1, 0)
    row.refresh_from_db()
    assert instances_of(raw_ec2, row.name) == [row.provider_id.rsplit("/", 1)[-1]]
    assert rest.get(NODECLAIM, row.name)["status"]["providerID"] == row.provider_id
    # No record lost: both runs, both decisions (the failure, then how the claim ended).
    runs = TaskRun.objects.filter(task="provision").order_by("started_at")
    assert [(r.status, r.finished_at is not None) for r in runs] == [("succeeded", True)] * 2
    assert list(Decision.objects.filter(kind="launch").order_by("id").values_list("outcome", flat=True)) == ["failed", "acted"]
