"""One reservation ledger across the fleet (#36), on the EC2 test server with several accounts: moto
gives credentials from STS AssumeRole into another account's role, and that account's calls land in
its own world (its instances, its view of the reservations shared with it)."""

import threading

import boto3
import pytest
from django.db import connection

from fleet.models import AwsAccount, Cluster
from fleet.scope import carry, cluster_scope, forget_default
from reservations import ledger
from reservations.models import (CapacityReservation, ReservationContention, ReservationHold, ReservationUse,
                                 ReservationVisibility)
from scheduling.adapters.ec2 import EC2CloudProvider
from scheduling.adapters.ec2.client import make_ec2_client, make_resource_groups_client
from scheduling.adapters.ec2.sync import sync_reservations
from scheduling.models import Node

from . import worlds

OWNER = "123456789012"  # moto's default account: the test server's own
SHARED = "222222222222"  # one of ours, the reservation shared with it
OUTSIDE = "333333333333"  # not one of the fleet's accounts

pytestmark = [pytest.mark.usefixtures("aws")]


def assumed_session(world, account_id: str) -> boto3.session.Session:
    """Credentials for a role in `account_id`, from the test server's STS (as karpweb assumes an
    account's role_arn)."""
    sts = boto3.client("sts", region_name=world.region, endpoint_url=world.endpoint_url,
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    creds = sts.assume_role(RoleArn=f"arn:aws:iam::{account_id}:role/karpweb", RoleSessionName="karpweb")["Credentials"]
    return boto3.session.Session(aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                                 aws_session_token=creds["SessionToken"])


def provider_in(world, config, clock, account_id: str) -> EC2CloudProvider:
    session = assumed_session(world, account_id)
    return EC2CloudProvider(config, ec2=make_ec2_client(config, session),
                            resource_groups=make_resource_groups_client(config, session), clock=clock,
                            sleep=lambda _: None, instance_type_patterns=("m5.*",))


def launch_into(provider: EC2CloudProvider, reservation_id: str) -> str:
    answer = provider.ec2.run_instances(
        ImageId=worlds.AMI, MinCount=1, MaxCount=1, InstanceType="m5.large", Placement={"AvailabilityZone": worlds.ZONE},
        CapacityReservationSpecification={"CapacityReservationTarget": {"CapacityReservationId": reservation_id}})
    return answer["Instances"][0]["InstanceId"]


def node_on(cluster: Cluster, instance_id: str, name: str) -> Node:
    return Node.objects.create(cluster=cluster, name=name, instance_type="m5.large", zone=worlds.ZONE,
                               capacity_type="reserved", provider_id=f"aws:///{worlds.ZONE}/{instance_id}")


@pytest.fixture
def fleet(db):
    forget_default()
    owner = AwsAccount.objects.create(account_id=OWNER, name="ml-prod", regions=["us-east-1"])
    shared = AwsAccount.objects.create(account_id=SHARED, name="ml-dev", regions=["us-east-1"])
    alpha = Cluster.objects.create(name="alpha", account=owner, region="us-east-1")
    beta = Cluster.objects.create(name="beta", account=shared, region="us-east-1")
    yield owner, shared, alpha, beta
    forget_default()


def test_the_units_of_a_shared_reservation_are_attributed_per_cluster_and_account(world, clock, config, provider, fleet):
    owner, shared, alpha, beta = fleet
    rid = world.add_reservation("m5.large", worlds.ZONE, 6)
    world.share(rid, SHARED)
    world.share(rid, OUTSIDE)
    in_shared, in_outside = provider_in(world, config, clock, SHARED), provider_in(world, config, clock, OUTSIDE)
    alpha_nodes = [node_on(alpha, launch_into(provider, rid), f"alpha-{i}") for i in range(2)]
    unclustered = launch_into(provider, rid)  # the owner's instance no cluster knows (a console launch)
    beta_node = node_on(beta, launch_into(in_shared, rid), "beta-0")
    launch_into(in_outside, rid)  # an account outside the fleet
    with cluster_scope(alpha):
        assert sync_reservations(provider, now=clock()).errors == []
    with cluster_scope(beta):
        assert sync_reservations(in_shared, now=clock()).errors == []  # the shared account sees it too
    row = CapacityReservation.objects.get(reservation_id=rid)
    assert row.owner_account == owner and (row.total_instance_count, row.available_instance_count) == (6, 1)
    assert ReservationVisibility.objects.get(reservation=row, account=shared).shared

    counts = ledger.record_use({OWNER: provider, SHARED: in_shared}, now=clock())

    assert counts["uses_recorded"] == 1
    use = ReservationUse.objects.get(reservation=row)
    assert use.used == 5 and use.clusters == {"alpha": 2, "beta": 1}
    assert use.our_accounts == {OWNER: 1} and use.other_accounts == {OUTSIDE: 1} and use.unknown == 0
    assert world.calls_of("GetCapacityReservationUsage")  # asked as the owner
    assert alpha_nodes and beta_node and unclustered

    # Only the owner reads the usage: the account it is shared with is told the reservation is not found.
    from scheduling.adapters.ec2.interface import CloudAPIError

    with pytest.raises(CloudAPIError) as refused:
        in_shared.capacity_reservation_usage(rid)
    assert refused.value.code == "InvalidCapacityReservationId.NotFound"
    assert provider.capacity_reservation_usage(rid) == {OWNER: 3, SHARED: 1, OUTSIDE: 1}

    # Seen from the shared account alone (the owner's instances and usage unread), the rest is unknown.
    ledger.record_use({SHARED: in_shared}, now=clock())
    latest = ReservationUse.objects.order_by("-pk").first()
    assert latest.clusters == {"beta": 1} and latest.other_accounts == {} and latest.unknown == 4


def second_cluster_world(provider, reservation_id: str, pod: str) -> None:
    """In the open scope: a class selecting the same reservation, a NodePool as worlds.build makes it, one pod."""
    from reservations.models import EC2NodeClass
    from scheduling.models import Mode, NodePool

    nc = EC2NodeClass.objects.create(name="default", capacity_reservation_selector_terms=[{"id": reservation_id}],
                                     spec=worlds.launchable_spec(provider))
    NodePool.objects.create(name="general", node_class=nc, mode=Mode.CONTROL, requirements=[
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [worlds.ZONE]}])
    worlds.pending_pod(pod)


