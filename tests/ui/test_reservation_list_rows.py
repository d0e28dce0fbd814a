"""The reservations list's table is a PlainRowsTable (karpweb/tables.py): its rows, written in one pass from
plain cell values, equal django-tables2's own rendering of the same table, for every kind of cell the list
has (the ID link, type and matching labels, a state with its countdown to a start, the use bar, idle cost
priced, unpriced, not started or ended, end dates, an owner or none, every note or none, escaping), and
the totals footer stays."""

import datetime

import pytest
from django.utils import timezone

from karpweb.views_generic import PAGE_SIZE
from reservations.models import CapacityReservation, UtilizationHour
from reservations.tables import CapacityReservationTable
from reservations.views import ReservationListView
from scheduling.models import CapacityType
from tests.factories.reservations import CapacityReservationFactory
from tests.support.plain_rows import HOSTILE, configured, same_rows, same_table
from tests.ui.test_decisions_page import rows
from tests.ui.test_list_money_and_use import price

pytestmark = pytest.mark.django_db
State, Type, Match = CapacityReservation.State, CapacityReservation.ReservationType, CapacityReservation.MatchCriteria


def low_use(reservation, now):
    """A full day of hourly use at nothing: "low use"."""
    for hours_ago in range(26):
        hour = (now - datetime.timedelta(hours=hours_ago)).replace(minute=0, second=0, microsecond=0)
        UtilizationHour.objects.create(reservation=reservation, hour=hour, samples=1, used=0, available=4, total=4,
                                       share_sum=0, share_samples=1, first_sampled_at=hour)


def reservations():
    now, hour = timezone.now(), datetime.timedelta(hours=1)
    price("m5.large", "us-east-1a", CapacityType.ON_DEMAND, 0.096)
    price("p5.48xlarge", "us-east-1a", CapacityType.ON_DEMAND, 55.04)
    low_use(CapacityReservationFactory(reservation_id="cr-0idle", available_instance_count=4, total_instance_count=4), now)
    CapacityReservationFactory(reservation_id="cr-0full", available_instance_count=0, total_instance_count=3,
                               instance_match_criteria=Match.OPEN, owner_id="")
    CapacityReservationFactory(reservation_id="cr-0block", capacity_block=True, instance_type="p5.48xlarge",
                               ultraserver_type="u-p6e-gb200x72", interruptible=True, available_instance_count=1)
    CapacityReservationFactory(reservation_id="cr-0committed", committed_instance_count=2,
                               commitment_end_date=now + 30 * 24 * hour, end_date=now + 90 * 24 * hour)
    CapacityReservationFactory(reservation_id="cr-0scheduled", state=State.SCHEDULED, start_date=now + 5 * hour + 7 * 60 * hour / 3600)
    CapacityReservationFactory(reservation_id="cr-0pending", state=State.PENDING, start_date=None)
    CapacityReservationFactory(reservation_id="cr-0expired", state=State.EXPIRED, end_date=now - hour)
    CapacityReservationFactory(reservation_id="cr-0cancelled", state=State.CANCELLED)
    CapacityReservationFactory(reservation_id="cr-0empty", total_instance_count=0, available_instance_count=0,
                               instance_type="x9.huge", state="")
    CapacityReservationFactory(reservation_id=f"cr-0{HOSTILE}", instance_type=HOSTILE, availability_zone=HOSTILE,
                               owner_id=HOSTILE[:12])
    for index in range(PAGE_SIZE + 3):
        CapacityReservationFactory(reservation_id=f"cr-1{index:03}", available_instance_count=index % 5)


def table_for(params):
    return configured(CapacityReservationTable, ReservationListView, "/reservations/", params)


@pytest.mark.parametrize("params", [{}, {"page": "2"}, {"sort": "-reservation_id"}, {"sort": "utilization"},
                                    {"sort": "-end_date"}, {"sort": "state", "page": "2"}])
def test_plain_rows_are_django_tables2s_rows(db, params):
    reservations()
    _, table = table_for(params)
    same_rows(table)


def test_the_whole_table_is_django_tables2s_table(db):
    """Header, sort links, rows, the totals footer and pagination, as django-tables2's own template renders them."""
    reservations()
    request, table = table_for({"sort": "reservation_id", "page": "1"})
    plain = same_table(request, table)
    assert len(rows(plain)) == PAGE_SIZE and 'id="reservation-totals">' in plain and 'id="idle-cost-total">' in plain
    assert '<a href="?sort=-reservation_id&amp;page=1">' in plain


def test_the_page_shows_every_kind_of_cell(viewer_client, db):
    reservations()
    shown = {cells[0]: cells for cells in rows(viewer_client.get("/reservations/", {"per_page": "100"}).content.decode())}
    idle = shown['<a class="id" href="/reservations/cr-0idle/">cr-0idle</a>']
    assert idle[1:4] == ["m5.large", "us-east-1a", "Default"] and idle[7:9] == ["0%", '$0.3840/h <span class="muted idle-source">(on-demand list price)</span>']
    assert '<span class="badge warn"' in idle[11] and ">low use<" in idle[11]
    full = shown['<a class="id" href="/reservations/cr-0full/">cr-0full</a>']
    assert full[5] == "Open" and full[6].endswith("3 / 0 / 3</div>") and full[7:9] == ["100%", '$0.00/h <span class="muted idle-source">(on-demand list price)</span>'] \
        and full[10:] == ["—", ""]
    block = shown['<a class="id" href="/reservations/cr-0block/">cr-0block</a>']
    assert block[3] == "Capacity Block" and ">interruptible<" in block[11] and ">UltraServer<" in block[11]
    assert "committed 2, ends in 29d" in shown['<a class="id" href="/reservations/cr-0committed/">cr-0committed</a>'][11]
    scheduled = shown['<a class="id" href="/reservations/cr-0scheduled/">cr-0scheduled</a>']
    assert scheduled[4].startswith('scheduled <span class="muted" title="') and "starts in 5h 0" in scheduled[4]
    assert scheduled[8] == '<span class="muted">not started</span>'
    assert shown['<a class="id" href="/reservations/cr-0expired/">cr-0expired</a>'][8] == '<span class="muted">ended</span>'
    empty = shown['<a class="id" href="/reservations/cr-0empty/">cr-0empty</a>']
    assert empty[4] == "—" and empty[7] == "0%"
    odd = shown['<a class="id" href="/reservations/cr-0%3Cb%3E&amp;%22&#x27;/">cr-0&lt;b&gt;&amp;&quot;&#x27;</a>']
    assert odd[1] == odd[2] == "&lt;b&gt;&amp;&quot;&#x27;" and odd[8].startswith("— ")  # no known price, said
    assert "(on-demand list price: no on-demand price known for this type)" in odd[8]
