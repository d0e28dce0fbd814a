"""Instance types, offerings per zone, and prices.

* ``DescribeInstanceTypes`` (all pages): every label and extended resource Karpenter's AWS provider
  derives from it (``scheduling.engine.ec2types.derive``); types Karpenter would not list (no HVM,
  an architecture other than x86_64 and arm64) are left out, as upstream's request filters do.
* ``DescribeInstanceTypeOfferings`` (``LocationType=availability-zone``, all pages): which types
  each zone sells; one on-demand offering per (type, zone), one spot offering where the type
  supports spot and a spot price is known.
* On-demand prices: the Pricing API (``GetProducts``, all pages) when allowed, else/also the
  bundled ``prices.json`` (us-east-1 list prices) for types the API did not price, else an estimate
  from priced types of the same family (price per vCPU), category or kind, so that a type newer than
  the table is still launchable (``price_source`` says ``estimated``).
* Spot prices: ``DescribeSpotPriceHistory`` for Linux/UNIX, the latest price per (type, zone).
* Reserved offerings (one per reservation, price = on-demand / 10,000,000, see
  aws/karpenter-provider-aws
  `pkg/providers/instancetype/offering/reserved_capacity_resolver.go`) come from
  :func:`reserved_offerings`.
"""

from __future__ import annotations

import json
import logging
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from scheduling.engine.ec2types import ACCELERATOR_RESOURCES, INSTANCE_CATEGORY, derive, unusable_reason
from scheduling.engine.instancetypes import RESERVED_PRICE_DIVISOR

from .client import Caller
from .interface import (
    ON_DEMAND,
    RESERVED,
    SPOT,
    Catalogue,
    CloudAPIError,
    InstanceTypeInfo,
    OfferingInfo,
)
from .status import to_engine
from .unavailable import UnavailableMarks

log = logging.getLogger(__name__)

PRICES_FILE = Path(__file__).with_name("prices.json")
SPOT_PRODUCTS = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")
PRICING_FILTERS = (
    ("tenancy", "Shared"),
    ("productFamily", "Compute Instance"),
    ("preInstalledSw", "NA"),
    ("operatingSystem", "Linux"),
    ("capacitystatus", "Used"),
    ("marketoption", "OnDemand"),
)


@cache
def bundled_prices() -> dict[str, float]:
    return {k: float(v) for k, v in json.loads(PRICES_FILE.read_text())["prices"].items()}


def instance_type_info(raw: Mapping[str, Any]) -> InstanceTypeInfo:
    """One DescribeInstanceTypes entry, derived as Karpenter's AWS provider derives it."""
    derived = derive(raw)
    gpus = (raw.get("GpuInfo") or {}).get("Gpus") or []
    return InstanceTypeInfo(
        name=derived.name,
        vcpus=derived.vcpus,
        memory_mib=derived.memory_mib,
        architecture=derived.architecture,
        max_pods=derived.eni_limited_pods,
        gpu_count=derived.gpu_count,
        gpu_manufacturer=gpus[0].get("Manufacturer", "") if gpus else "",
        gpu_name=derived.gpu_name,
        bare_metal=derived.bare_metal,
        usage_classes=derived.usage_classes,
        labels=derived.labels,
        resources=derived.resources,
        instance_store_gb=derived.instance_store_gb,
    )


def estimate_prices(types: Sequence[InstanceTypeInfo], known: Mapping[str, float]) -> dict[str, float]:
    """A price for each type no source priced: its vCPUs times the median price per vCPU of the
    priced types of its family, else of its category and kind (accelerated or not), else of its kind.
    Prices scale with vCPUs within a family, so the estimate orders a new family's sizes rightly."""
    def kind(it: InstanceTypeInfo) -> bool:
        return any(r in it.resources for r in ACCELERATOR_RESOURCES)

    def groups(it: InstanceTypeInfo) -> tuple:
        family = it.name.split(".")[0]
        return (("family", family), ("category", it.labels.get(INSTANCE_CATEGORY), kind(it)), ("kind", kind(it)))

    per_vcpu: dict[tuple, list[float]] = {}
    for it in types:
        if it.name in known and it.vcpus:
            for group in groups(it):
                per_vcpu.setdefault(group, []).append(known[it.name] / it.vcpus)
    estimates = {}
    for it in types:
        if it.name in known or not it.vcpus:
            continue
        group = next((g for g in groups(it) if g in per_vcpu), None)
        if group is not None:
            estimates[it.name] = round(statistics.median(per_vcpu[group]) * it.vcpus, 6)
    return estimates


