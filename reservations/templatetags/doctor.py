"""The reservation doctor on any page: `{% doctor_panel %}` (the overview's panel: counts by
severity and a link) and `{% doctor_findings findings %}` (a list of findings with evidence and fix)."""

from django import template

from reservations.doctor import active_findings
from scheduling.engine.doctor import SEVERITIES

register = template.Library()


@register.inclusion_tag("reservations/doctor_panel.html")
def doctor_panel():
    counts = {s: 0 for s in SEVERITIES}
    for severity in active_findings().values_list("severity", flat=True):
        counts[severity] += 1
    return {"counts": counts, "total": sum(counts.values())}


@register.inclusion_tag("reservations/doctor_findings.html")
def doctor_findings(findings, empty="The doctor finds nothing stopping it."):
    return {"findings": findings, "empty": empty}
