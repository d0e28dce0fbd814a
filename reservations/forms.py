"""The selector-term editor's form: terms as rows, tags as key/value rows, posted as flat fields
(`term-0-id`, `term-0-tag-1-key`, ...) so it works with and without JavaScript."""

import datetime
import re

from django import forms

from reservations.selector_terms import MAX_FIELD_LENGTH
from scheduling.engine.selectors import MAX_TAGS, MAX_TERMS

_TERM_FIELD = re.compile(r"^term-(\d{1,3})-(id|ownerID|instanceMatchCriteria|resourceGroupARN)$")
_TAG_FIELD = re.compile(r"^term-(\d{1,3})-tag-(\d{1,3})-(key|value)$")


class EditorInputError(ValueError):
    pass


def terms_from_post(data) -> list[dict]:
    """Rebuild the list of terms from the posted rows. Empty inputs are left out, so an empty new
    term stays `{}` and the engine says what it needs."""
    terms: dict[int, dict] = {}
    tags: dict[int, dict[int, dict]] = {}
    for name, value in data.items():
        if len(value) > MAX_FIELD_LENGTH:
            raise EditorInputError(f"{name}: longer than {MAX_FIELD_LENGTH} characters")
        if match := _TERM_FIELD.match(name):
            term = terms.setdefault(int(match[1]), {})
            if value.strip():
                term[match[2]] = value.strip()
        elif match := _TAG_FIELD.match(name):
            terms.setdefault(int(match[1]), {})
            tags.setdefault(int(match[1]), {}).setdefault(int(match[2]), {})[match[3]] = value.strip()
    if len(terms) > MAX_TERMS + 1 or any(len(rows) > MAX_TAGS + 1 for rows in tags.values()):
        raise EditorInputError(f"at most {MAX_TERMS} terms of {MAX_TAGS} tags each")
    result = []
    for index in sorted(terms):
        term = terms[index]
        rows = [tags[index][row] for row in sorted(tags.get(index, {}))]
        if rows:
            # A half-filled row keeps its empty side so the engine names it; a blank row is dropped.
            filled = [row for row in rows if row.get("key") or row.get("value")]
            if filled:
                term["tags"] = {row.get("key", ""): row.get("value", "") for row in filled}
        result.append(_ordered(term))
    return result


def _ordered(term: dict) -> dict:
    order = ("id", "tags", "ownerID", "instanceMatchCriteria", "resourceGroupARN")
    return {key: term[key] for key in order if key in term}


def apply_action(terms: list[dict], action: str) -> list[dict]:
    """Row edits: add-term, remove-term-N, add-tag-N, remove-tag-N-M."""
    terms = [dict(term, tags=dict(term.get("tags", {}))) if "tags" in term else dict(term) for term in terms]
    if action == "add-term":
        terms.append({})
    elif match := re.fullmatch(r"remove-term-(\d+)", action):
        index = int(match[1])
        if index < len(terms):
            terms.pop(index)
    elif match := re.fullmatch(r"add-tag-(\d+)", action):
        index = int(match[1])
        if index < len(terms):
            terms[index].setdefault("tags", {})[""] = ""
    elif match := re.fullmatch(r"remove-tag-(\d+)-(\d+)", action):
        index, row = int(match[1]), int(match[2])
        if index < len(terms) and "tags" in terms[index]:
            items = list(terms[index]["tags"].items())
            if row < len(items):
                items.pop(row)
            terms[index]["tags"] = dict(items)
            if not terms[index]["tags"]:
                del terms[index]["tags"]
    return terms


def editor_rows(terms: list[dict], problems: list[str]) -> list[dict]:
    """What the template draws: one row per term with its tags and its own problems."""
    rows = []
    for index, term in enumerate(terms):
        prefix = f"capacityReservationSelectorTerms[{index}]"
        raw_tags = term.get("tags") if isinstance(term.get("tags"), dict) else {}
        rows.append({
            "index": index,
            "id": term.get("id", ""),
            "ownerID": term.get("ownerID", ""),
            "instanceMatchCriteria": term.get("instanceMatchCriteria", ""),
            "resourceGroupARN": term.get("resourceGroupARN", ""),
            "tags": list(raw_tags.items()),
            "problems": [p for p in problems if p.startswith(prefix + ".") or p.startswith(prefix + ":")],
        })
    return rows


class RecommendationApplyForm(forms.Form):
    """The confirmation: the recommendation as it was read, and what an extension or a new end date needs."""

    computed_at = forms.DateTimeField(widget=forms.HiddenInput)
    offering = forms.CharField(required=False, max_length=64, label="Extension offering")
    end_date = forms.DateTimeField(required=False, label="New end date (UTC)",
                                   help_text="For an end-date recommendation: when the reservation should end now.")
    confirm_not_advised = forms.BooleanField(
        required=False, label="The work is worth more than this extension: buy it anyway",
        help_text="A not-advised extension costs more than the work it protects; it is bought only when you say so.")


class UsageRangeForm(forms.Form):
    """The usage page's time range: the last 24 hours, 7 days or 30 days, or from / to (UTC)."""

    RANGES = {"24h": datetime.timedelta(hours=24), "7d": datetime.timedelta(days=7), "30d": datetime.timedelta(days=30)}
    range = forms.ChoiceField(choices=[("24h", "24 hours"), ("7d", "7 days"), ("30d", "30 days"), ("custom", "custom")],
                              required=False)
    since = forms.DateTimeField(required=False, label="From (UTC)")
    until = forms.DateTimeField(required=False, label="To (UTC)")

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("range") != "custom":
            return cleaned
        since, until = cleaned.get("since"), cleaned.get("until")
        if since is None and "since" not in self.errors:
            self.add_error("since", "a custom range needs its start")
        if since and until and until <= since:
            self.add_error("until", "must be after the start")
        return cleaned

    def window(self, now: datetime.datetime) -> tuple[datetime.datetime, datetime.datetime]:
        """(since, until) of a valid form; the last 24 hours when no range is asked."""
        data = self.cleaned_data
        if data.get("range") == "custom":
            return data["since"], data.get("until") or now
        return now - self.RANGES.get(data.get("range") or "24h"), now
