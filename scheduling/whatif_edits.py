"""The what-if page by editing: a form of changes to the current world, run through the engine
before and after (scheduling.engine.worldedits), shown side by side: what it costs, the prepaid
capacity left idle, and where each pod goes."""

import json
from types import SimpleNamespace

from django import forms
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from reservations.models import CapacityReservation, EC2NodeClass
from scheduling.engine.labels import CAPACITY_TYPE, RESERVATION_ID
from scheduling.engine.timeutil import format_time, parse_time
from scheduling.templatetags.karpweb import utc_minute
from scheduling.engine.worldedits import CAPACITY_TYPES, apply_edits, at_the_same_clock, summarize
from scheduling.models import CapacityType, InstanceType, NodePool, Offering, Pod
from scheduling.queries import idle_cost_per_hour
from scheduling.whatif import run_world
from scheduling.world import current_world

# The pods a scale-workload datalist suggests, and the placement rows a result shows: enough to
# read, few enough for a page (a world can hold 50,000 pods; the count says how many there are).
SUGGESTED_PODS = 200
PLACEMENT_ROWS = 100


class DataListInput(forms.TextInput):
    """A text input with suggestions (`<datalist>`): type anything, or pick one of the known values."""

    def __init__(self, options=(), attrs=None):
        super().__init__(attrs)
        self.options = list(options)

    def render(self, name, value, attrs=None, renderer=None):
        list_id = f"{(attrs or {}).get('id') or name}-options"
        field = super().render(name, value, {**(attrs or {}), "list": list_id, "autocomplete": "off"}, renderer)
        options = format_html_join("", '<option value="{}"></option>', ((option,) for option in self.options))
        return format_html('{}<datalist id="{}">{}</datalist>', field, list_id, options)


def _picker(label: str, what: str) -> forms.ChoiceField:
    return forms.ChoiceField(required=False, label=label, choices=(),
                             error_messages={"invalid_choice": f"no {what} '%(value)s' in this world: pick one from the list"})


