"""The what-if page by editing: a form of changes to the current world, run through the engine
before and after (scheduling.engine.worldedits), shown side by side."""

from django import forms
from django.utils import timezone

from scheduling.engine.timeutil import format_time
from scheduling.engine.worldedits import CAPACITY_TYPES, apply_edits, summarize
from scheduling.whatif import run_world
from scheduling.world import current_world


class WorldEditForm(forms.Form):
    """Each group is optional; a filled one is one edit."""

    add_instance_type = forms.CharField(required=False, max_length=64, label="Add a reservation: instance type")
    add_zone = forms.CharField(required=False, max_length=32, label="Zone")
    add_count = forms.IntegerField(required=False, min_value=1, max_value=10000, label="Instances")
    add_end = forms.DateTimeField(required=False, label="Ends (UTC, optional)")
    add_capacity_block = forms.BooleanField(required=False, label="A Capacity Block")
    remove_id = forms.CharField(required=False, max_length=64, label="Remove reservation")
    count_id = forms.CharField(required=False, max_length=64, label="Resize reservation")
    count = forms.IntegerField(required=False, min_value=0, max_value=10000, label="To instances")
    expire_id = forms.CharField(required=False, max_length=64, label="Expire Capacity Block")
    scale_like = forms.CharField(required=False, max_length=510, label="Scale a workload: pods like (namespace/name)")
    scale_times = forms.IntegerField(required=False, min_value=1, max_value=1000, label="Copies")
    pool = forms.CharField(required=False, max_length=253, label="NodePool")
    pool_capacity_types = forms.MultipleChoiceField(required=False, choices=[(c, c) for c in CAPACITY_TYPES],
                                                    widget=forms.CheckboxSelectMultiple, label="Allows capacity types")

    def clean(self):
        data = super().clean()
        pairs = (("add_instance_type", "add_count"), ("add_zone", "add_count"), ("count_id", "count"),
                 ("scale_like", "scale_times"), ("pool", "pool_capacity_types"))
        for first, second in pairs:
            if bool(data.get(first)) != (data.get(second) not in (None, "", [])):
                missing = second if data.get(first) else first
                self.add_error(missing, "required with " + self.fields[first if missing == second else second].label)
        return data

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
        if data.get("pool"):
            edits.append({"kind": "nodepool-capacity-types", "nodePool": data["pool"], "values": data["pool_capacity_types"]})
        return edits


FIELD_OF = {"add-reservation": "add_count", "remove-reservation": "remove_id", "set-reservation-count": "count",
            "expire-block": "expire_id", "scale-workload": "scale_like", "nodepool-capacity-types": "pool"}


def before_and_after(edits: list[dict]) -> dict:
    """The current world's plan and the edited one's, summarised; `problems` names each bad edit."""
    world = current_world(timezone.now())
    edited, problems = apply_edits(world, edits)
    before, after = run_world(world), run_world(edited)
    return {
        "problems": problems + before.problems + after.problems,
        "before": summarize(before.decisions) if before.ok else None,
        "after": summarize(after.decisions) if after.ok else None,
    }
