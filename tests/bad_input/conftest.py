"""Bad input everywhere a user can type: wrong types, oversized and hostile values. Each answer is
a field error (never a 500), nothing is stored, and what comes back is escaped."""

import hashlib
import json

import pytest
from django.core import serializers as django_serializers

from reservations.models import CapacityReservation, EC2NodeClass
from scheduling.models import AuditEntry, NodePool
from tests.factories.reservations import CapacityReservationFactory, EC2NodeClassFactory
from tests.factories.scheduling import DecisionFactory, NodeFactory, NodePoolFactory, PodFactory

# Strings an attacker, a typo or a copy-paste accident sends.
SCRIPT = '<script>alert("x")</script>'
HOSTILE_STRINGS = [
    SCRIPT,
    '"><img src=x onerror=alert(1)>',
    "' OR '1'='1' --",
    "1; DROP TABLE reservations_capacityreservation; --",
    "a\x00b",
    "\x00",
    "x" * 100_000,
    "😀 ünïcödé \u202e\u200b",
    "{{ 7*7 }}{% debug %}",
    "../../../../etc/passwd",
    "%00%27%3C",
    "-1",
    "1e309",
    "99999999999999999999999999999999",
    "",
    " ",
]
# The values a filter must survive: markup, SQL, NUL, oversized, unicode, numbers.
FILTER_VALUES = [SCRIPT, "' OR '1'='1' --", "a\x00b", "x" * 20_000, "😀\u202e", "-1", "99999999999999999999", "1e309", ""]
# JSON values of every wrong type, and the numbers and nestings that break parsers.
WRONG_TYPES = [None, True, 0, -1, 1.5, 10**30, "text", [], {}, [1, 2], {"a": 1}, [[[[]]]]]


def world():
    """A small world every page and endpoint has something to show for."""
    node_class = EC2NodeClassFactory(name="default", capacity_reservation_selector_terms=[{"tags": {"team": "web"}}],
                                     resource_version="3")
    pool = NodePoolFactory(name="web", node_class=node_class)
    reservation = CapacityReservationFactory(reservation_id="cr-0abc0abc0abc0abc0")
    node = NodeFactory(name="node-1.test.internal", node_pool=pool, reservation=reservation)
    PodFactory(name="web-1", node=node, node_name=node.name)
    PodFactory(name="web-2")
    DecisionFactory(node_pool=pool, reservation=reservation)
    return {"node_class": node_class, "pool": pool, "reservation": reservation}


@pytest.fixture
def small_world(db):
    return world()


def stored_state() -> str:
    """What a write could change: the editable rows and the audit log, as one digest."""
    rows = list(EC2NodeClass.objects.order_by("pk")) + list(NodePool.objects.order_by("pk")) + list(
        CapacityReservation.objects.order_by("pk"))
    data = django_serializers.serialize("json", rows) + json.dumps(AuditEntry.objects.count())
    return hashlib.sha256(data.encode()).hexdigest()


@pytest.fixture
def unchanged(small_world):
    """Call it at the end of a test: nothing was stored."""
    before = stored_state()
    audit = AuditEntry.objects.count()

    def check():
        assert AuditEntry.objects.count() == audit, "an audit entry was written"
        assert stored_state() == before, "a row changed"

    return check


def assert_escaped(body: bytes) -> None:
    assert b"<script>alert(" not in body and b"<img src=x" not in body, "hostile markup came back unescaped"