class WorldEditForm(forms.Form):
    """Each group is optional; a filled one is one edit. Reservations and NodePools are picked from
    the database; instance types, zones and pods are suggested and checked."""

    add_instance_type = forms.CharField(required=False, max_length=64, label="Add a reservation: instance type")
    add_zone = forms.CharField(required=False, max_length=32, label="Zone")
    add_count = forms.IntegerField(required=False, min_value=1, max_value=10000, label="Instances")
    add_end = forms.DateTimeField(required=False, label="Ends (UTC, optional)",
                                  widget=forms.DateTimeInput(attrs={"placeholder": "2026-12-01 00:00"}))
    add_capacity_block = forms.BooleanField(required=False, label="A Capacity Block")
    remove_id = _picker("Remove reservation", "reservation")
    count_id = _picker("Resize reservation", "reservation")
    count = forms.IntegerField(required=False, min_value=0, max_value=10000, label="To instances")
    expire_id = _picker("Expire Capacity Block", "Capacity Block")
    scale_like = forms.CharField(required=False, max_length=510, label="Scale a workload: pods like (namespace/name)")
    scale_times = forms.IntegerField(required=False, min_value=1, max_value=1000, label="Copies")
    start_id = _picker("At the start of reservation", "reservation that has not started")
    pool = _picker("NodePool", "NodePool")
    pool_capacity_types = forms.MultipleChoiceField(required=False, choices=[(c, c) for c in CAPACITY_TYPES],
                                                    widget=forms.CheckboxSelectMultiple, label="Allows capacity types")
    node_class = _picker("EC2NodeClass", "EC2NodeClass")
    node_class_terms = forms.CharField(required=False, max_length=20000, label="capacityReservationSelectorTerms (JSON)",
                                       widget=forms.Textarea(attrs={"rows": 3, "cols": 60,
                                                                    "placeholder": '[{"id": "cr-0123456789abcdef0"}]'}))

    # (legend, what it is for, fields): how the page groups them.
    GROUPS = (
        ("Capacity changes", "Add a reservation, or remove, resize or expire one karpweb knows.",
         (("add_instance_type", "add_zone", "add_count", "add_end", "add_capacity_block"),
          ("remove_id",), ("count_id", "count"), ("expire_id",))),
        ("Workload changes", "Pending copies of a pod that runs now, as if its workload scaled up.",
         (("scale_like", "scale_times"),)),
        ("What to compare", "The plan with a NodePool allowed other capacity types than it has, or with an "
                            "EC2NodeClass's capacityReservationSelectorTerms replaced (as its selector editor saves them).",
         (("pool", "pool_capacity_types"), ("node_class", "node_class_terms"))),
        ("When", "The plan at the start of a reservation that has not started: the clock at its start, it active "
                 "with every unit free (consolidation then moves pods from paid nodes into it).",
         (("start_id",),)),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        reservations = list(CapacityReservation.objects.order_by("reservation_id").only(
            "reservation_id", "instance_type", "availability_zone", "reservation_type", "state",
            "total_instance_count", "available_instance_count", "start_date", "interruptible_allocation"))
        choices = [("", "—")] + [(r.reservation_id, _reservation_label(r)) for r in reservations]
        self.fields["remove_id"].choices = choices
        self.fields["count_id"].choices = choices
        self.fields["expire_id"].choices = [("", "—")] + [
            (r.reservation_id, _reservation_label(r)) for r in reservations if r.is_capacity_block]
        now = timezone.now()
        self.fields["start_id"].choices = [("", "—")] + [
            (r.reservation_id, f"{_reservation_label(r)}, starts {utc_minute(r.start_date)} UTC")
            for r in reservations if r.is_upcoming(now) and r.start_date is not None]
        self.fields["pool"].choices = [("", "—")] + [(name, name) for name in
                                                     NodePool.objects.order_by("name").values_list("name", flat=True)]
        self.fields["node_class"].choices = [("", "—")] + [
            (name, name) for name in EC2NodeClass.objects.order_by("name").values_list("name", flat=True)]
        self.instance_types = list(InstanceType.objects.order_by("name").values_list("name", flat=True))
        self.zones = sorted(set(Offering.objects.exclude(capacity_type=CapacityType.RESERVED)
                                .values_list("zone", flat=True).distinct()))
        self.fields["add_instance_type"].widget = DataListInput(self.instance_types)
        self.fields["add_zone"].widget = DataListInput(self.zones)
        pods = (Pod.objects.exclude(owner_kind="DaemonSet").order_by("namespace", "name")
                .values_list("namespace", "name")[:SUGGESTED_PODS])
        self.fields["scale_like"].widget = DataListInput(f"{namespace}/{name}" for namespace, name in pods)

    def clean_add_instance_type(self):
        name = self.cleaned_data.get("add_instance_type", "").strip()
        if name and name not in self.instance_types:
            raise forms.ValidationError(f"no instance type '{name}' in the catalogue: pick one from the list")
        return name

    def clean_add_zone(self):
        zone = self.cleaned_data.get("add_zone", "").strip()
        if zone and self.zones and zone not in self.zones:
            raise forms.ValidationError(f"no zone '{zone}' in the catalogue (known: {', '.join(self.zones[:8])})")
        return zone

    def clean_node_class_terms(self):
        text = self.cleaned_data.get("node_class_terms", "").strip()
        if not text:
            return ""
        try:
            terms = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"not JSON: {exc}") from None
        if not isinstance(terms, list) or not all(isinstance(term, dict) for term in terms):
            raise forms.ValidationError('a JSON list of selector terms, such as [{"id": "cr-0123456789abcdef0"}]')
        return terms

    def clean(self):
        data = super().clean()
        pairs = (("add_instance_type", "add_count"), ("add_zone", "add_count"), ("count_id", "count"),
                 ("scale_like", "scale_times"), ("pool", "pool_capacity_types"), ("node_class", "node_class_terms"))
        for first, second in pairs:
            if first in self.errors or second in self.errors:
                continue
            if bool(data.get(first)) != (data.get(second) not in (None, "", [])):
                missing = second if data.get(first) else first
                self.add_error(missing, "required with " + self.fields[first if missing == second else second].label)
        return data

    def groups(self) -> list[dict]:
        """The fieldsets as the template renders them: each a legend, a line and rows of bound fields."""
        return [{"legend": legend, "help": help_text, "rows": [[self[name] for name in row] for row in rows]}
                for legend, help_text, rows in self.GROUPS]

    def edits(self) -> list[dict]:
        data, edits = self.cleaned_data, []
        if data.get("add_instance_type"):
            edits.append({"kind": "add-reservation", "instanceType": data["add_instance_type"], "zone": data["add_zone"],
                          "count": data["add_count"], "capacityBlock": bool(data.get("add_capacity_block")),
                          **({"end": format_time(data["add_end"])} if data.get("add_end") else {})})
        if data.get("remove_id"):
            edits.append({"kind": "remove-reservation", "id": data["remove_id"]})
        if data.get("count_id"):
            edits.append({"kind": "set-reservation-count", "id": data["count_id"], "count": data["count"]})
        if data.get("expire_id"):
            edits.append({"kind": "expire-block", "id": data["expire_id"]})
        if data.get("scale_like"):
            edits.append({"kind": "scale-workload", "like": data["scale_like"], "times": data["scale_times"]})
        if data.get("start_id"):
            edits.append({"kind": "at-reservation-start", "id": data["start_id"]})
        if data.get("pool"):
            edits.append({"kind": "nodepool-capacity-types", "nodePool": data["pool"], "values": data["pool_capacity_types"]})
        if data.get("node_class"):
            edits.append({"kind": "nodeclass-selector-terms", "nodeClass": data["node_class"], "terms": data["node_class_terms"]})
        return edits


def _reservation_label(r: CapacityReservation) -> str:
    kind = "Capacity Block" if r.is_capacity_block else "ODCR"
    state = "" if r.state == CapacityReservation.State.ACTIVE else f", {r.state}"
    return (f"{r.reservation_id}: {kind} {r.instance_type} in {r.availability_zone}, "
            f"{r.used_instance_count}/{r.total_instance_count} used{state}")


