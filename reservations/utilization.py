"""Rolling raw utilization samples (one per reservation per sync) up into hours.

The charts and the low-utilization alarm read the hourly rows: a sync every 30 s writes 2,880
samples per reservation a day, and reading them on every page view does not scale. Each roll-up
recomputes whole hours from the raw samples and upserts them, so running it twice, or from two
workers at once, writes the same rows.
"""

import datetime
from collections import defaultdict

from django.conf import settings
from django.db.models import Avg, Case, Count, F, FloatField, Max, Min, Q, Sum, When
from django.db.models.functions import TruncHour

from reservations.models import ReservationUse, UtilizationHour, UtilizationSample, hour_of

# A sync early in an hour also closes the previous hour, whose last samples came after its last roll-up.
CLOSE_PREVIOUS_HOUR_WITHIN = datetime.timedelta(minutes=10)
UPSERT_BATCH = 1000


def roll_up_recent(now: datetime.datetime) -> int:
    """Roll up the current hour (and the previous one early in an hour): the loop's step after each sync."""
    return roll_up(since=now - CLOSE_PREVIOUS_HOUR_WITHIN)


def roll_up(since: datetime.datetime, sample_model=UtilizationSample, hour_model=UtilizationHour) -> int:
    """Recompute every hour from the one holding `since` onwards; returns how many hour rows were written.
    The models are parameters so the data migration can pass its historical ones."""
    share = Case(When(total__gt=0, then=F("used") * 1.0 / F("total")), output_field=FloatField())
    groups = (
        sample_model.objects.filter(sampled_at__gte=hour_of(since))
        .annotate(hour=TruncHour("sampled_at"))
        .order_by()
        .values("reservation_id", "hour")
        # Aliases differ from the field names: an alias `used` would shadow the column in `share`.
        .annotate(
            n=Count("id"), first=Min("sampled_at"), mean_used=Avg("used"), mean_available=Avg("available"),
            mean_total=Avg("total"), shares=Sum(share), shared=Count("id", filter=Q(total__gt=0)), peak=Max("used"),
        )
    )
    # The peak came later than the first roll-ups: an older (historical) model has no column for it.
    peak = any(field.name == "peak_used" for field in hour_model._meta.get_fields())
    rows = [
        hour_model(reservation_id=group["reservation_id"], hour=group["hour"], samples=group["n"],
                   first_sampled_at=group["first"], used=group["mean_used"], available=group["mean_available"],
                   total=group["mean_total"], share_sum=group["shares"] or 0.0, share_samples=group["shared"],
                   **({"peak_used": group["peak"]} if peak else {}))
        for group in groups
    ]
    hour_model.objects.bulk_create(
        rows, batch_size=UPSERT_BATCH, update_conflicts=True, unique_fields=["reservation", "hour"],
        update_fields=["samples", "first_sampled_at", "used", "available", "total", "share_sum", "share_samples",
                       *(["peak_used"] if peak else [])],
    )
    if any(field.name == "clusters" for field in hour_model._meta.get_fields()):  # not in older historical models
        roll_up_clusters(since, hour_model)
    return len(rows)


def roll_up_clusters(since: datetime.datetime, hour_model=UtilizationHour) -> int:
    """Each hour's mean units per cluster, from the fleet ledger's reads (ReservationUse, one per
    reservation per EC2 sync, kept only KARPWEB_SAMPLE_RETENTION_DAYS): the usage page's breakdown by
    cluster over 30 days and more reads these hours. Returns the hours written."""
    reads: dict[tuple, int] = defaultdict(int)
    units: dict[tuple, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for reservation_id, sampled_at, clusters in ReservationUse.objects.filter(sampled_at__gte=hour_of(since)).values_list(
            "reservation_id", "sampled_at", "clusters"):
        key = (reservation_id, hour_of(sampled_at))
        reads[key] += 1
        for name, count in (clusters or {}).items():
            units[key][name] += count
    hours = list(hour_model.objects.filter(reservation_id__in={r for r, _ in reads}, hour__gte=hour_of(since)))
    for row in hours:
        key = (row.reservation_id, row.hour)
        if key in reads:
            row.clusters = {name: round(total / reads[key], 3) for name, total in sorted(units[key].items())}
    hour_model.objects.bulk_update(hours, ["clusters"], batch_size=UPSERT_BATCH)
    return len(hours)


def hourly_span(hours) -> str:
    """How long the hourly means of a chart cover, from its first hour to its last, in words: "no data yet",
    "1 hour", "47 hours", "14 days" (a chart's title says what it shows, not the window it asked for)."""
    if not hours:
        return "no data yet"
    count = int((max(hours) - min(hours)) / datetime.timedelta(hours=1)) + 1
    if count < 48:
        return f"{count} hour{'' if count == 1 else 's'}"
    return f"{round(count / 24)} days"


def prune(now: datetime.datetime) -> dict:
    """Drop raw samples past KARPWEB_SAMPLE_RETENTION_DAYS and hours past KARPWEB_HOURLY_RETENTION_DAYS."""
    raw_cutoff = now - datetime.timedelta(days=settings.KARPWEB_SAMPLE_RETENTION_DAYS)
    hour_cutoff = now - datetime.timedelta(days=settings.KARPWEB_HOURLY_RETENTION_DAYS)
    return {
        "samples_pruned": UtilizationSample.objects.filter(sampled_at__lt=raw_cutoff).delete()[0],
        "hours_pruned": UtilizationHour.objects.filter(hour__lt=hour_of(hour_cutoff)).delete()[0],
        "uses_pruned": ReservationUse.objects.filter(sampled_at__lt=raw_cutoff).delete()[0],  # the ledger's history
    }
