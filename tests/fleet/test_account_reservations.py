"""An account's page lists the reservations it sees (#48): those it owns, with the accounts they are shared
with, and those shared with it, with their owner, each linked; on the demo fleet, whose reservation 0010
is owned by the first account and shared with the second."""

import re

import pytest

from fleet.models import AwsAccount
from scheduling.demo import ACCOUNT, SECOND_ACCOUNT, SHARED_RESERVATION, reservation_id
from reservations.models import CapacityReservation

pytestmark = pytest.mark.django_db


def section(page: str, name: str) -> str:
    return re.search(rf'<section class="card" id="account-{name}">(.*?)</section>', page, re.S).group(1)


def test_each_account_lists_its_owned_and_shared_reservations(demo_world, viewer_client):
    shared = CapacityReservation.objects.get(reservation_id=reservation_id(SHARED_RESERVATION))
    owner, other = AwsAccount.objects.get(account_id=ACCOUNT), AwsAccount.objects.get(account_id=SECOND_ACCOUNT)

    page = viewer_client.get(owner.get_absolute_url()).content.decode()
    owned = section(page, "owned")
    for reservation in CapacityReservation.objects.filter(owner_account=owner):
        assert f'href="{reservation.get_absolute_url()}"' in owned, reservation.reservation_id
    row = re.search(rf"<tr><td><a class=\"id\" href=\"{re.escape(shared.get_absolute_url())}\".*?</tr>", owned, re.S).group(0)
    assert f'href="{other.get_absolute_url()}"' in row  # shared with the second account, linked

    page = viewer_client.get(other.get_absolute_url()).content.decode()
    shared_in = section(page, "shared")
    assert f'href="{shared.get_absolute_url()}"' in shared_in and f'href="{owner.get_absolute_url()}"' in shared_in
    assert "1 shared with it" in page and 'href="#account-shared"' in page
