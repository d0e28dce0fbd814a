"""The instance types one EC2NodeClass can launch, with answers cached per set of requirements.

Scheduling asks the same question many times: "which instance types, and which of their
offerings, are compatible with these requirements?". The answer depends only on the requirements
on instance and offering labels, so it is computed once per distinct such set (node claims differ
in hostname and pod labels, not in these) and the scheduler's per-pod work is set lookups.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .instancetypes import InstanceType, Offering
from .labels import OFFERING_LABELS, WELL_KNOWN_LABELS
from .requirements import Requirements


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

    def view(self, requirements: Requirements) -> CatalogView:
        key = requirements.restricted_key(self.relevant_keys)
        found = self._views.get(key)
        if found is None:
            found = self._views[key] = self._compute_view(requirements)
        return found

    def _compute_view(self, requirements: Requirements) -> CatalogView:
        names, reserved, open_price = set(), {}, {}
        for it in self.instance_types:
            if not it.matches(requirements, self.instance_keys):
                continue
            offers = [o for o in it.offerings if o.available and o.compatible(requirements)]
            if not offers:
                continue
            names.add(it.name)
            paid = [o.price for o in offers if not o.reserved]
            if paid:
                open_price[it.name] = min(paid)
            held = tuple(o for o in offers if o.reserved)
            if held:
                reserved[it.name] = held
        return CatalogView(frozenset(names), frozenset(open_price), reserved, open_price)

    def matching(self, requirements: Requirements) -> list[InstanceType]:
        """Instance types whose labels match, whatever their offerings (for explanations)."""
        return [it for it in self.instance_types if it.matches(requirements, self.instance_keys)]

    def compatible_offerings(self, it: InstanceType, requirements: Requirements) -> list[Offering]:
        return [o for o in it.offerings if o.compatible(requirements)]
