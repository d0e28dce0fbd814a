"""The pages' minute-precision times say "UTC" beside them: they are UTC whatever time zone is
active, and render as the date filter did for UTC."""

import datetime
import zoneinfo

from django.template import Context, Template
from django.utils import timezone

from scheduling.templatetags.karpweb import utc_minute

MOMENT = datetime.datetime(2026, 11, 25, 23, 40, 59, tzinfo=datetime.timezone.utc)


def test_utc_minute_is_utc_in_any_active_time_zone():
    with timezone.override(zoneinfo.ZoneInfo("Asia/Tokyo")):
        assert utc_minute(MOMENT) == "2026-11-25 23:40"
        assert utc_minute(MOMENT.astimezone(zoneinfo.ZoneInfo("America/Los_Angeles"))) == "2026-11-25 23:40"
    assert utc_minute(None) == ""


def test_utc_minute_renders_what_the_date_filter_rendered_in_utc():
    with timezone.override(datetime.timezone.utc):
        rendered = Template('{% load karpweb %}{{ t|utc_minute }}|{{ t|date:"Y-m-d H:i" }}').render(Context({"t": MOMENT}))
    new, old = rendered.split("|")
    assert new == old == "2026-11-25 23:40"
