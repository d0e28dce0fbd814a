"""Instance types, offerings per zone, and prices.

* ``DescribeInstanceTypes`` (all pages): vCPUs, memory, architecture, GPUs, ENIs -> max pods.
* ``DescribeInstanceTypeOfferings`` (``LocationType=availability-zone``, all pages): which types
  each zone sells; one on-demand offering per (type, zone), one spot offering where the type
  supports spot and a spot price is known.
* On-demand prices: the Pricing API (``GetProducts``, all pages) when allowed, else/also the
  bundled ``prices.json`` (us-east-1 list prices) for types the API did not price.
* Spot prices: ``DescribeSpotPriceHistory`` for Linux/UNIX, the latest price per (type, zone).
* Reserved offerings (one per reservation, price = on-demand / 10,000,000, see
  karpenter-semantics.md §3.1) come from :func:`reserved_offerings`.

Max pods uses the ENI formula of the AWS VPC CNI (and Karpenter's default):
``interfaces * (IPv4 addresses per interface - 1) + 2``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

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
from .unavailable import UnavailableOfferings

log = logging.getLogger(__name__)

PRICES_FILE = Path(__file__).with_name("prices.json")
SPOT_PRODUCTS = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")
ARCHITECTURES = {"x86_64": "amd64", "arm64": "arm64", "i386": "386", "x86_64_mac": "amd64", "arm64_mac": "arm64"}

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


def max_pods(network_interfaces: int, ipv4_per_interface: int) -> int:
    if network_interfaces <= 0 or ipv4_per_interface <= 0:
        return 110  # no network info: the kubelet default
    return network_interfaces * (ipv4_per_interface - 1) + 2


def instance_type_info(raw: Mapping[str, Any]) -> InstanceTypeInfo:
    network = raw.get("NetworkInfo") or {}
    gpus = (raw.get("GpuInfo") or {}).get("Gpus") or []
    arches = (raw.get("ProcessorInfo") or {}).get("SupportedArchitectures") or ["x86_64"]
    enis = int(network.get("MaximumNetworkInterfaces") or 0)
    ips = int(network.get("Ipv4AddressesPerInterface") or 0)
    return InstanceTypeInfo(
        name=raw["InstanceType"],
        vcpus=int((raw.get("VCpuInfo") or {}).get("DefaultVCpus") or 0),
        memory_mib=int((raw.get("MemoryInfo") or {}).get("SizeInMiB") or 0),
        architecture=ARCHITECTURES.get(arches[0], arches[0]),
        max_pods=max_pods(enis, ips),
        gpu_count=sum(int(g.get("Count") or 0) for g in gpus),
        gpu_manufacturer=gpus[0].get("Manufacturer", "") if gpus else "",
        gpu_name=gpus[0].get("Name", "") if gpus else "",
        gpu_memory_mib=int((raw.get("GpuInfo") or {}).get("TotalGpuMemoryInMiB") or 0),
        network_interfaces=enis,
        ipv4_per_interface=ips,
        bare_metal=bool(raw.get("BareMetal")),
        hypervisor=raw.get("Hypervisor") or "",
        usage_classes=tuple(raw.get("SupportedUsageClasses") or ()),
    )


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


def fetch_catalogue(
    ec2: Any,
    pricing: Any | None,
    call: Caller,
    *,
    region: str,
    pricing_source: str,
    now: datetime,
    unavailable: UnavailableOfferings,
    instance_type_patterns: Sequence[str] = (),
) -> Catalogue:
    """The region's instance types and on-demand/spot offerings with prices. ``instance_type_patterns``
    (EC2 ``instance-type`` filter values, wildcards allowed) narrows DescribeInstanceTypes; the
    offerings are then matched to those types here."""
    filters = [{"Name": "instance-type", "Values": list(instance_type_patterns)}] if instance_type_patterns else []
    raw_types = _pages(call, ec2, "describe_instance_types", "InstanceTypes", Filters=filters, MaxResults=100)
    offerings_raw = _pages(
        call,
        ec2,
        "describe_instance_type_offerings",
        "InstanceTypeOfferings",
        LocationType="availability-zone",
        MaxResults=1000,
    )
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

    types: list[InstanceTypeInfo] = []
    sources: set[str] = set()
    for raw in raw_types:
        info = instance_type_info(raw)
        if info.name in api_prices:
            price, source = api_prices[info.name], "pricing-api"
        elif info.name in bundled:
            price, source = bundled[info.name], "bundled"
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
    price_source = "mixed" if len(sources) > 1 else (sources.pop() if sources else "none")
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
