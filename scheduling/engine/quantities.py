"""Kubernetes resource quantities as integers, and resource lists.

CPU is kept in millicores and every other resource (memory, pods, ephemeral-storage, GPUs) in its
base unit, so that comparisons in the scheduler's hot loop are plain integer comparisons. Values
are rounded up, as the Kubernetes API does when it turns a quantity into an integer.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import Decimal, InvalidOperation
from typing import Iterable, Mapping

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exponent>[eE][+-]?\d+)|(?P<decimal>[numkMGTPE]?))$"
)
# Larger exponents are typos, and would make Decimal build enormous integers.
_MAX_EXPONENT = 30


class QuantityError(ValueError):
    """A value that is not a valid Kubernetes quantity; the message names the value."""

    def __init__(self, value: object, problem: str = "is not a quantity"):
        self.value = value
        super().__init__(f"{_show(value)} {problem}")


def _show(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def parse_decimal(value: object) -> Decimal:
    """The exact decimal value of a quantity such as `500m`, `1.5Gi`, `1e3` or a JSON number."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise QuantityError(value)
    text = str(value).strip() if isinstance(value, str) else repr(value)
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(value)
    try:
        number = Decimal(match["number"])
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid decimals
        raise QuantityError(value) from exc
    if match["binary"]:
        return number * _BINARY[match["binary"]]
    if match["exponent"]:
        exponent = int(match["exponent"][1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(value, "is too large")
        return number.scaleb(exponent)
    return number * _DECIMAL[match["decimal"] or ""]


def parse_quantity(value: object, *, milli: bool = False) -> int:
    """Parse a non-negative quantity into base units, or milli-units when `milli` is set."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        # A cluster repeats a handful of quantities across tens of thousands of pods.
        return _parse_plain_quantity(value, milli)
    return _parse_quantity(value, milli)  # raises QuantityError for what is not a quantity


@functools.lru_cache(maxsize=4096, typed=True)
def _parse_plain_quantity(value: str | int | float, milli: bool) -> int:
    return _parse_quantity(value, milli)


def _parse_quantity(value: object, milli: bool) -> int:
    number = parse_decimal(value)
    if number < 0:
        raise QuantityError(value, "must not be negative")
    if milli:
        number *= 1000
    if number > Decimal(2**63):
        raise QuantityError(value, "is too large")
    return math.ceil(number)


def parse_resource(name: str, value: object) -> int:
    """Parse one resource value in the engine's unit for that resource (millicores for cpu)."""
    return parse_quantity(value, milli=(name == CPU))


def format_resource(name: str, amount: int) -> str:
    """Render an amount as Kubernetes people read it: cpu in cores or millicores (`96`, `250m`,
    `1500m`); memory and storage with a binary suffix (`4Gi`, `256Mi`), a decimal one when that is
    exact and the binary is not (`1G`), else about three digits of the largest binary unit
    (`1.85Ti`); other resources as plain counts."""
    if name == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if name in (MEMORY, EPHEMERAL_STORAGE) and amount:
        return _format_bytes(amount)
    return str(amount)


_BINARY_DESCENDING = sorted(_BINARY.items(), key=lambda item: -item[1])
_DECIMAL_DESCENDING = [(suffix, int(factor)) for suffix, factor in _DECIMAL.items() if factor >= 1000][::-1]
_MAX_EXACT_DIGITS = 4  # 7577Mi reads well; 1938410Mi does not, 1.85Ti does


def _format_bytes(amount: int) -> str:
    for units in (_BINARY_DESCENDING, _DECIMAL_DESCENDING):
        for suffix, unit in units:
            if amount % unit == 0 and amount // unit < 10**_MAX_EXACT_DIGITS:
                return f"{amount // unit}{suffix}"
    for suffix, unit in _BINARY_DESCENDING:
        if amount >= unit:
            # '#' keeps trailing zeros, so a rounded 3.00Gi does not pass for an exact 3Gi.
            return f"{format(amount / unit, '#.3g').rstrip('.')}{suffix}"
    return str(amount)


class ResourceList(dict):
    """A mapping from resource name to an integer amount (see the module docstring for units).

    A missing resource counts as zero. The operations return new lists and never mutate.
    """

    __slots__ = ()

    @classmethod
    def parse(cls, mapping: Mapping[str, object]) -> "ResourceList":
        return cls({name: parse_resource(name, value) for name, value in mapping.items()})

    def add(self, other: Mapping[str, int]) -> "ResourceList":
        result = ResourceList(self)
        for name, amount in other.items():
            result[name] = result.get(name, 0) + amount
        return result

    def sub(self, other: Mapping[str, int]) -> "ResourceList":
        """Subtract, flooring at zero: a node never has negative room."""
        result = ResourceList(self)
        for name, amount in other.items():
            result[name] = max(0, result.get(name, 0) - amount)
        return result

    def fits(self, available: Mapping[str, int]) -> bool:
        """True when every amount here is at most the same resource in `available`."""
        get = available.get
        for name, amount in self.items():
            if amount > get(name, 0):
                return False
        return True

    def exceeding(self, available: Mapping[str, int]) -> list[str]:
        """The resource names for which this list asks more than `available` has."""
        return [name for name, amount in self.items() if amount > available.get(name, 0)]

    def max(self, other: Mapping[str, int]) -> "ResourceList":
        result = ResourceList(self)
        for name, amount in other.items():
            if amount > result.get(name, 0):
                result[name] = amount
        return result

    def format(self, names: Iterable[str] | None = None) -> str:
        """`cpu=1500m, memory=4Gi` (zero amounts left out, cpu and memory first)."""
        keys = list(names) if names is not None else sorted(self, key=_display_order)
        return ", ".join(f"{n}={format_resource(n, self.get(n, 0))}" for n in keys if self.get(n, 0))


def _display_order(name: str) -> tuple[int, str]:
    return ({CPU: 0, MEMORY: 1}.get(name, 2), name)


def sum_resources(lists: Iterable[Mapping[str, int]]) -> ResourceList:
    total = ResourceList()
    for item in lists:
        for name, amount in item.items():
            total[name] = total.get(name, 0) + amount
    return total