def running_instances(raw_ec2) -> list[dict]:
    answer = raw_ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["running"]}])
    return [i for r in answer["Reservations"] for i in r["Instances"]]


def test_two_clusters_planning_into_the_last_unit_at_once_launch_it_once(
        transactional_db, world, clock, make_provider, raw_ec2, settings, monkeypatch):
    from scheduling.loop import provisioning
    from scheduling.loop.simulated import SimulatedCluster
    from scheduling.models import NodeClaim

    settings.KARPWEB_MODE = "control"
    forget_default()
    account = AwsAccount.objects.create(account_id=OWNER, name="ml-prod", regions=["us-east-1"])
    alpha = Cluster.objects.create(name="alpha", account=account, region="us-east-1")
    beta = Cluster.objects.create(name="beta", account=account, region="us-east-1")
    providers = {alpha.name: make_provider(), beta.name: make_provider()}
    with cluster_scope(alpha):
        rid = worlds.build(world, providers["alpha"], clock(), units=1, pods=1)
    with cluster_scope(beta):
        second_cluster_world(providers["beta"], rid, "beta-app")
        assert sync_reservations(providers["beta"], now=clock()).errors == []
    # Both runs read their world (one free unit) before either holds it: each then asks the ledger.
    planned = threading.Barrier(2, timeout=60)
    hold_units, first_call = ledger.hold_units, threading.local()

    def hold_after_both_planned(*args, **kwargs):
        if not getattr(first_call, "done", False):
            first_call.done = True
            planned.wait()
        return hold_units(*args, **kwargs)

    monkeypatch.setattr(ledger, "hold_units", hold_after_both_planned)
    results, errors = {}, []

    def run(cluster):
        try:
            with cluster_scope(cluster):
                results[cluster.name] = provisioning.provision(providers[cluster.name], SimulatedCluster(), now=clock())
        except Exception as exc:  # reported below, with the thread's name
            errors.append(f"{cluster.name}: {exc!r}")
        finally:
            connection.close()

    threads = [threading.Thread(target=carry(run), args=(c,)) for c in (alpha, beta)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []

    holds = list(ReservationHold.objects.all())
    assert len(holds) == 1 and holds[0].state == ReservationHold.State.LAUNCHED
    winner = holds[0].cluster.name
    loser = ({"alpha", "beta"} - {winner}).pop()
    assert results[winner]["launched"] == 1 and results[loser]["launched"] == 1  # the loser on-demand, re-planned
    claims = {c.cluster.name: c for c in NodeClaim.objects.fleet().select_related("cluster")}
    assert (claims[winner].capacity_type, claims[winner].reservation_label) == ("reserved", rid)
    assert (claims[loser].capacity_type, claims[loser].reservation_label) == ("on-demand", "")
    instances = running_instances(raw_ec2)
    assert len(instances) == 2
    assert [i.get("CapacityReservationId") for i in instances].count(rid) == 1  # one launched into it, not two
    assert world.reservation(rid)["AvailableInstanceCount"] == 0
    assert not ReservationContention.objects.exists()  # nobody met a full reservation
    # The loser had planned into the reservation too (the race was real), and the ledger said no.
    from scheduling.models import Decision

    refused = Decision.objects.fleet().get(cluster__name=loser, outcome=Decision.Outcome.SKIPPED)
    assert f"reservation {rid}" in refused.reason and "another cluster of the fleet holds" in refused.reason
    forget_default()


def test_a_launch_refused_on_units_the_ledger_called_free_is_contention_explained_at_the_next_sync(
        world, clock, config, provider, raw_ec2, settings, viewer_client):
    from django.urls import reverse

    from scheduling.loop import provisioning
    from scheduling.loop.simulated import SimulatedCluster
    from scheduling.metrics import KarpwebCollector

    settings.KARPWEB_MODE = "control"
    forget_default()
    account = AwsAccount.objects.create(account_id=OWNER, name="ml-prod", regions=["us-east-1"])
    alpha = Cluster.objects.create(name="alpha", account=account, region="us-east-1")
    with cluster_scope(alpha):
        rid = worlds.build(world, provider, clock(), units=2, pods=1)
    world.share(rid, OUTSIDE)
    outside = provider_in(world, config, clock, OUTSIDE)
    taken = [launch_into(outside, rid) for _ in range(2)]  # after the sync: karpweb still counts 2 free
    assert len(taken) == 2 and world.reservation(rid)["AvailableInstanceCount"] == 0

    clock.advance(seconds=5)
    with cluster_scope(alpha):
        counts = provisioning.provision(provider, SimulatedCluster(), now=clock())

    assert counts["launch_failures"] == 1 and counts["launched"] == 0
    contention = ReservationContention.objects.get()
    assert (contention.reservation.reservation_id, contention.cluster, contention.units_wanted) == (rid, alpha, 1)
    assert contention.ledger_free == 2 and contention.error_code == "ReservationCapacityExceeded"
    assert contention.explained_at is None and contention.taken_by_text == "not known until the next sync"
    assert ReservationHold.objects.get().state == ReservationHold.State.RELEASED  # the failed launch gave it back
    [family] = [f for f in KarpwebCollector().collect() if f.name == "karpweb_reservation_contention"]
    assert [(s.name, s.labels, s.value) for s in family.samples if s.name.endswith("_total")] == [
        ("karpweb_reservation_contention_total", {"reservation": rid, "cluster": "alpha"}, 1)]

    clock.advance(minutes=1)
    with cluster_scope(alpha):
        assert sync_reservations(provider, now=clock()).errors == []
        ledger.record_use({OWNER: provider}, now=clock())

    contention.refresh_from_db()
    assert contention.explained_at == clock()
    assert contention.taken_by["otherAccounts"] == {OUTSIDE: 2} and contention.taken_by["clusters"] == {}
    assert contention.taken_by_text == f"account {OUTSIDE}: 2"
    answer = viewer_client.get(f"/api/v1/capacity-reservations/{rid}/contentions/")
    assert answer.status_code == 200, answer.content
    [row] = answer.json()["results"] if "results" in answer.json() else answer.json()
    assert (row["cluster"], row["ledgerFree"], row["errorCode"]) == ("alpha", 2, "ReservationCapacityExceeded")
    assert row["takenBy"]["otherAccounts"] == {OUTSIDE: 2}
    uses = viewer_client.get(f"/api/v1/capacity-reservations/{rid}/uses/").json()
    [use] = uses["results"] if "results" in uses else uses
    assert use["otherAccounts"] == {OUTSIDE: 2} and use["used"] == 2
    page = viewer_client.get(reverse("reservations:detail", args=[rid])).content.decode()
    assert 'id="fleet-ledger"' in page and f"account {OUTSIDE}: 2" in page and "ReservationCapacityExceeded" in page
    forget_default()


def shared_race_fleet(world, clock, config, make_provider):
    """Alpha (the owner's account) with one pending pod and beta (the account the reservation is shared
    with) with two, both selecting one reservation of two free units; both synced once."""
    forget_default()
    owner = AwsAccount.objects.create(account_id=OWNER, name="ml-prod", regions=["us-east-1"])
    shared = AwsAccount.objects.create(account_id=SHARED, name="ml-dev", regions=["us-east-1"])
    alpha = Cluster.objects.create(name="alpha", account=owner, region="us-east-1")
    beta = Cluster.objects.create(name="beta", account=shared, region="us-east-1")
    providers = {"alpha": make_provider(), "beta": provider_in(world, config, clock, SHARED)}
    with cluster_scope(alpha):
        rid = worlds.build(world, providers["alpha"], clock(), units=2, pods=1)
    world.share(rid, SHARED)
    with cluster_scope(beta):
        from scheduling.adapters.ec2.sync import sync_catalogue

        sync_catalogue(providers["beta"], now=clock())
        second_cluster_world(providers["beta"], rid, "beta-app-0")
        worlds.pending_pod("beta-app-1")
        assert sync_reservations(providers["beta"], now=clock()).errors == []
    return alpha, beta, providers, rid


def in_thread(target):
    """Run `target` in a thread, in the scope open now, with its own database connection."""
    errors = []

    def run():
        try:
            target()
        except Exception as exc:  # reported by the caller
            errors.append(repr(exc))
        finally:
            connection.close()

    thread = threading.Thread(target=carry(run))
    thread.start()
    return thread, errors


def wait_until(condition, what: str, seconds: float = 30) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.02)


