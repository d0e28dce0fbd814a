"""The simulated EC2's Capacity Block extensions and new blocks: what DescribeCapacityBlockExtensionOfferings,
PurchaseCapacityBlockExtension and DescribeCapacityBlockOfferings answer in the demo, so an extend
recommendation and the buy advice for a waiting GPU gang can be tried end to end.

It sells a day or two more of an active block, at a fee of the block's instances x hours x the type's
on-demand list price in its zone (a round, stated figure: real extensions are priced by EC2); buying one
moves the block's end date (and so its drain) later by that many hours.

Mirror, not loop: it reads and writes the reservations, and both the simulated world
(`scheduling/loop/simulated.py`) and the demo seeding (`scheduling/demo.py`) use it."""

from __future__ import annotations

import datetime

from reservations.models import CapacityReservation
from scheduling.adapters.ec2.interface import CloudAPIError
from scheduling.engine.recommendations import ExtensionOffering
from scheduling.models import CapacityType, Offering

EXTENSION_HOURS = (24, 48)
BLOCK_STARTS = ((datetime.timedelta(days=1), 1), (datetime.timedelta(days=8), 1.1))  # tomorrow, or a week later (dearer)


def _block(reservation_id: str) -> CapacityReservation | None:
    return CapacityReservation.objects.filter(
        reservation_id=reservation_id, reservation_type=CapacityReservation.ReservationType.CAPACITY_BLOCK,
        state=CapacityReservation.State.ACTIVE).first()


def offering_id(reservation_id: str, hours: int) -> str:
    return f"cbeo-{reservation_id.removeprefix('cr-')}-{hours}h"


def extension_offerings(reservation_id: str) -> list[ExtensionOffering]:
    block = _block(reservation_id)
    if block is None or block.end_date is None:
        return []
    price = (Offering.objects.filter(instance_type__name=block.instance_type, zone=block.availability_zone,
                                     capacity_type=CapacityType.ON_DEMAND, reservation=None)
             .values_list("price", flat=True).first())
    if price is None:
        return []
    return [ExtensionOffering(offering_id(reservation_id, hours), hours, round(block.total_instance_count * hours * price, 2))
            for hours in EXTENSION_HOURS]


def purchase_extension(offering: str, reservation_id: str) -> dict:
    chosen = next((o for o in extension_offerings(reservation_id) if o.offering_id == offering), None)
    if chosen is None:
        raise CloudAPIError("InvalidCapacityBlockExtensionOfferingId.NotFound",
                            f"{offering} is no extension offering of {reservation_id} now", "purchase_capacity_block_extension")
    block = _block(reservation_id)
    block.end_date = block.end_date + datetime.timedelta(hours=chosen.hours)
    block.save(update_fields=["end_date"])
    return {"CapacityBlockExtensionOfferingId": chosen.offering_id, "CapacityReservationId": reservation_id,
            "CapacityBlockExtensionDurationHours": chosen.hours, "UpfrontFee": str(chosen.upfront_fee),
            "CurrencyCode": chosen.currency, "CapacityBlockExtensionStatus": "payment-succeeded",
            "CapacityBlockExtensionEndDate": block.end_date}


def offering_id_of(instance_type: str, instance_count: int, hours: int, start: datetime.datetime) -> str:
    return f"cbo-{instance_type}-{instance_count}x{hours}h-{start:%Y%m%d}"


def block_offerings(instance_type: str, instance_count: int, hours: int, now: datetime.datetime) -> list[dict]:
    """New blocks of `instance_count` x `instance_type` for `hours`, in DescribeCapacityBlockOfferings' shape:
    in the first zone that sells the type on demand, from 11:30 UTC tomorrow or a week later (10 % dearer), at
    the instances x hours x the type's on-demand list price there (a stated figure: EC2 prices real blocks)."""
    listed = (Offering.objects.filter(instance_type__name=instance_type, capacity_type=CapacityType.ON_DEMAND,
                                      reservation=None).order_by("zone").values_list("zone", "price").first())
    if listed is None or instance_count < 1 or hours < 1:
        return []
    zone, price = listed
    tomorrow = now.astimezone(datetime.timezone.utc).replace(hour=11, minute=30, second=0, microsecond=0)
    offers = []
    for ahead, markup in BLOCK_STARTS:
        start = tomorrow + ahead
        offers.append({"CapacityBlockOfferingId": offering_id_of(instance_type, instance_count, hours, start),
                       "InstanceType": instance_type, "AvailabilityZone": zone, "InstanceCount": instance_count,
                       "StartDate": start, "EndDate": start + datetime.timedelta(hours=hours),
                       "CapacityBlockDurationHours": hours, "CurrencyCode": "USD", "Tenancy": "default",
                       "UpfrontFee": f"{instance_count * hours * price * markup:.2f}"})
    return offers
