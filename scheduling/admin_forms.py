"""The admin's change forms for the models an operator edits by hand: JSON fields that refuse what
cannot be stored (and JSON Python cannot read) with a field error, and NodePools and EC2NodeClasses
validated by the engine, each problem on the field it is about."""

import copy

from django import forms
from django.core.exceptions import ValidationError

from karpweb.jsonsafe import json_problems, printable
from scheduling.engine.world import WorldError, parse_world


class StorableJSONField(forms.JSONField):
    """Django's JSON form field, but JSON nested past Python's limits, integers longer than Python
    reads, NUL characters and non-finite numbers are field errors instead of server errors."""

    def to_python(self, value):
        try:
            return super().to_python(value)
        except RecursionError:
            raise ValidationError("Enter valid JSON: it is nested too deeply.", code="invalid") from None
        except ValidationError:
            raise
        except ValueError as exc:  # e.g. an integer of more than 4300 digits
            raise ValidationError(f"Enter valid JSON: {exc}", code="invalid") from None

    def bound_data(self, data, initial):
        try:
            return super().bound_data(data, initial)
        except (RecursionError, ValueError):
            return forms.fields.InvalidJSONInput(data)

    def prepare_value(self, value):
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        try:
            return super().prepare_value(value)
        except (RecursionError, ValueError):  # re-showing a value that cannot be encoded: show it raw
            return forms.fields.InvalidJSONInput(repr(value))

    def validate(self, value):
        super().validate(value)
        problems = json_problems(value)
        if problems:
            raise ValidationError(problems[:20], code="invalid")


# Where each NodePool field appears in the Kubernetes object the engine reads (scheduling/world.py).
NODEPOOL_PATHS = {
    "spec.template.spec.nodeClassRef": "node_class_ref",
    "spec.template.spec.requirements": "requirements",
    "spec.template.spec.startupTaints": "startup_taints",
    "spec.template.spec.taints": "taints",
    "spec.template.spec.expireAfter": "expire_after",
    "spec.template.metadata.labels": "labels",
    "spec.disruption.consolidationPolicy": "consolidation_policy",
    "spec.disruption.consolidateAfter": "consolidate_after",
    "spec.disruption.budgets": "budgets",
    "spec.limits": "limits",
    "spec.weight": "weight",
    "spec.replicas": "replicas",
    "metadata.name": "name",
}
JSON_SHAPES = {"node_class_ref": dict, "requirements": list, "taints": list, "startup_taints": list,
               "labels": dict, "limits": dict, "budgets": list}


def _field_for(path: str, prefix: str, paths: dict) -> str | None:
    rest = path[len(prefix):].lstrip(".")
    for known, field in paths.items():
        if rest == known or rest.startswith(known + ".") or rest.startswith(known + "["):
            return field
    return None


