"""Django's widgets that the list pages' filters use, with the same names (so the same widget_type) and
the same HTML, written here instead of by Django's widget templates: those include a template per
option, and that a template for its attributes (about 400 Python calls an option; 6,000 for the
decisions filter's 15 kinds, 350 for a text box). Tests compare the HTML with Django's."""

from html import escape

from django import forms
from django.utils.safestring import mark_safe


def _text(value) -> str:
    """What {{ value }} writes: HTML as it is, anything else escaped."""
    return value.__html__() if hasattr(value, "__html__") else escape(str(value))


def _attrs(attrs: dict) -> str:
    """django/forms/widgets/attrs.html: ` name="value"`, ` name` for True, nothing for False."""
    return "".join(f" {_text(name)}" if value is True else f' {_text(name)}="{escape(str(value))}"'
                   for name, value in attrs.items() if value is not False)


def _input(widget: dict) -> str:
    """django/forms/widgets/input.html"""
    value = "" if widget["value"] is None else f' value="{escape(str(widget["value"]))}"'
    return f'<input type="{_text(widget["type"])}" name="{_text(widget["name"])}"{value}{_attrs(widget["attrs"])}>'


class _Input:
    def render(self, name, value, attrs=None, renderer=None):
        return mark_safe(_input(self.get_context(name, value, attrs)["widget"]))


class TextInput(_Input, forms.TextInput):
    """django/forms/widgets/text.html"""


class DateTimeInput(_Input, forms.DateTimeInput):
    """django/forms/widgets/datetime.html"""


class CheckboxSelectMultiple(forms.CheckboxSelectMultiple):
    """django/forms/widgets/checkbox_select.html (multiple_input.html, checkbox_option.html)."""

    def render(self, name, value, attrs=None, renderer=None):
        widget = self.get_context(name, value, attrs)["widget"]
        own = widget["attrs"]
        html = ["<div", f' id="{_text(own["id"])}"' if own.get("id") else "",
                f' class="{_text(own["class"])}"' if own.get("class") else "", ">"]
        for group, options, _ in widget["optgroups"]:
            if group:
                html.append(f"<div><label>{_text(group)}</label>")
            for option in options:
                box = _input(option)
                if option["wrap_label"]:
                    label_for = f' for="{_text(option["attrs"]["id"])}"' if option["attrs"].get("id") else ""
                    box = f'<label{label_for}>{box} {_text(option["label"])}</label>'
                html.append(f"<div>{box}</div>")
            if group:
                html.append("</div>")
        html.append("</div>")
        return mark_safe("".join(html))


class Select(forms.Select):
    """django/forms/widgets/select.html (select_option.html)."""

    def render(self, name, value, attrs=None, renderer=None):
        widget = self.get_context(name, value, attrs)["widget"]
        html = [f'<select name="{_text(widget["name"])}"{_attrs(widget["attrs"])}>']
        for group, options, _ in widget["optgroups"]:
            if group:
                html.append(f'<optgroup label="{_text(group)}">')
            html.extend(f'<option value="{escape(str(option["value"]))}"{_attrs(option["attrs"])}>'
                        f'{_text(option["label"])}</option>' for option in options)
            if group:
                html.append("</optgroup>")
        html.append("</select>")
        return mark_safe("".join(html))
