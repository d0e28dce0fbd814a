"""NodeOverlays (karpenter.sh/v1alpha1, alpha upstream): price and extended-capacity overrides for the
instance types and offerings a NodePool can launch, as kubernetes-sigs/karpenter applies them
(`pkg/controllers/nodeoverlay/controller.go` and `store.go`, `pkg/cloudprovider/types.go`
AdjustedPrice).

- An overlay applies, per NodePool, to each instance type whose labels and the NodePool's own (its
  name and template labels) are compatible with its requirements, and there to each offering whose
  zone, capacity type and reservation labels are.
- `price` sets the offering's price; `priceAdjustment` moves it: `+10%` / `-15%` as a percentage,
  `+0.5` / `-0.5` in dollars, never below 0. `capacity` adds extended resources (never cpu, memory,
  ephemeral-storage or pods) to the type's capacity and allocatable.
- Overlays apply heaviest first (weight, then the name later in the alphabet first): the first to set
  an offering's price or a resource keeps it. Two overlays of the same weight that both set one
  offering's price or one resource conflict: the second is not applied anywhere, and its status says so
  (upstream's Ready condition, reason Conflict)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from .catalog import Catalog
from .cluster import NodePool
from .instancetypes import InstanceType, Offering
from .labels import NODEPOOL, OFFERING_LABELS
from .quantities import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, ResourceList
from .requirements import Requirements

PRICE = re.compile(r"^\d+(\.\d+)?$")
PRICE_ADJUSTMENT = re.compile(r"^(([+-](\d*\.?\d+))|(\+\d*\.?\d+%)|(-\d{1,2}(\.\d+)?%)|(-100%))$")
STANDARD_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)


@dataclass(frozen=True)
class NodeOverlay:
    name: str
    requirements: Requirements
    price: str | None = None
    price_adjustment: str | None = None
    capacity: ResourceList = field(default_factory=ResourceList)
    weight: int = 0

    @property
    def price_change(self) -> str | None:
        return self.price if self.price is not None else self.price_adjustment


@dataclass(frozen=True)
class OverlayStatus:
    name: str
    applied: bool
    reason: str = "Applied"
    message: str = ""

    def as_json(self) -> dict:
        return {"name": self.name, "ready": self.applied, "reason": self.reason, "message": self.message}


def adjusted_price(price: float, change: str | None) -> float:
    """Upstream's AdjustedPrice: an absolute price, or a signed dollar or percentage change (>= 0)."""
    if not change:
        return price
    if change[0] not in "+-":
        return float(change)
    if change.endswith("%"):
        moved = price * (1 + float(change[:-1]) / 100)
    else:
        moved = price + float(change)
    return max(moved, 0.0)


def ordered(overlays: list[NodeOverlay]) -> list[NodeOverlay]:
    """Heaviest first; of equal weight, the name later in the alphabet first (upstream's OrderByWeight)."""
    return sorted(overlays, key=lambda o: (-o.weight, tuple(-ord(c) for c in o.name)))


@dataclass
class _Updates:
    """What the overlays applied so far set, for one NodePool and instance type."""

    prices: dict[int, tuple[str, int]] = field(default_factory=dict)  # offering index -> (change, weight)
    capacity: dict[str, tuple[int, int]] = field(default_factory=dict)  # resource -> (amount, weight)


def overlay_catalogs(pools: list[NodePool], catalogs: dict[str, Catalog],
                     overlays: list[NodeOverlay]) -> tuple[dict[str, Catalog], list[OverlayStatus]]:
    """Per NodePool, its EC2NodeClass's catalog with the overlays applied (the class's own catalog
    where none applies), and each overlay's status."""
    updates: dict[tuple[str, str], _Updates] = {}
    statuses = []
    for overlay in ordered(overlays):
        matches = [(pool, it, offerings) for pool in pools if (catalog := catalogs.get(pool.node_class)) is not None
                   for it in catalog.instance_types if (offerings := _matching(overlay, pool, it))]
        conflict = next((f"it and another overlay of weight {overlay.weight} both set {what} for {it.name} in "
                         f"nodepool {pool.name}" for pool, it, offerings in matches
                         if (what := _conflict(updates.get((pool.name, it.name)), overlay, offerings))), None)
        if conflict:
            statuses.append(OverlayStatus(overlay.name, False, "Conflict", conflict))
            continue
        for pool, it, offerings in matches:
            _record(updates.setdefault((pool.name, it.name), _Updates()), overlay, offerings)
        statuses.append(OverlayStatus(overlay.name, True))
    return {pool.name: _apply(pool, catalogs.get(pool.node_class), updates) for pool in pools}, statuses


