"""Buying Capacity Blocks on the EC2 test server (issue #50): DescribeCapacityBlockOfferings (also UltraServer
offerings) and PurchaseCapacityBlock, registered onto moto's EC2Response as ec2_server.py registers its own.

EC2's behaviour, as botocore models it and the EC2 user guide describes it:
- DescribeCapacityBlockOfferings requires CapacityDurationHours (1-14 days, or whole weeks up to 182 days); it
  quotes two start dates (11:30 UTC tomorrow, and a week later 10 % dearer) at CAPACITY_BLOCK_HOUR_PRICE per
  instance-hour. An UltraServer type (UltraserverType, UltraserverCount) is quoted as that many UltraServers of
  its instances; the instance types sold only inside UltraServers get no offering when asked for alone.
- Every offering quoted is remembered by its id, so PurchaseCapacityBlock finds it; an offering is sold once
  (bought again, or asked for by an id never quoted: InvalidParameterValue) and is not quoted again once sold.
- PurchaseCapacityBlock (CapacityBlockOfferingId, InstancePlatform, TagSpecifications, DryRun; no ClientToken in
  the API) answers the new `capacity-block` reservation: `payment-pending` for a minute of server time, then
  `scheduled` until its StartDate, `active` until its EndDate, then `expired` (ec2_server._refresh's rules:
  instances terminated 30 minutes before the end, 60 for an UltraServer)."""

from __future__ import annotations

import copy
import hashlib
from datetime import datetime, timedelta
from typing import Any

from moto.core.responses import ActionResult
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models.instance_types import INSTANCE_TYPES, InstanceTypeBackend
from moto.ec2.responses import EC2Response

from tests.support import ec2_server as _server
from tests.support.ec2_server import CAPACITY_BLOCK_HOUR_PRICE, CLOCK, _LOCK, _new_capacity_block, _state

# UltraServer type -> (its instance type, instances in one UltraServer).
ULTRASERVERS = {"u-p6e-gb200x72": ("p6e-gb200.36xlarge", 18), "u-p6e-gb200x36": ("p6e-gb200.36xlarge", 9),
                "u-trn2x64": ("trn2u.48xlarge", 4)}
ULTRASERVER_ONLY = {instance_type for instance_type, _ in ULTRASERVERS.values()}
PAYMENT_CLEARS = timedelta(minutes=1)  # payment-pending, then scheduled
PLATFORMS = ("Linux/UNIX", "Red Hat Enterprise Linux", "SUSE Linux", "Windows", "Ubuntu Pro", "Linux with SQL Server Standard",
             "Linux with SQL Server Web", "Linux with SQL Server Enterprise", "Windows with SQL Server",
             "Windows with SQL Server Standard", "Windows with SQL Server Web", "Windows with SQL Server Enterprise",
             "RHEL with SQL Server Standard", "RHEL with SQL Server Enterprise", "RHEL with SQL Server Web", "RHEL with HA",
             "RHEL with HA and SQL Server Standard", "RHEL with HA and SQL Server Enterprise")


def _buying(backend: Any) -> dict[str, Any]:
    """Per account: the offerings quoted (id -> offering), the ids sold, and when each purchase's payment clears."""
    return backend.__dict__.setdefault("_karpweb_block_buying", {"offerings": {}, "sold": set(), "payments": {}})


def _check_duration(hours: Any) -> int:
    if hours is None:
        raise EC2ClientError("MissingParameter", "The request must contain the parameter CapacityDurationHours")
    hours = int(hours)
    if not (hours % 24 == 0 and 24 <= hours <= 14 * 24 or hours % 168 == 0 and 14 * 24 < hours <= 182 * 24):
        raise EC2ClientError("InvalidParameterValue", f"The Capacity Block duration {hours} hours is not supported: "
                             "choose 1 to 14 days, or up to 182 days in 7-day increments")
    return hours


def _shape(resp: EC2Response) -> tuple[str, int, str, int]:
    """(instance type, instance count, UltraServer type, UltraServer count) the request asks for."""
    instance_type, count = resp._get_param("InstanceType"), int(resp._get_param("InstanceCount") or 0)
    ultra_type, ultra_count = resp._get_param("UltraserverType"), int(resp._get_param("UltraserverCount") or 0)
    if ultra_type:
        if ultra_type not in ULTRASERVERS:
            raise EC2ClientError("InvalidParameterValue", f"The UltraServer type {ultra_type} is not supported")
        if not 1 <= ultra_count <= 4:
            raise EC2ClientError("InvalidParameterValue", "UltraserverCount must be between 1 and 4")
        of, size = ULTRASERVERS[ultra_type]
        if instance_type and instance_type != of:
            raise EC2ClientError("InvalidParameterValue", f"The UltraServer type {ultra_type} holds {of}, not {instance_type}")
        return of, size * ultra_count, ultra_type, ultra_count
    if not instance_type or not 1 <= count <= 64:
        raise EC2ClientError("InvalidParameterValue", "InstanceType and an InstanceCount of 1 to 64 are required")
    return instance_type, count, "", 0


