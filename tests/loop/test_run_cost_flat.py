"""A provisioning run and a lifecycle pass cost as many SQL queries at 2,000 nodes as at 100, and
neither rebuilds the world from the database (issue #46 item 8: at 5,000 nodes a run had grown to
seconds). The runs plan from the watch process's kept world, as they do in `manage.py watch`.

It counts, it does not time: speed is measured by scripts/reaction_bench.py (docs/benchmark.md).
A query whose count stays flat can still scan more rows as the cluster grows (the totals' join was
one such: a plan, not a count); the benchmark is what finds those."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from fleet.scope import default_cluster
from scheduling import world as database_world
from scheduling.loop import steps
from scheduling.loop.keptworld import KeptWorld
from scheduling.loop.runs import run_step, scope_for
from scheduling.models import TaskRun
from tests.support.reaction_world import add_cluster, seed_reaction_world

SMALL, LARGE = 100, 2_000


def run_costs(monkeypatch) -> dict[str, tuple[int, int]]:
    """(queries, full reads of every pod or node) of one provisioning run and one lifecycle pass,
    each on the same world (rolled back after it)."""
    kept = KeptWorld()
    kept.load()
    reads = []
    for name in ("pods", "registered_nodes"):  # what a rebuild of the world from the database reads
        read = getattr(database_world, name)
        monkeypatch.setattr(database_world, name, lambda *args, _read=read, _name=name, **kwargs:
                            reads.append(_name) or _read(*args, **kwargs))
    costs = {}
    for name, step in (("provision", steps.provision), ("lifecycle", steps.lifecycle)):
        with transaction.atomic():
            reads.clear()
            with CaptureQueriesContext(connection) as queries, scope_for(default_cluster()):  # as tasks.run_on
                run = run_step(name, lambda: step(world_at=kept.world))
            assert run.status == TaskRun.Status.SUCCEEDED, run.error
            costs[name] = (len(queries), len(reads))
            transaction.set_rollback(True)
    monkeypatch.undo()
    return costs


@pytest.mark.django_db
def test_provisioning_run_and_lifecycle_pass_do_not_grow_with_the_cluster(settings, monkeypatch):
    settings.KARPWEB_MODE = "control"
    seed_reaction_world(SMALL)
    small = run_costs(monkeypatch)
    add_cluster(LARGE - SMALL, in_flight=0, pending=0, first=SMALL)
    large = run_costs(monkeypatch)
    assert small["provision"][0] > 0 and small["lifecycle"][0] > 0  # the runs did run
    assert large == small, f"queries and world reads at {SMALL} nodes {small}, at {LARGE} nodes {large}"
    assert small["provision"][1] == small["lifecycle"][1] == 0, "a run rebuilt the world from the database"
