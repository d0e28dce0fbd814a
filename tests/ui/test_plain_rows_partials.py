"""The lists whose rows are PlainRowsTables answer htmx with their table alone: the same table the full page
shows, sort links and rows included."""

import re

import pytest

from tests.factories.reservations import CapacityReservationFactory, EC2NodeClassFactory
from tests.factories.scheduling import NodeClaimFactory, PodFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["/nodeclaims/", "/pods/", "/reservations/", "/nodeclasses/", "/fleet/accounts/"])
def test_the_htmx_partial_is_the_pages_table(viewer_client, db, url):
    NodeClaimFactory(name="claim-1", node_name="node-1")
    PodFactory(name="web-1", node_name="node-1")
    CapacityReservationFactory(reservation_id="cr-0partial")
    EC2NodeClassFactory(name="default")
    params = {"sort": "-name"} if url != "/reservations/" else {"sort": "-reservation_id"}
    page = viewer_client.get(url, params).content.decode()
    response = viewer_client.get(url, params, headers={"HX-Request": "true"})
    partial = response.content.decode()
    assert response.status_code == 200 and response.templates[0].name == "htmx/table.html" and "<html" not in partial
    table = re.compile(r"<table.*?</table>", re.S)
    assert table.search(partial).group(0) == table.search(page).group(0) and "<tbody" in partial and "<td>" in partial
