"""karpweb's one way of writing a time on its pages: "2026-11-26 08:49 UTC" (karpweb runs in UTC only), and
a day as "2026-11-26". What `{{ a_time }}`, the `date` filter without a format and the tables' time columns
write; the `utc_minute` filter writes the same without the zone (the pages put "UTC" after it)."""

DATETIME_FORMAT = "Y-m-d H:i T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i T"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i"