FIELD_OF = {"add-reservation": "add_count", "remove-reservation": "remove_id", "set-reservation-count": "count",
            "expire-block": "expire_id", "scale-workload": "scale_like", "nodepool-capacity-types": "pool",
            "nodeclass-selector-terms": "node_class_terms", "at-reservation-start": "start_id"}


def before_and_after(edits: list[dict]) -> dict:
    """The current world's plan and the edited one's, summarised (with the idle prepaid capacity and
    each pod's placement), both at the edited world's clock (`at`: that moment, when an edit moved it);
    `problems` names each bad edit."""
    current = current_world(timezone.now())
    edited, problems = apply_edits(current, edits)
    world = at_the_same_clock(current, edited, edits)  # both plans at one clock: like with like
    before, after = run_world(world), run_world(edited)
    result = {
        "problems": problems + before.problems + after.problems,
        "before": summary(world, before.decisions) if before.ok else None,
        "after": summary(edited, after.decisions) if after.ok else None,
        "at": edited.get("now") if world is not current else None,
    }
    if before.ok and after.ok:
        result["placements"] = placements(world, before.decisions, edited, after.decisions)
    return result


def summary(world: dict, decisions: dict) -> dict:
    return {**summarize(decisions), "idleDollarsPerHour": idle_dollars_per_hour(world, decisions)}


def idle_dollars_per_hour(world: dict, decisions: dict) -> float:
    """The prepaid capacity a plan leaves idle: the free units of every usable reservation less the
    launches the plan makes into it, an ODCR's at the on-demand list price and a Capacity Block's at its own
    price per unit-hour (scheduling.queries.idle_cost_per_hour, as the overview and the reservation pages count it)."""
    prices = {}
    for it in world.get("instanceTypes") or []:
        for offering in it.get("offerings") or []:
            if offering.get("capacityType") == "on-demand" and isinstance(offering.get("price"), int | float):
                prices[(it.get("name"), offering.get("zone"))] = offering["price"]
    launched: dict[str, int] = {}
    for claim in decisions.get("nodeClaims") or []:
        rid = (claim.get("launch") or {}).get("reservationID")
        if rid:
            launched[rid] = launched.get(rid, 0) + 1
    now = parse_time(world["now"]) if world.get("now") else timezone.now()
    total = 0.0
    for item in world.get("capacityReservations") or []:
        end = item.get("EndDate")
        if item.get("State", "active") != "active" or (end and parse_time(end) <= now):
            continue
        free = max(int(item.get("AvailableInstanceCount") or 0) - launched.get(item.get("CapacityReservationId"), 0), 0)
        start = item.get("StartDate")
        reservation = SimpleNamespace(instance_type=item.get("InstanceType"), availability_zone=item.get("AvailabilityZone"),
                                      available_instance_count=free, reservation_id=item.get("CapacityReservationId"),
                                      is_capacity_block=item.get("ReservationType") == "capacity-block",
                                      total_instance_count=int(item.get("TotalInstanceCount") or 0),
                                      start_date=parse_time(start) if start else None, end_date=parse_time(end) if end else None,
                                      is_usable=lambda now=None: True)  # ended ones were skipped above
        total += idle_cost_per_hour(reservation, prices) or 0.0
    return total


def placements(world: dict, before: dict, edited: dict, after: dict) -> dict:
    """Where each pod the plans place (or leave pending) goes, before and after: the pods whose
    placement changed first, at most PLACEMENT_ROWS rows, with the count of all."""
    was, now = _placed(world, before), _placed(edited, after)
    keys = sorted(set(was) | set(now), key=lambda key: (was.get(key) == now.get(key), key))
    rows = [{"pod": key, "before": was.get(key), "after": now.get(key), "changed": was.get(key) != now.get(key)}
            for key in keys]
    return {"rows": rows[:PLACEMENT_ROWS], "count": len(rows), "changed": sum(1 for row in rows if row["changed"])}


def _placed(world: dict, decisions: dict) -> dict[str, dict]:
    nodes = {}
    for node in world.get("nodes") or []:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        nodes[meta.get("name")] = {"capacityType": labels.get(CAPACITY_TYPE, ""), "reservation": labels.get(RESERVATION_ID, "")}
    where: dict[str, dict] = {}
    for claim in decisions.get("nodeClaims") or []:
        launch = claim.get("launch") or {}
        for pod in claim.get("pods") or []:
            where[pod] = {"node": f"new {launch.get('instanceType', '')} in {launch.get('zone', '')} "
                                  f"(NodePool {claim.get('nodePool', '')})",
                          "capacityType": launch.get("capacityType", ""), "reservation": launch.get("reservationID", "")}
    for binding in decisions.get("bindings") or []:
        where[binding["pod"]] = {"node": binding["node"], **nodes.get(binding["node"], {"capacityType": "", "reservation": ""})}
    for kind in ("unschedulable", "deferred"):
        for entry in decisions.get(kind) or []:
            where[entry["pod"]] = {"node": "", "capacityType": "", "reservation": "", "pending": f"{kind}: {entry['reason']}"}
    return where