@pytest.mark.parametrize("order", ["sync-read-before-the-launch", "launch-before-the-sync-read"])
def test_a_slow_ec2_answer_never_gives_a_launched_unit_away_again(
        transactional_db, world, clock, config, make_provider, raw_ec2, settings, order):
    """Issue #46: alpha launches into a shared reservation while beta's account syncs it, one of the two
    EC2 answers held back (the sync's read, or alpha's launch). Whatever the order, the ledger then
    gives beta one unit, not two (nor none), beta launches one into the reservation and one on-demand,
    and EC2 refuses nothing: no unit held or launched twice."""
    from scheduling.loop import provisioning
    from scheduling.loop.simulated import SimulatedCluster
    from scheduling.models import NodeClaim

    settings.KARPWEB_MODE = "control"
    alpha, beta, providers, rid = shared_race_fleet(world, clock, config, make_provider)

    def provision(cluster):
        with cluster_scope(cluster):
            return provisioning.provision(providers[cluster.name], SimulatedCluster(), now=clock())

    def beta_sync():
        with cluster_scope(beta):
            assert sync_reservations(providers["beta"], now=clock()).errors == []
            ledger.record_use({OWNER: providers["alpha"], SHARED: providers["beta"]}, now=clock())

    results = {}
    if order == "sync-read-before-the-launch":
        # Beta's sync reads two free units; its answer comes after alpha's launch landed and was counted.
        world.faults.delay("DescribeCapacityReservations", seconds=60)
        thread, errors = in_thread(beta_sync)
        wait_until(lambda: world.faults.held == ["DescribeCapacityReservations"], "the sync read the reservation")
        results["alpha"] = provision(alpha)
        assert world.reservation(rid)["AvailableInstanceCount"] == 1
        world.faults.release()
    else:
        # Alpha's launch lands at EC2; beta's sync reads one free unit before alpha hears back.
        world.faults.delay("CreateFleet", seconds=60)
        thread, errors = in_thread(lambda: results.update(alpha=provision(alpha)))
        wait_until(lambda: world.faults.held == ["CreateFleet"], "alpha's launch reached EC2")
        beta_sync()
        world.faults.release()
    thread.join(120)
    assert errors == [] and results["alpha"]["launched"] == 1

    with cluster_scope(beta):
        row = CapacityReservation.objects.get(reservation_id=rid)
        assert ledger.ledger_free(row, beta.pk, clock()) == 1  # EC2's one free unit: not 2, not 0
        counts = provision(beta)
    assert counts["launched"] == 2 and counts["launch_failures"] == 0
    assert not ReservationContention.objects.exists()  # EC2 refused nothing
    launched = ReservationHold.objects.filter(state=ReservationHold.State.LAUNCHED)
    assert sorted(launched.values_list("cluster__name", flat=True)) == ["alpha", "beta"]
    assert len(set(launched.values_list("instance_id", flat=True))) == 2
    instances = running_instances(raw_ec2) + running_instances(providers["beta"].ec2)  # both accounts'
    assert [i.get("CapacityReservationId") for i in instances].count(rid) == 2 and len(instances) == 3
    assert world.reservation(rid)["AvailableInstanceCount"] == 0
    beta_claims = NodeClaim.objects.fleet().filter(cluster=beta)
    assert sorted(beta_claims.values_list("capacity_type", flat=True)) == ["on-demand", "reserved"]

    # The next syncs read EC2 after both launches: the counts hold them, the holds end, nothing is subtracted twice.
    clock.advance(seconds=30)
    for cluster in (alpha, beta):
        with cluster_scope(cluster):
            assert sync_reservations(providers[cluster.name], now=clock()).errors == []
    ledger.record_use({OWNER: providers["alpha"], SHARED: providers["beta"]}, now=clock())
    assert not ReservationHold.objects.filter(state=ReservationHold.State.LAUNCHED).exists()
    row = CapacityReservation.objects.fleet().get(reservation_id=rid)
    assert (row.available_instance_count, ledger.ledger_free(row, alpha.pk, clock())) == (0, 0)
    forget_default()


