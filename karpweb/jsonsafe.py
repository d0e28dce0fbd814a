"""What a JSON value must be to be stored: PostgreSQL's jsonb refuses the NUL character (in keys and
strings) and the non-finite numbers Python's json module reads (NaN, Infinity, 1e999). A form or an
API field that takes JSON checks its value here first, so that the user gets a field error naming
the place instead of a database error (a 500)."""

import math
import re

# A UTF-16 surrogate on its own: Python's json reads "\ud800" into one, and no database can store it.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def unstorable_text(text: str) -> str:
    """What makes `text` unstorable in any text column ("" when nothing): NUL, or a lone surrogate."""
    if "\x00" in text:
        return "contains a NUL character"
    if LONE_SURROGATE.search(text):
        return "contains a lone surrogate (\\ud800-\\udfff), which is not text"
    return ""


MAX_DEPTH = 64  # deeper than any Kubernetes object karpweb stores


def json_problems(value, path: str = "") -> list[str]:
    """Every place in `value` that cannot be stored, as `path: what is wrong` (path `a.b[2]`)."""
    problems: list[str] = []
    stack = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            problems.append(f"{where or 'value'}: nested more than {MAX_DEPTH} levels deep")
            continue
        if isinstance(item, str):
            if problem := unstorable_text(item):
                problems.append(f"{where or 'value'}: {problem}")
        elif isinstance(item, float):
            if not math.isfinite(item):
                problems.append(f"{where or 'value'}: {item} is not a finite number")
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and (problem := unstorable_text(key)):
                    problems.append(f"{where or 'value'}: a key {problem}")
                    continue
                stack.append((child, f"{where}.{key}" if where else str(key), depth + 1))
        elif isinstance(item, list | tuple):
            for index, child in enumerate(item):
                stack.append((child, f"{where}[{index}]", depth + 1))
    return sorted(problems)


def printable(value, limit: int = 80) -> str:
    """A user's value for a message: control characters shown escaped, long values cut."""
    text = value if isinstance(value, str) else repr(value)
    shown = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text[:limit])
    return shown + ("…" if len(text) > limit else "")
