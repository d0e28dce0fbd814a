"""The quick start's embedded broker (no REDIS_URL; karpweb/settings.py): kombu's SQLAlchemy
transport keeps every delivered message in its SQLite file (marked invisible, never read again), some
3-4 MB an hour of the loop's traffic. The EC2 step deletes those older than an hour."""

import datetime
import sqlite3

from django.conf import settings

KEEP_DELIVERED = datetime.timedelta(hours=1)


def prune_delivered(now=None) -> dict:
    """Delete the embedded broker's delivered messages older than KEEP_DELIVERED; {} with a real broker."""
    path = settings.CELERY_BROKER_FILE
    if settings.REDIS_URL or not path.exists():
        return {}
    # The transport stamps a message with the local, naive time it was taken (kombu's model:
    # `onupdate=datetime.now`), stored by SQLAlchemy as text that sorts as time does.
    cutoff = (datetime.datetime.now() - KEEP_DELIVERED).strftime("%Y-%m-%d %H:%M:%S.%f")
    connection = sqlite3.connect(path, timeout=30)  # waits for the worker's own transaction, as kombu does
    try:
        with connection:
            deleted = connection.execute("DELETE FROM kombu_message WHERE visible = 0 AND timestamp < ?", (cutoff,)).rowcount
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        deleted = 0  # nothing was ever sent
    finally:
        connection.close()
    return {"broker_messages_pruned": deleted}


def declare_queues() -> list[str]:
    """Create the embedded broker's queue rows before the worker and its beat start ([] with a real broker).
    Both would otherwise insert the `celery` row at once; the loser's session fails on the unique name and kombu's
    transport never rolls it back, so beat could send no task again (seen in a quick start: 13 runs, then none)."""
    if settings.REDIS_URL:
        return []
    from kombu import Connection, Queue

    from fleet.models import DEFAULT_QUEUE, Cluster, shard_queue

    names = sorted({shard_queue(shard) for shard in Cluster.objects.values_list("shard", flat=True)} | {DEFAULT_QUEUE})
    with Connection(settings.CELERY_BROKER_URL, transport_options=settings.EMBEDDED_BROKER_TRANSPORT_OPTIONS) as connection:
        for name in names:
            Queue(name, channel=connection.default_channel).declare()
    return names