def parse_price_list(items: Iterable[str | Mapping[str, Any]]) -> dict[str, float]:
    """Hourly on-demand USD price per instance type from GetProducts ``PriceList`` entries."""
    prices: dict[str, float] = {}
    for item in items:
        product = json.loads(item) if isinstance(item, str) else item
        instance_type = ((product.get("product") or {}).get("attributes") or {}).get("instanceType")
        if not instance_type:
            continue
        for offer in ((product.get("terms") or {}).get("OnDemand") or {}).values():
            for dimension in (offer.get("priceDimensions") or {}).values():
                usd = (dimension.get("pricePerUnit") or {}).get("USD")
                if usd is None:
                    continue
                price = float(usd)
                if price > 0:
                    prices[instance_type] = price
    return prices


def fetch_on_demand_prices(pricing: Any, call: Caller, region: str) -> dict[str, float]:
    params: dict[str, Any] = {
        "ServiceCode": "AmazonEC2",
        "FormatVersion": "aws_v1",
        "MaxResults": 100,
        "Filters": [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": region}]
        + [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in PRICING_FILTERS],
    }
    prices: dict[str, float] = {}
    seen: set[str] = set()
    while True:
        page = call(pricing, "get_products", **params)
        prices.update(parse_price_list(page.get("PriceList", [])))
        token = page.get("NextToken")
        if not token or token in seen:
            return prices
        seen.add(token)
        params["NextToken"] = token


def fetch_spot_prices(ec2: Any, call: Caller, now: datetime) -> dict[tuple[str, str], float]:
    """The latest Linux/UNIX spot price per (instance type, zone)."""
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    params: dict[str, Any] = {"ProductDescriptions": list(SPOT_PRODUCTS), "StartTime": now, "MaxResults": 1000}
    seen: set[str] = set()
    while True:
        page = call(ec2, "describe_spot_price_history", **params)
        for row in page.get("SpotPriceHistory", []):
            key = (row["InstanceType"], row["AvailabilityZone"])
            stamp = row["Timestamp"]
            if key not in latest or stamp > latest[key][0]:
                latest[key] = (stamp, float(row["SpotPrice"]))
        token = page.get("NextToken")
        if not token or token in seen:
            break
        seen.add(token)
        params["NextToken"] = token
    return {k: v[1] for k, v in latest.items()}


def _pages(call: Caller, client: Any, operation: str, key: str, **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    while True:
        page = call(client, operation, **params)
        items.extend(page.get(key, []))
        token = page.get("NextToken")
        if not token or token in seen:
            return items
        seen.add(token)
        params["NextToken"] = token


OFFERING_FILTER_VALUES = 100  # instance types named in one DescribeInstanceTypeOfferings filter


def _offerings(call: Caller, ec2: Any, names: list[str] | None) -> list[dict[str, Any]]:
    """Every zone's offerings of the types ``names`` (all the region's when None): asked by name, a
    hundred at a time, so that a narrowed catalogue does not page through the region's thousands."""
    asks = [{}] if names is None else [
        {"Filters": [{"Name": "instance-type", "Values": names[start:start + OFFERING_FILTER_VALUES]}]}
        for start in range(0, len(names), OFFERING_FILTER_VALUES)]
    return [row for ask in asks for row in _pages(call, ec2, "describe_instance_type_offerings", "InstanceTypeOfferings",
                                                  LocationType="availability-zone", MaxResults=1000, **ask)]


def fetch_catalogue(
    ec2: Any,
    pricing: Any | None,
    call: Caller,
    *,
    region: str,
    pricing_source: str,
    now: datetime,
    unavailable: UnavailableMarks,
    instance_type_patterns: Sequence[str] = (),
) -> Catalogue:
    """The region's instance types and on-demand/spot offerings with prices. ``instance_type_patterns``
    (EC2 ``instance-type`` filter values, wildcards allowed) narrows DescribeInstanceTypes; the
    offerings are then matched to those types here."""
    filters = [{"Name": "instance-type", "Values": list(instance_type_patterns)}] if instance_type_patterns else []
    raw_types = _pages(call, ec2, "describe_instance_types", "InstanceTypes", Filters=filters, MaxResults=100)
    offerings_raw = _offerings(call, ec2, sorted({raw["InstanceType"] for raw in raw_types}) if filters else None)
    zones = call(ec2, "describe_availability_zones").get("AvailabilityZones", [])
    zone_ids = {z["ZoneName"]: z.get("ZoneId", "") for z in zones}

    notes: list[str] = []
    api_prices: dict[str, float] = {}
    if pricing_source == "api" and pricing is not None:
        try:
            api_prices = fetch_on_demand_prices(pricing, call, region)
        except CloudAPIError as exc:
            notes.append(f"Pricing API unavailable ({exc.code}); using the bundled us-east-1 price table")
            log.warning("Pricing API failed (%s); falling back to bundled prices", exc.code)
    bundled = bundled_prices()
    if region != "us-east-1" and not api_prices:
        notes.append(f"bundled prices are us-east-1 list prices, used as an approximation for {region}")

    try:
        spot_prices = fetch_spot_prices(ec2, call, now)
    except CloudAPIError as exc:
        notes.append(f"DescribeSpotPriceHistory failed ({exc.code}); no spot offerings")
        spot_prices = {}

    infos = [instance_type_info(raw) for raw in raw_types if unusable_reason(raw) is None]
    known = {**{it.name: bundled[it.name] for it in infos if it.name in bundled}, **api_prices}
    estimated = estimate_prices(infos, known)
    if estimated:
        notes.append(f"{len(estimated)} instance type(s) priced by estimate from like types (no list price known)")
    types: list[InstanceTypeInfo] = []
    sources: set[str] = set()
    for info in infos:
        if info.name in api_prices:
            price, source = api_prices[info.name], "pricing-api"
        elif info.name in bundled:
            price, source = bundled[info.name], "bundled"
        elif info.name in estimated:
            price, source = estimated[info.name], "estimated"
        else:
            price, source = None, ""
        if source:
            sources.add(source)
        types.append(_with_price(info, price, source))
    types.sort(key=lambda it: it.name)
    known = {it.name: it for it in types}

    offerings: list[OfferingInfo] = []
    for row in sorted(offerings_raw, key=lambda r: (r["InstanceType"], r["Location"])):
        it = known.get(row["InstanceType"])
        if it is None:
            continue
        zone = row["Location"]
        offerings.append(
            OfferingInfo(
                instance_type=it.name,
                zone=zone,
                zone_id=zone_ids.get(zone, ""),
                capacity_type=ON_DEMAND,
                price=it.on_demand_price,
                available=not unavailable.is_unavailable(it.name, zone, ON_DEMAND),
            )
        )
        spot_price = spot_prices.get((it.name, zone))
        if spot_price is not None and (not it.usage_classes or SPOT in it.usage_classes):
            offerings.append(
                OfferingInfo(
                    instance_type=it.name,
                    zone=zone,
                    zone_id=zone_ids.get(zone, ""),
                    capacity_type=SPOT,
                    price=spot_price,
                    available=not unavailable.is_unavailable(it.name, zone, SPOT),
                )
            )
    listed = sources - {"estimated"}
    price_source = "mixed" if len(listed) > 1 else (listed.pop() if listed else "estimated" if sources else "none")
    return Catalogue(types, offerings, now, price_source, notes)


def _with_price(info: InstanceTypeInfo, price: float | None, source: str) -> InstanceTypeInfo:
    return replace(info, on_demand_price=price, price_source=source)


def reserved_offerings(
    reservations: Sequence[Mapping[str, Any]],
    catalogue: Catalogue,
    available_count: Any,
    now: datetime,
    zones: Iterable[str] | None = None,
) -> list[OfferingInfo]:
    """One reserved offering per reservation (upstream's ReservedCapacityResolver).

    ``reservations`` are EC2-shaped dicts (as from ``describe_reservations``); ``available_count``
    is a callable id -> int (the in-memory count). An offering is available when the engine finds
    no reason against it (active, not past its end, not an expiring capacity block, count not 0),
    the type is sold in the reservation's zone, and the zone is among ``zones`` if given.
    Price = on-demand price / 10,000,000 (0 when unknown).
    """
    allowed = set(zones) if zones is not None else None
    sold = {(o.instance_type, o.zone) for o in catalogue.offerings if o.capacity_type == ON_DEMAND}
    zone_ids = {o.zone: o.zone_id for o in catalogue.offerings}
    result: list[OfferingInfo] = []
    for r in sorted(reservations, key=lambda r: r["CapacityReservationId"]):
        it = catalogue.instance_type(r["InstanceType"])
        if it is None:
            continue
        count = int(available_count(r["CapacityReservationId"]))
        zone = r["AvailabilityZone"]
        available = (
            to_engine(r, available_count=count).unavailable_reason(now) is None
            and (it.name, zone) in sold
            and (allowed is None or zone in allowed)
        )
        result.append(
            OfferingInfo(
                instance_type=it.name,
                zone=zone,
                zone_id=r.get("AvailabilityZoneId") or zone_ids.get(zone, ""),
                capacity_type=RESERVED,
                price=(it.on_demand_price or 0.0) / RESERVED_PRICE_DIVISOR,
                available=available,
                reservation_id=r["CapacityReservationId"],
                reservation_type=r.get("ReservationType") or "default",
                interruptible=bool(r.get("Interruptible")),
                reservation_capacity=count,
            )
        )
    return result
