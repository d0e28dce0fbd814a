"""Named leases claimed with a conditional UPDATE (as healthchecks claims work): of two workers
asking at once, exactly one gets `True`."""

import datetime
import os
import socket
import uuid

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from scheduling.models import Lease

DEFAULT_TTL = datetime.timedelta(minutes=5)


def holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def acquire(name: str, holder: str, ttl: datetime.timedelta = DEFAULT_TTL) -> bool:
    now = timezone.now()
    try:
        with transaction.atomic():
            Lease.objects.get_or_create(name=name, defaults={"expires_at": now})
    except IntegrityError:
        pass  # another worker created it first; the UPDATE below decides who holds it
    claimed = Lease.objects.filter(name=name).filter(Q(expires_at__lte=now) | Q(holder=holder)).update(
        holder=holder, expires_at=now + ttl
    )
    return claimed == 1


def holder(name: str) -> str:
    """Who holds (or last held without releasing) the lease; "" when it was released or never taken."""
    return Lease.objects.filter(name=name).values_list("holder", flat=True).first() or ""


def release(name: str, holder: str) -> None:
    Lease.objects.filter(name=name, holder=holder).update(holder="", expires_at=timezone.now())
