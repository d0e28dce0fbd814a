"""The user fixtures (viewer, operator, nobody, *_client) and demo_world live in tests/conftest.py,
shared with the API's tests."""

import pytest


@pytest.fixture
def first_cluster_shown(viewer_client):
    """The viewer's pages show the fleet's first cluster (what-if plans one cluster's world: in the demo
    fleet's all-clusters view it asks for one)."""
    from fleet.scope import default_cluster

    viewer_client.get("/", {"cluster": default_cluster().name})
    return default_cluster()
