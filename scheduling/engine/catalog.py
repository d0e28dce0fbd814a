"""The instance types one EC2NodeClass can launch, with answers cached per set of requirements.

Scheduling asks the same question many times: "which instance types, and which of their
offerings, are compatible with these requirements?". The answer depends only on the requirements
on instance and offering labels, so it is computed once per distinct such set (node claims differ
in hostname and pod labels, not in these) and the scheduler's per-pod work is set lookups.

Sets of instance types are bitmasks (bit i = the catalog's i-th type), so narrowing a node claim
is an AND of integers: `view(requirements).mask` (compatible types), `fits_mask(requests)` (types
with room, from per-resource thresholds found by bisection) and the claim's own mask. Each view
also keeps its types ordered by price, so the cheapest type of any mask is found without sorting.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from .instancetypes import InstanceType, Offering
from .labels import (CAPACITY_TYPE_PREFERENCE, INSTANCE_TYPE, OFFERING_LABELS, RESERVATION_ID, RESERVED, SPOT,
                     WELL_KNOWN_LABELS)
from .requirements import Requirement, Requirements


@dataclass(frozen=True, slots=True)
class CatalogView:
    # Instance types whose labels match and that have an available compatible offering.
    names: frozenset[str]
    # Those that have an available compatible on-demand or spot offering.
    open_names: frozenset[str]
    # Available compatible reserved offerings, per instance type name.
    reserved: Mapping[str, tuple[Offering, ...]]
    # The cheapest available compatible on-demand or spot price, per instance type name.
    open_price: Mapping[str, float]
    # The same sets as bitmasks over the catalog's types; `spot_mask`: types with a spot offering.
    mask: int = 0
    open_mask: int = 0
    spot_mask: int = 0
    reserved_mask: int = 0
    # Per offering label (zone, capacity type, reservation labels) and value: the types that have
    # an available compatible offering with that value (for minValues on offering labels).
    offering_masks: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # (cheapest compatible available price, name, index) of every type in `mask`, cheapest first.
    price_order: tuple[tuple[float, str, int], ...] = ()
    # Per capacity type: (price, type name, zone, index, offering), cheapest first.
    offers_by_price: Mapping[str, tuple[tuple[float, str, str, int, Offering], ...]] = field(default_factory=dict)
    # (cheapest on-demand or spot price, name, index), cheapest first.
    open_order: tuple[tuple[float, str, int], ...] = ()
    # Memo of answers per type mask (launch.py: options and launch of finalised claims).
    memo: dict = field(default_factory=dict)
    # Type index -> its reserved offerings, for every type with some (in catalog order).
    reserved_at: Mapping[int, tuple[Offering, ...]] = field(default_factory=dict)

    def cheapest_open_price(self, mask: int) -> float:
        """The cheapest on-demand or spot launch among the types in `mask` (inf when none)."""
        if not mask & self.open_mask:
            return float("inf")
        prices, prefixes = self._open_prefixes()
        low, high = 0, len(prefixes) - 1  # the first prefix of open_order that meets the mask
        while low < high:
            middle = (low + high) // 2
            if prefixes[middle] & mask:
                high = middle
            else:
                low = middle + 1
        return prices[low]

    def open_types_up_to(self, price: float) -> int:
        """The types whose cheapest on-demand or spot launch costs at most `price` (a mask)."""
        prices, prefixes = self._open_prefixes()
        count = bisect_right(prices, price)
        return prefixes[count - 1] if count else 0

    def _open_prefixes(self) -> tuple[list[float], list[int]]:
        """`open_order`'s prices, and for each position the types up to it as a mask: the
        cheapest type of a mask, or every type up to a price, by bisection instead of a walk."""
        found = self.memo.get(_OPEN_PREFIXES)
        if found is None:
            prices, prefixes, mask = [], [], 0
            for price, _, index in self.open_order:
                mask |= 1 << index
                prices.append(price)
                prefixes.append(mask)
            found = self.memo[_OPEN_PREFIXES] = (prices, prefixes)
        return found


_OPEN_PREFIXES = object()  # CatalogView.memo's key for _open_prefixes (other keys are type masks)


class Catalog:
    def __init__(self, instance_types: list[InstanceType], instance_keys: frozenset[str]):
        self.instance_types = instance_types
        self.by_name = {it.name: it for it in instance_types}
        self.instance_keys = instance_keys
        self.relevant_keys = frozenset(instance_keys | OFFERING_LABELS)
        # Keys a NodePool need not define: upstream's well-known labels, plus any label the
        # world's instance types carry (they decide its value, as for the AWS instance labels).
        self.well_known = frozenset(WELL_KNOWN_LABELS | instance_keys)
        self._views: dict[tuple, CatalogView] = {}
        self._by_reservation: dict[str, set[int]] | None = None  # reservation id -> type indexes
        self.index = {it.name: i for i, it in enumerate(instance_types)}
        self.all_mask = (1 << len(instance_types)) - 1
        # Per resource: the distinct allocatable amounts, ascending, and for each the mask of the
        # types that have at least that much.
        self._thresholds: dict[str, tuple[list[int], list[int]]] = {}
        for name in {n for it in instance_types for n in it.allocatable}:
            ranked = sorted(((it.allocatable.get(name, 0), i) for i, it in enumerate(instance_types)), reverse=True)
            amounts, masks, mask = [], [], 0
            for position, (amount, i) in enumerate(ranked):
                mask |= 1 << i
                if position + 1 == len(ranked) or ranked[position + 1][0] != amount:
                    amounts.append(amount)
                    masks.append(mask)
            amounts.reverse()
            masks.reverse()
            self._thresholds[name] = (amounts, masks)
        self._label_masks: dict[str, dict[str, int]] = {}
        self._pinned: dict[tuple, CatalogView] = {}
        self._types_cache: dict[int, list[InstanceType]] = {}

    # masks --------------------------------------------------------------------------------------

    def fits_mask(self, requests: Mapping[str, int]) -> int:
        """The types whose allocatable holds `requests`."""
        mask = self.all_mask
        thresholds = self._thresholds
        for name, amount in requests.items():
            if amount <= 0:
                continue
            found = thresholds.get(name)
            if found is None:
                return 0
            amounts, masks = found
            position = bisect_left(amounts, amount)
            if position == len(amounts):
                return 0
            mask &= masks[position]
        return mask

    def mask_of(self, instance_types) -> int:
        index = self.index
        mask = 0
        for it in instance_types:
            mask |= 1 << index[it.name]
        return mask

    def types(self, mask: int) -> list[InstanceType]:
        """The types in `mask`, in catalog order."""
        found = self._types_cache.get(mask)
        if found is None:
            its = self.instance_types
            if mask == self.all_mask:
                found = list(its)
            else:
                found, rest = [], mask
                while rest:
                    low = rest & -rest
                    found.append(its[low.bit_length() - 1])
                    rest ^= low
            if len(self._types_cache) > 4096:
                self._types_cache.clear()
            self._types_cache[mask] = found
        return found

    def label_values(self, key: str, mask: int) -> int:
        """How many distinct values of an instance label the types in `mask` carry."""
        masks = self._label_masks.get(key)
        if masks is None:
            masks = self._label_masks[key] = {}
            for i, it in enumerate(self.instance_types):
                value = it.labels.get(key)
                if value is not None:
                    masks[value] = masks.get(value, 0) | (1 << i)
        return sum(1 for value_mask in masks.values() if value_mask & mask)

    def view(self, requirements: Requirements) -> CatalogView:
        key = requirements.restricted_key(self.relevant_keys)
        found = self._views.get(key)
        if found is None:
            found = self._views[key] = self._compute_view(requirements)
        return found

    def _candidate_indexes(self, requirements: Requirements) -> Iterable[int]:
        """The types worth matching, in catalog order: with an `In` on instance type names or on
        reservation ids (a claim that holds a unit), only those types; else all of them."""
        named = requirements.get(INSTANCE_TYPE)
        if named is not None and not named.complement and not named.admits_absent:
            return sorted(self.index[name] for name in named.values if name in self.index)
        held = requirements.get(RESERVATION_ID)
        if held is not None and not held.complement and not held.admits_absent:  # not DoesNotExist
            if self._by_reservation is None:
                self._by_reservation = {}
                for i, it in enumerate(self.instance_types):
                    for offering in it.offerings:
                        if offering.reservation is not None:
                            self._by_reservation.setdefault(offering.reservation.id, set()).add(i)
            return sorted(set().union(*(self._by_reservation.get(rid, ()) for rid in held.values)))
        return range(len(self.instance_types))

    def _compute_view(self, requirements: Requirements) -> CatalogView:
        names, reserved, open_price = set(), {}, {}
        mask = open_mask = spot_mask = reserved_mask = 0
        offering_masks: dict[str, dict[str, int]] = {}
        price_order, open_order, offers_by_price = [], [], {}
        for i in self._candidate_indexes(requirements):
            it = self.instance_types[i]
            if not it.matches(requirements, self.instance_keys):
                continue
            offers = [o for o in it.offerings if o.available and o.compatible(requirements)]
            if not offers:
                continue
            bit = 1 << i
            names.add(it.name)
            mask |= bit
            price_order.append((min(o.price for o in offers), it.name, i))
            for o in offers:
                offers_by_price.setdefault(o.capacity_type, []).append((o.price, it.name, o.zone, i, o))
                for key, value in o.labels.items():
                    by_value = offering_masks.setdefault(key, {})
                    by_value[value] = by_value.get(value, 0) | bit
            paid = [o.price for o in offers if not o.reserved]
            if paid:
                open_price[it.name] = min(paid)
                open_mask |= bit
                open_order.append((open_price[it.name], it.name, i))
            if any(o.capacity_type == SPOT for o in offers):
                spot_mask |= bit
            held = tuple(o for o in offers if o.reserved)
            if held:
                reserved[it.name] = held
                reserved_mask |= bit
        return CatalogView(frozenset(names), frozenset(open_price), reserved, open_price, mask, open_mask, spot_mask,
                           reserved_mask, offering_masks, tuple(sorted(price_order)),
                           {ct: tuple(sorted(offers, key=lambda e: e[:3])) for ct, offers in offers_by_price.items()},
                           tuple(sorted(open_order)),
                           reserved_at={self.index[name]: offers for name, offers in reserved.items()})

    def value_count(self, key: str, mask: int, requirements: Requirements) -> int:
        """Distinct values of `key` the types in `mask` offer under `requirements` (minValues)."""
        if key in OFFERING_LABELS:
            masks = self.view(requirements).offering_masks.get(key, {})
            return sum(1 for value_mask in masks.values() if value_mask & mask)
        return self.label_values(key, mask)

    def launch_rank_in(self, requirements: Requirements, key: str, value: str, mask: int) -> int:
        """`launch_rank` with `key` pinned to `value` (memoised per requirements and value)."""
        memo_key = (requirements.restricted_key(self.relevant_keys), key, value)
        view = self._pinned.get(memo_key)
        if view is None:
            view = self._pinned[memo_key] = self.view(requirements.intersect([Requirement.single(key, value)]))
        return _rank(view, mask)

    def launch_rank(self, requirements: Requirements, mask: int) -> int:
        """How good a launch the types in `mask` get under `requirements`: 0 reserved, 1 spot,
        2 on-demand (upstream's capacity-type precedence), 3 none."""
        return _rank(self.view(requirements), mask)

    def matching(self, requirements: Requirements) -> list[InstanceType]:
        """Instance types whose labels match, whatever their offerings (for explanations)."""
        return [it for it in self.instance_types if it.matches(requirements, self.instance_keys)]

    def compatible_offerings(self, it: InstanceType, requirements: Requirements) -> list[Offering]:
        return [o for o in it.offerings if o.compatible(requirements)]


def _rank(view, mask: int) -> int:
    """`launch_rank` on one view: its best capacity type among the types in `mask`."""
    mask &= view.mask
    if not mask:
        return 3
    if mask & view.reserved_mask:
        return CAPACITY_TYPE_PREFERENCE[RESERVED]
    if mask & view.spot_mask:
        return CAPACITY_TYPE_PREFERENCE[SPOT]
    return 2
