"""A page as its reader sees it: the visible text, and what in it is a time written as an API writes one."""

import re
from html.parser import HTMLParser

# A time as an API or an object writes it: a "T" between date and time, or fractional seconds.
RAW_TIME = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}|[ T]\d{2}:\d{2}:\d{2}\.\d+)")


class VisibleText(HTMLParser):
    """The text a reader sees: not scripts, styles or attributes (a chart's data, a <time datetime>)."""

    HIDDEN = {"script", "style"}

    def __init__(self):
        super().__init__()
        self.parts, self.hidden = [], 0

    def handle_starttag(self, tag, attrs):
        self.hidden += tag in self.HIDDEN

    def handle_endtag(self, tag):
        self.hidden -= tag in self.HIDDEN

    def handle_data(self, data):
        if not self.hidden:
            self.parts.append(data)


def visible_text(html: str) -> str:
    parser = VisibleText()
    parser.feed(html)
    return " ".join(parser.parts)