class _BuyingActions(EC2Response):
    def describe_capacity_block_offerings(self) -> ActionResult:
        self.error_on_dryrun()
        hours = _check_duration(self._get_param("CapacityDurationHours"))
        instance_type, count, ultra_type, ultra_count = _shape(self)
        buying = _buying(self.ec2_backend)
        if instance_type in ULTRASERVER_ONLY and not ultra_type:
            return ActionResult({"CapacityBlockOfferings": []})  # sold only inside UltraServers
        tomorrow = CLOCK.now().replace(hour=11, minute=30, second=0, microsecond=0) + timedelta(days=1)
        offers = []
        with _LOCK:
            for days_ahead, markup in ((0, 1.0), (7, 1.1)):
                start = tomorrow + timedelta(days=days_ahead)
                seed = f"{instance_type}/{count}/{hours}/{ultra_type}/{start.isoformat()}"
                offer_id = f"cb-{hashlib.sha256(seed.encode()).hexdigest()[:17]}"
                if offer_id in buying["sold"]:
                    continue
                offer = {"CapacityBlockOfferingId": offer_id, "InstanceType": instance_type,
                         "AvailabilityZone": f"{self.region}a", "InstanceCount": count, "StartDate": start,
                         "EndDate": start + timedelta(hours=hours), "CapacityBlockDurationHours": hours,
                         "UpfrontFee": f"{hours * count * CAPACITY_BLOCK_HOUR_PRICE * markup:.2f}", "CurrencyCode": "USD",
                         "Tenancy": "default"}
                if ultra_type:
                    offer.update(UltraserverType=ultra_type, UltraserverCount=ultra_count)
                buying["offerings"][offer_id] = offer
                offers.append(offer)
        return ActionResult({"CapacityBlockOfferings": copy.deepcopy(offers)})

    def purchase_capacity_block(self) -> ActionResult:
        self.error_on_dryrun()
        backend = self.ec2_backend
        offer_id, platform = self._get_param("CapacityBlockOfferingId"), self._get_param("InstancePlatform")
        if platform not in PLATFORMS:
            raise EC2ClientError("InvalidParameterValue", f"The instance platform {platform} is not supported")
        buying = _buying(backend)
        with _LOCK:
            offer = buying["offerings"].get(offer_id)
            if offer is None or offer_id in buying["sold"]:
                raise EC2ClientError("InvalidParameterValue", f"The Capacity Block offering {offer_id} does not exist "
                                     "or is no longer available")
            if offer["StartDate"] <= CLOCK.now():
                raise EC2ClientError("InvalidParameterValue", f"The Capacity Block offering {offer_id} has expired")
            tags = self._parse_tag_specification().get("capacity-reservation", {})
            r = _new_capacity_block(backend, offer["InstanceType"], offer["AvailabilityZone"], offer["InstanceCount"],
                                    start=offer["StartDate"], end=offer["EndDate"],
                                    ultraserver_type=offer.get("UltraserverType"), tags=tags)
            r["State"] = "payment-pending"
            buying["sold"].add(offer_id)
            buying["payments"][r["CapacityReservationId"]] = CLOCK.now() + PAYMENT_CLEARS
            _block_of(backend, r)["State"] = r["State"]
            return ActionResult({"CapacityReservation": copy.deepcopy(r), "CapacityReservations": [copy.deepcopy(r)],
                                 "CapacityBlocks": [copy.deepcopy(_block_of(backend, r))]})


def _block_of(backend: Any, r: dict[str, Any]) -> dict[str, Any]:
    return _state(backend).capacity_blocks[r["CapacityBlockId"]]


def _clear_payments(backend: Any, now: datetime) -> None:
    """payment-pending -> scheduled once the payment clears (then ec2_server._refresh makes it active at its start)."""
    payments = _buying(backend)["payments"]
    st = _state(backend)
    with _LOCK:
        for rid, clears in list(payments.items()):
            r = st.reservations.get(rid)
            if r is not None and r["State"] == "payment-pending" and now >= clears:
                r["State"] = "scheduled"
                del payments[rid]


# moto's data leaves out trn2u.48xlarge's Trainium2 devices; EC2's DescribeInstanceTypes gives it trn2.48xlarge's
# (the same instance, inside a Trn2 UltraServer).
for _described in InstanceTypeBackend.instance_types:
    if _described["InstanceType"] == "trn2u.48xlarge" and INSTANCE_TYPES.get("trn2.48xlarge", {}).get("NeuronInfo"):
        _described.setdefault("NeuronInfo", copy.deepcopy(INSTANCE_TYPES["trn2.48xlarge"]["NeuronInfo"]))

_original_refresh = _server._refresh


def _refresh(backend: Any) -> None:
    _clear_payments(backend, CLOCK.now())
    _original_refresh(backend)


_server._refresh = _refresh  # every action and helper of ec2_server.py moves purchases along the clock too

for _name in ("describe_capacity_block_offerings", "purchase_capacity_block"):
    setattr(EC2Response, _name, _BuyingActions.__dict__[_name])