class NodePoolAdminForm(forms.ModelForm):
    def clean_mode(self):
        from scheduling.modes import control_refusal

        mode = self.cleaned_data.get("mode")
        if mode == "control" and mode != self.instance.mode and (refusal := control_refusal()):
            raise ValidationError(f"control is refused: {refusal}")
        return mode

    def _ref_follows_class(self, cleaned) -> None:
        """One class, never two: a chosen EC2NodeClass is the nodeClassRef written; an unchanged choice
        keeps the ref (Karpenter's truth, perhaps naming a class not created yet) and the link follows it.
        A link and a ref that disagreed showed one class's reservations while Karpenter used another."""
        from reservations.models import EC2NodeClass

        if "node_class" in self.changed_data or not self.instance.pk:
            self.instance.node_class_ref = _node_class_ref(cleaned.get("node_class"))
        elif (self.instance.node_class_ref or {}).get("name"):
            cleaned["node_class"] = EC2NodeClass.objects.filter(name=self.instance.node_class_ref["name"]).first()

    def clean(self):
        cleaned = super().clean()
        from scheduling.world import node_pool_object

        self._ref_follows_class(cleaned)

        for name, shape in JSON_SHAPES.items():
            if name in cleaned and cleaned[name] is not None and not isinstance(cleaned[name], shape):
                self.add_error(name, f"expected a JSON {'object' if shape is dict else 'list'}")
        if self.errors:
            return cleaned
        pool = copy.copy(self.instance)
        for name, value in cleaned.items():
            if name in {f.name for f in pool._meta.concrete_fields}:
                setattr(pool, name, value)
        pool_object = node_pool_object(pool)
        # The engine reads startup taints as it reads taints: a second copy of the pool checks them.
        startup = copy.deepcopy(pool_object)
        startup["spec"]["template"]["spec"]["taints"] = startup["spec"]["template"]["spec"].pop("startupTaints")
        for index, obj in enumerate((pool_object, startup)):
            try:
                parse_world({"nodePools": [obj]})
            except WorldError as exc:
                for path, message in exc.problems:
                    field = _field_for(path, "nodePools[0]", NODEPOOL_PATHS)
                    where = path.removeprefix("nodePools[0].")
                    if index == 1:  # the copy: only what it says about the startup taints
                        if field != "taints":
                            continue
                        field, where = "startup_taints", where.replace(".taints", ".startupTaints", 1)
                    error = f"{where}: {message}"
                    if error not in self.errors.get(field or "__all__", []):
                        self.add_error(field if field in self.fields else None, error)
        return cleaned


def _node_class_ref(node_class) -> dict:
    return {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class.name} if node_class else {}


class EC2NodeClassAdminForm(forms.ModelForm):
    # The selector terms and open mode are saved as the editor saves them (reservations/admin.py):
    # compare-and-swap on the version the form was read at, written to the cluster first.
    ROUTED_FIELDS = ("capacity_reservation_selector_terms", "open_reservations")
    read_version = forms.CharField(widget=forms.HiddenInput, required=False, max_length=64)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["read_version"].initial = self.instance.resource_version

    def clean(self):
        cleaned = super().clean()
        if self.instance.pk and self.routed_changes():
            from reservations.models import EC2NodeClass

            current = EC2NodeClass.objects.filter(pk=self.instance.pk).values_list("resource_version", flat=True).first()
            if cleaned.get("read_version") != current:
                raise ValidationError(
                    f"EC2NodeClass {self.instance.name} changed after you opened this page (version "
                    f"{printable(cleaned.get('read_version') or '(none)', 40)}, now {current or '(none)'}); "
                    "reload it and apply your edit again")
        return cleaned

    def routed_changes(self) -> list[str]:
        return [name for name in self.ROUTED_FIELDS if name in self.changed_data]

    def clean_capacity_reservation_selector_terms(self):
        from reservations.selector_terms import validation_problems

        terms = self.cleaned_data.get("capacity_reservation_selector_terms")
        problems = validation_problems(terms)
        if problems:
            raise ValidationError(problems[:30])
        return terms

    def clean_spec(self):
        spec = self.cleaned_data.get("spec")
        if not isinstance(spec, dict):
            raise ValidationError("expected a JSON object (the rest of spec, as Kubernetes has it)")
        return spec

    def clean_annotations(self):
        annotations = self.cleaned_data.get("annotations")
        if not isinstance(annotations, dict) or not all(isinstance(v, str) for v in annotations.values()):
            raise ValidationError('expected a JSON object of strings, e.g. {"team": "ml"}')
        return annotations


class CapacityReservationAdminForm(forms.ModelForm):
    """karpweb's override on a reservation: keeping karpweb from planning into it needs a reason."""

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("planning_excluded"):
            if not (cleaned.get("planning_excluded_reason") or "").strip() and "planning_excluded_reason" not in self.errors:
                self.add_error("planning_excluded_reason",
                               "why: required to keep karpweb from planning into this reservation (say why, for the "
                               "next operator reading the plan)")
        elif "planning_excluded_reason" in cleaned:
            cleaned["planning_excluded_reason"] = ""  # no exclusion, no reason left behind
        return cleaned
