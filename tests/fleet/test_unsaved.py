"""Making an unsaved Kubernetes-side object (a what-if's rows, a table's) needs no database and no
cluster: the cluster is given as the row is written (fleet.managers)."""

from scheduling.models import Decision, NodePool, Pod


def test_unsaved_objects_need_no_database():
    # No database fixture: a query here would fail the test ("Database access not allowed").
    pool = NodePool(name="web")
    decision = Decision(kind="launch", mode="observe", subject="pod a/b", reason="r", node_pool=pool)
    assert pool.cluster_id is None and decision.cluster_id is None and Pod(name="p").cluster_id is None