def _matching(overlay: NodeOverlay, pool: NodePool, it: InstanceType) -> list[int]:
    """The indexes of the type's offerings the overlay applies to in this pool (none: it does not apply)."""
    labels = {**it.labels, **pool.labels, NODEPOOL: pool.name}
    for req in overlay.requirements:
        if req.key in OFFERING_LABELS:
            continue
        value = labels.get(req.key)
        if not (req.admits_absent if value is None else req.has(value)):
            return []
    return [i for i, offering in enumerate(it.offerings) if offering.compatible(overlay.requirements)]


def _conflict(done: _Updates | None, overlay: NodeOverlay, offerings: list[int]) -> str:
    if done is None:
        return ""
    if overlay.price_change is not None and any(done.prices.get(i, (None, None))[1] == overlay.weight for i in offerings):
        return "the price"
    same = [name for name in overlay.capacity if done.capacity.get(name, (None, None))[1] == overlay.weight]
    return f"capacity {', '.join(sorted(same))}" if same else ""


def _record(done: _Updates, overlay: NodeOverlay, offerings: list[int]) -> None:
    if overlay.price_change is not None:
        for i in offerings:
            done.prices.setdefault(i, (overlay.price_change, overlay.weight))
    for name, amount in overlay.capacity.items():
        done.capacity.setdefault(name, (amount, overlay.weight))


def _apply(pool: NodePool, catalog: Catalog | None, updates: dict[tuple[str, str], _Updates]) -> Catalog | None:
    if catalog is None or not any(key[0] == pool.name for key in updates):
        return catalog
    types = []
    for it in catalog.instance_types:
        done = updates.get((pool.name, it.name))
        if done is None:
            types.append(it)
            continue
        offerings = tuple(replace(o, price=adjusted_price(o.price, done.prices[i][0])) if i in done.prices else o
                          for i, o in enumerate(it.offerings))
        extra = ResourceList({name: amount for name, (amount, _) in done.capacity.items()})
        types.append(InstanceType(it.name, it.capacity.add(extra), it.labels, offerings, it.allocatable.add(extra),
                                  it.instance_store_gb))
    return Catalog(types, catalog.instance_keys)


# --- WORLD.json ----------------------------------------------------------------------------------

def parse_overlays(value: Any, reader) -> list[NodeOverlay]:
    """`nodeOverlays`: karpenter.sh/v1alpha1 NodeOverlay objects, validated as their CRD validates them."""
    return reader.collect(value, "nodeOverlays", lambda item, path: _overlay(reader, item, path), "NodeOverlay")


def _overlay(reader, item: dict, path: str) -> NodeOverlay | None:
    meta = reader.mapping(item.get("metadata"), f"{path}.metadata")
    name = reader.string(meta, "name", f"{path}.metadata", required=True)
    spec = reader.mapping(item.get("spec"), f"{path}.spec", required=True)
    spec_path = f"{path}.spec"
    price = reader.string(spec, "price", spec_path)
    adjustment = reader.string(spec, "priceAdjustment", spec_path)
    if price is not None and not PRICE.match(price):
        reader.problem(f"{spec_path}.price", f'"{price}" is not a price (a number such as 0.42)')
        price = None
    if adjustment is not None and not PRICE_ADJUSTMENT.match(adjustment):
        reader.problem(f"{spec_path}.priceAdjustment",
                       f'"{adjustment}" is not a price adjustment (+0.5, -0.5, +10% or -15%, at most -100%)')
        adjustment = None
    if price is not None and adjustment is not None:
        reader.problem(spec_path, "cannot set both price and priceAdjustment")
    capacity = reader.resources(spec.get("capacity"), f"{spec_path}.capacity")
    for resource in STANDARD_RESOURCES:
        if resource in capacity:
            reader.problem(f"{spec_path}.capacity.{resource}", "capacity adds extended resources only, never "
                                                              "cpu, memory, ephemeral-storage or pods")
            capacity.pop(resource)
    weight = reader.integer(spec, "weight", spec_path, default=0, minimum=1, maximum=10000) or 0
    requirements = Requirements(reader.requirements(spec.get("requirements"), f"{spec_path}.requirements", node_pool=True))
    if not name:
        return None
    return NodeOverlay(name, requirements, price, adjustment, capacity, weight)