def test_each_reservation_lists_its_instances_as_ec2_reports_them(world, clock, config, provider, fleet, viewer_client):
    """#48: the instances the ledger's DescribeInstances reads, kept per reservation (instance, node,
    cluster, account, since) for its page and API; one gone from EC2 goes from the list."""
    owner, shared, alpha, beta = fleet
    rid = world.add_reservation("m5.large", worlds.ZONE, 5)
    world.share(rid, SHARED)
    world.share(rid, OUTSIDE)
    in_shared, in_outside = provider_in(world, config, clock, SHARED), provider_in(world, config, clock, OUTSIDE)
    on_alpha = launch_into(provider, rid)
    node_on(alpha, on_alpha, "alpha-0")
    unclustered = launch_into(provider, rid)
    on_beta = launch_into(in_shared, rid)
    node_on(beta, on_beta, "beta-0")
    launch_into(in_outside, rid)  # EC2 shows it to its own account only
    with cluster_scope(alpha):
        sync_reservations(provider, now=clock())
    describes = len(world.calls_of("DescribeInstances"))

    counts = ledger.record_use({OWNER: provider, SHARED: in_shared}, now=clock())

    assert len(world.calls_of("DescribeInstances")) - describes == 2  # one per account, as before: none added
    assert counts["reservation_instances"] == 3
    answer = viewer_client.get(f"/api/v1/capacity-reservations/{rid}/instances/")
    assert answer.status_code == 200, answer.content
    rows = {row["instanceId"]: row for row in answer.json()["results"]}
    assert set(rows) == {on_alpha, unclustered, on_beta}
    assert (rows[on_alpha]["node"], rows[on_alpha]["cluster"], rows[on_alpha]["account"]) == ("alpha-0", "alpha", OWNER)
    assert (rows[on_beta]["node"], rows[on_beta]["cluster"], rows[on_beta]["account"]) == ("beta-0", "beta", SHARED)
    assert (rows[unclustered]["node"], rows[unclustered]["cluster"]) == ("", None)
    assert all(row["since"] and row["state"] == "running" and not row["openMatching"] for row in rows.values())

    page = viewer_client.get(f"/reservations/{rid}/").content.decode()
    section = page[page.index('id="instances"'):]
    section = section[:section.index("</section>")]
    assert all(iid in section for iid in rows) and "alpha-0" in section and "beta-0" in section
    assert "Instances in it, as EC2 reports them (3)" in section

    provider.ec2.terminate_instances(InstanceIds=[on_alpha])
    ledger.record_use({OWNER: provider, SHARED: in_shared}, now=clock())
    again = viewer_client.get(f"/api/v1/capacity-reservations/{rid}/instances/").json()["results"]
    assert {row["instanceId"] for row in again} == {unclustered, on_beta}
    # An account that does not answer keeps what it last listed.
    ledger.record_use({OWNER: provider}, now=clock())
    assert {row["instanceId"] for row in viewer_client.get(
        f"/api/v1/capacity-reservations/{rid}/instances/").json()["results"]} == {unclustered, on_beta}
