"""Two removals of one cluster at once (scheduling/loop/removal.py): one removes it, the other waits
(PostgreSQL: the row lock; SQLite: its one writer) and then finds no cluster; one audit entry,
nothing done twice."""

import threading

from django.db import connection

from fleet.models import Cluster
from fleet.scope import default_cluster, forget_default
from scheduling.loop.removal import UnknownCluster, remove_cluster
from scheduling.models import AuditEntry


def test_two_removals_at_once_act_once(transactional_db, make_account, make_cluster):
    forget_default()
    default_cluster()
    make_cluster("beta", make_account("222222222222", "ml-dev"))
    forget_default()
    barrier, outcomes = threading.Barrier(2), []

    def remove():
        try:
            barrier.wait()
            remove_cluster("beta", user=None, source="cli")
            outcomes.append("removed")
        except UnknownCluster:
            outcomes.append("unknown")
        finally:
            connection.close()

    threads = [threading.Thread(target=remove) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["removed", "unknown"]
    assert not Cluster.objects.filter(name="beta").exists()
    assert AuditEntry.objects.fleet().filter(action=AuditEntry.Action.DELETE, object_repr="beta").count() == 1
    forget_default()
