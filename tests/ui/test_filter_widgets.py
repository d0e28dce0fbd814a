"""The list pages' filter widgets (karpweb/widgets.py) write the HTML Django's widget templates write,
for every field of every list page's FilterSet, unbound and bound to values (chosen, escaped)."""

import re
import types

import pytest
from django import forms
from django.test import RequestFactory
from django.urls import resolve, reverse

from karpweb import widgets
from tests.support.labels import LIST_PAGES

NASTY = '<b>"x" & \'y\'</b>'
FILTERSETS = sorted({resolve(reverse(name)).func.view_class.filterset_class for name in LIST_PAGES}, key=lambda c: c.__name__)


def normalized(html: str) -> str:
    return re.sub(r">\s+<", "><", re.sub(r"\s+", " ", html)).strip()


def bound_data(filterset_class) -> dict:
    """A value for every filter: two choices of a multiple choice, the last of a choice, markup for text."""
    data = {}
    for name, field in filterset_class(None).form.fields.items():
        choices = [value for value, _ in getattr(field, "choices", []) if value != ""]
        if isinstance(field, forms.MultipleChoiceField):
            data[name] = choices[:2]
        elif choices:
            data[name] = choices[-1]
        elif isinstance(field, forms.DateTimeField):
            data[name] = "2026-11-26T10:00:00Z"
        else:
            data[name] = NASTY
    return data


@pytest.mark.parametrize("filterset_class", FILTERSETS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("bound", [False, True], ids=["unbound", "bound"])
def test_each_field_renders_as_djangos_widget_does(db, filterset_class, bound):
    data = bound_data(filterset_class) if bound else None
    form = filterset_class(data, request=RequestFactory().get("/")).form
    ours = 0
    for field in form:
        mine = str(field)
        widget = field.field.widget
        if isinstance(widget, (widgets.TextInput, widgets.DateTimeInput, widgets.Select, widgets.CheckboxSelectMultiple)):
            ours += 1
            widget.render = types.MethodType(forms.Widget.render, widget)  # Django's, through its templates
        assert normalized(mine) == normalized(str(field)), field.name
        if bound and isinstance(widget, widgets.CheckboxSelectMultiple):
            assert mine.count(" checked") == 2
        if bound and isinstance(widget, widgets.TextInput) and field.name in data:
            assert 'value="&lt;b&gt;&quot;x&quot; &amp; &#x27;y&#x27;&lt;/b&gt;"' in mine
    assert ours, "no field of this FilterSet uses karpweb's widgets"


def test_the_widgets_keep_djangos_widget_types(db):
    from scheduling.filtersets import DecisionFilterSet

    types_ = {field.name: field.widget_type for field in DecisionFilterSet(None).form}
    assert types_ == {"q": "text", "kind": "checkboxselectmultiple", "outcome": "select", "node_pool": "text",
                      "reservation": "text", "since": "datetime"}
