"""Editing an EC2NodeClass's capacityReservationSelectorTerms: validate with the engine's
messages, preview what the new terms select, and save without losing a concurrent edit.

The UI, the API and the admin all save through `save_selector_terms`."""

import difflib
import json
from types import SimpleNamespace

from django.db import transaction
from django.utils import timezone

from fleet.scope import scope_of
from karpweb.jsonsafe import json_problems, printable
from reservations.doctor import recheck_node_class
from reservations.models import EC2NodeClass
from reservations.status import resolve_from_database, write_node_class_status
from scheduling.adapters.kube import clusters as kube_clusters
from scheduling.audit import diff, record_change
from scheduling.engine.selectors import NodeClassReservations, parse_terms

FIELD = "capacityReservationSelectorTerms"


class InvalidSelectorTerms(ValueError):
    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


class SelectorTermConflict(Exception):
    """Someone else changed the EC2NodeClass after this edit read it."""


# EC2's own limits: a longer tag can never match a reservation.
MAX_TAG_KEY, MAX_TAG_VALUE = 128, 256
# Any other value of a term, in the editor and the API alike: a resource group ARN may be ~380
# characters (group names up to 300), and nothing longer can match.
MAX_FIELD_LENGTH = 512


def validation_problems(terms) -> list[str]:
    """The engine's per-term messages, e.g. `capacityReservationSelectorTerms[1].id: "x" does not match ^cr-[0-9a-z]+$`,
    then what could not be stored (NUL characters, non-finite numbers) or never match (over-long tags)."""
    problems = parse_terms(terms, FIELD)[1] + json_problems(terms, FIELD)
    for index, term in enumerate(terms if isinstance(terms, list) else []):
        tags = term.get("tags") if isinstance(term, dict) else None
        for name, value in (term.items() if isinstance(term, dict) else []):
            if isinstance(value, str) and len(value) > MAX_FIELD_LENGTH:
                problems.append(f"{FIELD}[{index}].{printable(name, 40)}: longer than {MAX_FIELD_LENGTH} characters")
        for key, value in (tags.items() if isinstance(tags, dict) else []):
            where = f"{FIELD}[{index}].tags"
            if isinstance(key, str) and len(key) > MAX_TAG_KEY:
                problems.append(f"{where}: the key {printable(key, 40)!r} is longer than {MAX_TAG_KEY} characters (EC2's limit)")
            if isinstance(value, str) and len(value) > MAX_TAG_VALUE:
                problems.append(f"{where}.{printable(key, 40)}: longer than {MAX_TAG_VALUE} characters (EC2's limit)")
    return problems


def preview(node_class: EC2NodeClass, terms, now=None) -> NodeClassReservations:
    """What `terms` would select for this class, from the reservations karpweb knows."""
    now = now or timezone.now()
    stand_in = SimpleNamespace(name=node_class.name, capacity_reservation_selector_terms=terms)
    with scope_of(node_class):  # the reservations the class's own cluster sees
        return resolve_from_database([stand_in], now)[node_class.name]


def terms_diff(old, new) -> str:
    before = json.dumps(old, indent=2, sort_keys=True).splitlines()
    after = json.dumps(new, indent=2, sort_keys=True).splitlines()
    return "\n".join(difflib.unified_diff(before, after, "current", "edited", lineterm="", n=2))


def _write_to_cluster(adapter, node_class: EC2NodeClass, terms, read_version: str) -> str:
    """Write through the class's own cluster's Kubernetes API (which refuses a stale resourceVersion);
    the new version."""
    try:
        written = adapter.update_selector_terms(node_class.name, terms, read_version)
    except Exception as exc:
        if getattr(exc, "conflict", False):
            raise SelectorTermConflict(str(exc)) from exc
        raise
    return written["metadata"]["resourceVersion"]


def _next_version(read_version: str) -> str:
    return str(int(read_version) + 1) if read_version.isdigit() else "1"


@transaction.atomic
def save_selector_terms(node_class: EC2NodeClass, terms, read_version: str, *, user, source: str) -> EC2NodeClass:
    """Replace the whole list if the class is still at `read_version`; else SelectorTermConflict."""
    problems = validation_problems(terms)
    if problems:
        raise InvalidSelectorTerms(problems)
    if not isinstance(read_version, str) or "\x00" in read_version:
        raise SelectorTermConflict(
            f"EC2NodeClass {node_class.name}: {printable(read_version, 40)!r} is no version it ever had; "
            "reload it and apply your edit again"
        )
    adapter = kube_clusters.writer_for(node_class.cluster)
    if adapter is not None:
        new_version = _write_to_cluster(adapter, node_class, terms, read_version)
    else:
        new_version = _next_version(read_version)
    # Compare-and-swap on the version: of two concurrent saves only one matches.
    updated = EC2NodeClass.objects.filter(pk=node_class.pk, resource_version=read_version).update(
        capacity_reservation_selector_terms=terms, resource_version=new_version
    )
    if not updated:
        raise SelectorTermConflict(
            f"EC2NodeClass {node_class.name} changed after version {read_version or '(none)'} was read "
            "(someone else edited it); reload it and apply your edit again"
        )
    old_terms = node_class.capacity_reservation_selector_terms
    node_class.refresh_from_db()
    record_change(user=user, source=source, obj=node_class, action="change",
                  changes=diff({"capacity_reservation_selector_terms": old_terms},
                               {"capacity_reservation_selector_terms": terms}))
    now = timezone.now()
    write_node_class_status(node_class, preview(node_class, terms, now), now)
    recheck_node_class(node_class, now)  # its page, just saved, shows no finding the edit fixed
    return node_class
