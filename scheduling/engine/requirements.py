"""Label requirements: `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt` (and a NodePool's `Gte`,
`Lte`, kept as the equivalent integer `Gt`/`Lt`), and their algebra.

A requirement is the set of states one label key may be in, stored as upstream Karpenter stores
it (`pkg/scheduling/requirement.go`): a finite set of values (`In`) or the complement of one
(`NotIn`, `Exists`), optionally bounded by integer limits (`Gt`, `Lt`); plus, unlike upstream, an
explicit flag saying whether the label may be absent (`NotIn`, `DoesNotExist`). Upstream
represents `DoesNotExist` as the empty value set, so `In [a]` AND `DoesNotExist` (or `In [a]` AND
`In [b]`) collapses into `DoesNotExist` and matches nodes without the label; here it is empty and
matches nothing, as in Kubernetes. Intersection stays closed and cheap, which is what the
scheduler needs: a node claim's requirements are the intersection of its NodePool's and of every
pod's on it.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Mapping

from .labels import NORMALIZED_LABELS, WELL_KNOWN_LABELS

IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
GTE, LTE = "Gte", "Lte"  # karpenter.sh/v1 NodePools and NodeClaims only; pods have Gt and Lt
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE)


class RequirementError(ValueError):
    """A node selector requirement that Kubernetes would reject."""


def _as_int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


class Requirement:
    """The set of values one label key may take (see the module docstring)."""

    __slots__ = ("key", "complement", "values", "gt", "lt", "absent", "min_values", "_sig")

    def __init__(self, key: str, complement: bool, values: Iterable[str] = (), gt: int | None = None,
                 lt: int | None = None, min_values: int | None = None, *, absent: bool = False):
        self.key = key
        self.complement = complement
        self.values = frozenset(values)
        self.gt = gt
        self.lt = lt
        self.absent = absent  # a node without the label satisfies it
        self.min_values = min_values
        self._sig = (key, complement, tuple(sorted(self.values)), gt, lt, absent)

    # construction -------------------------------------------------------------------------------

    @classmethod
    def of(cls, key: str, operator: str, values: Iterable[str] = (),
           min_values: int | None = None) -> "Requirement":
        """Build from a Kubernetes node selector requirement; raises RequirementError."""
        key = NORMALIZED_LABELS.get(key, key)
        values = list(values)
        if operator in (IN, NOT_IN):
            if not values:
                raise RequirementError(f"operator {operator} needs at least one value")
            return cls(key, operator == NOT_IN, values, min_values=min_values, absent=operator == NOT_IN)
        if operator in (EXISTS, DOES_NOT_EXIST):
            if values:
                raise RequirementError(f"operator {operator} takes no values")
            return cls(key, operator == EXISTS, min_values=min_values, absent=operator == DOES_NOT_EXIST)
        if operator in (GT, LT, GTE, LTE):
            bound = _as_int(values[0]) if len(values) == 1 else None
            if bound is None:
                raise RequirementError(f"operator {operator} needs exactly one integer value")
            if operator in (GTE, LTE) and bound < 0:
                raise RequirementError(f"operator {operator} needs a non-negative integer, got {bound}")
            # Values are integers, so `Gte n` is `Gt n-1` and `Lte n` is `Lt n+1`.
            lower = {GT: bound, GTE: bound - 1}.get(operator)
            upper = {LT: bound, LTE: bound + 1}.get(operator)
            return cls(key, True, gt=lower, lt=upper, min_values=min_values)
        raise RequirementError(f'unknown operator "{operator}" (expected one of {", ".join(OPERATORS)})')

    @classmethod
    def single(cls, key: str, value: str) -> "Requirement":
        return cls(NORMALIZED_LABELS.get(key, key), False, (value,))

    # queries ------------------------------------------------------------------------------------

    @property
    def operator(self) -> str:
        """The closest single Kubernetes operator (for display and tests)."""
        if self.complement:
            if self.gt is not None:
                return GT
            if self.lt is not None:
                return LT
            return NOT_IN if self.absent else EXISTS
        return DOES_NOT_EXIST if self.absent else IN

    def _within_bounds(self, value: str) -> bool:
        if self.gt is None and self.lt is None:
            return True
        number = _as_int(value)
        if number is None:
            return False
        return (self.gt is None or number > self.gt) and (self.lt is None or number < self.lt)

    def has(self, value: str) -> bool:
        """Whether a node whose label has this value satisfies the requirement."""
        if self.complement:
            return value not in self.values and self._within_bounds(value)
        return value in self.values

    @property
    def admits_absent(self) -> bool:
        """Whether a node without the label satisfies the requirement (NotIn, DoesNotExist)."""
        return self.absent

    def is_empty(self) -> bool:
        """No node satisfies it, with or without the label."""
        return not self.complement and not self.values and not self.absent

    def intersection(self, other: "Requirement") -> "Requirement":
        gt = _max_opt(self.gt, other.gt)
        lt = _min_opt(self.lt, other.lt)
        min_values = _max_opt(self.min_values, other.min_values)
        absent = self.absent and other.absent
        if gt is not None and lt is not None and gt + 1 >= lt:
            return Requirement(self.key, False, min_values=min_values, absent=absent)
        if self.complement and other.complement:
            return Requirement(self.key, True, self.values | other.values, gt, lt, min_values, absent=absent)
        if self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        if gt is not None or lt is not None:
            bounds = Requirement(self.key, True, (), gt, lt)
            values = {v for v in values if bounds._within_bounds(v)}
        return Requirement(self.key, False, values, min_values=min_values, absent=absent)

    def any_value(self) -> str | None:
        """A deterministic value that satisfies the requirement, for labelling a new node."""
        if not self.complement:
            return min(self.values) if self.values else None
        candidate = 0 if self.gt is None else max(0, self.gt + 1)
        while str(candidate) in self.values:
            candidate += 1
        if self.lt is not None and candidate >= self.lt:
            return None
        return str(candidate)

    # identity and display -----------------------------------------------------------------------

    @property
    def sig(self) -> tuple:
        return self._sig

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Requirement) and self._sig == other._sig

    def __hash__(self) -> int:
        return hash(self._sig)

    def __repr__(self) -> str:
        return f"Requirement({self})"

    def __str__(self) -> str:
        values = ", ".join(sorted(self.values))
        if not self.complement:
            if self.absent:
                return f"{self.key} DoesNotExist"
            return f"{self.key} In [{values}]"
        bounded = self.gt is not None or self.lt is not None
        parts = ["Exists"] if not self.absent and self.values and not bounded else []
        if self.gt is not None:
            parts.append(f"Gt {self.gt}")
        if self.lt is not None:
            parts.append(f"Lt {self.lt}")
        if self.values:
            parts.append(f"NotIn [{values}]")
        return f"{self.key} {', '.join(parts)}" if parts else f"{self.key} Exists"


def _max_opt(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _min_opt(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


class Requirements:
    """Requirements on several keys, ANDed. Immutable: `intersect` returns a new object, or the
    same object when nothing changed, so callers can detect "no new constraint" by identity."""

    __slots__ = ("_reqs", "_key", "_restricted", "_hash")

    def __init__(self, requirements: Iterable[Requirement] = ()):
        reqs: dict[str, Requirement] = {}
        for req in requirements:
            existing = reqs.get(req.key)
            reqs[req.key] = req if existing is None else existing.intersection(req)
        self._reqs = reqs
        self._key: tuple | None = None
        self._restricted: dict | None = None
        self._hash: int | None = None

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> "Requirements":
        return cls(Requirement.single(k, v) for k, v in labels.items())

    def get(self, key: str) -> Requirement | None:
        return self._reqs.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._reqs

    def __iter__(self) -> Iterator[Requirement]:
        return iter(self._reqs.values())

    def __len__(self) -> int:
        return len(self._reqs)

    def keys(self):
        return self._reqs.keys()

    @property
    def key(self) -> tuple:
        """A hashable identity, used to cache work per distinct set of requirements."""
        if self._key is None:
            self._key = tuple(sorted(r.sig for r in self._reqs.values()))
        return self._key

    def restricted_key(self, keys: frozenset[str]) -> tuple:
        """The identity of the requirements on `keys` only (memoised per key set)."""
        if self._restricted is None:
            self._restricted = {}
        found = self._restricted.get(keys)
        if found is None:
            found = self._restricted[keys] = tuple(sorted(r.sig for k, r in self._reqs.items() if k in keys))
        return found

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Requirements) and self.key == other.key

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self.key)
        return self._hash

    def __repr__(self) -> str:
        return f"Requirements({self})"

    def __str__(self) -> str:
        return ", ".join(str(r) for r in sorted(self._reqs.values(), key=lambda r: r.key))

    def intersect(self, other: "Requirements | Iterable[Requirement]") -> "Requirements":
        merged: dict[str, Requirement] | None = None
        for req in other:
            current = (merged or self._reqs).get(req.key)
            new = req if current is None else current.intersection(req)
            if new is current or (current is not None and new.sig == current.sig
                                  and new.min_values == current.min_values):
                continue
            if merged is None:
                merged = dict(self._reqs)
            merged[req.key] = new
        if merged is None:
            return self
        result = Requirements()
        result._reqs = merged
        return result  # its _key and _hash are computed when first asked

    def compatible(self, incoming: "Requirements",
                   allow_undefined: frozenset[str] = WELL_KNOWN_LABELS) -> str | None:
        """Whether a node with these requirements can satisfy `incoming` (a pod's), as upstream
        `Compatible` with `AllowUndefinedWellKnownLabels`: a custom key the node does not define
        only passes with NotIn/DoesNotExist; then every shared key must intersect. Returns the
        problem in words, or None."""
        for req in incoming:
            key = req.key
            if key not in self._reqs and key not in allow_undefined and not req.admits_absent:
                return f'label {key} is not defined'
        return self.intersects(incoming)

    def intersects(self, incoming: "Requirements") -> str | None:
        for req in incoming:
            existing = self._reqs.get(req.key)
            if existing is None or existing is req:
                continue
            if existing.intersection(req).is_empty():
                return f"{req} conflicts with {existing}"
        return None

    def satisfiable(self) -> bool:
        """False when some key can be in no state at all (e.g. `In [a]` AND `DoesNotExist`)."""
        return not any(req.is_empty() for req in self._reqs.values())

    def matches_labels(self, labels: Mapping[str, str]) -> bool:
        """Kubernetes node selection: every requirement holds for a node with these labels."""
        for req in self._reqs.values():
            value = labels.get(req.key)
            if value is None:
                if not req.admits_absent:
                    return False
            elif not req.has(value):
                return False
        return True

    def first_mismatch(self, labels: Mapping[str, str]) -> Requirement | None:
        for req in self._reqs.values():
            value = labels.get(req.key)
            if (req.admits_absent if value is None else req.has(value)) is False:
                return req
        return None


EMPTY = Requirements()
