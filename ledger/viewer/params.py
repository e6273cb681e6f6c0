"""What a page's query string may hold: times, counts, names; a bad one is a
:class:`~ledger.errors.ValidationError` (a 400 page that says what to type).

>>> when("2026-11-30", "since").isoformat()
'2026-11-30T00:00:00+00:00'
>>> when("2026-11-30T14:05", "until").isoformat()     # a browser's datetime-local: UTC
'2026-11-30T14:05:00+00:00'
>>> count("", "limit", default=50, top=500)
50
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from ledger.errors import ValidationError
from ledger.timefmt import parse_time, utc_now

__all__ = ["TIME_FORMS", "count", "text", "when", "window"]

TIME_FORMS = "RFC 3339 (2026-11-30T14:00:00Z), a date (2026-11-30), or an age (90m, 24h, 7d)"
_AGE = re.compile(r"(\d{1,9})\s*([smhdw])\Z")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_LOCAL = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d{1,6})?)?\Z")
_DATE = re.compile(r"\d{4}-\d\d-\d\d\Z")


def when(raw: str, name: str) -> datetime | None:
    """A time from a query parameter; ``None`` when empty. A time without a zone (what a
    ``datetime-local`` field sends) is UTC; an age counts back from now."""
    s = raw.strip()
    if not s:
        return None
    age = _AGE.match(s)
    try:
        if age:
            return utc_now() - timedelta(seconds=int(age.group(1)) * _UNIT[age.group(2)])
        if _DATE.match(s):
            return datetime.fromisoformat(s).replace(tzinfo=UTC)
        if _LOCAL.match(s):
            return datetime.fromisoformat(s.replace(" ", "T")).replace(tzinfo=UTC)
        return parse_time(s.replace(" ", "T", 1), field=name)
    except (ValueError, OverflowError):
        pass
    raise ValidationError(f"{name}: {raw[:80]!r} is not a time; give {TIME_FORMS}")


def window(params: Mapping[str, str]) -> tuple[datetime | None, datetime | None]:
    """``since`` and ``until`` of a page, checked to make a window (since before until)."""
    since, until = when(params.get("since", ""), "since"), when(params.get("until", ""), "until")
    if since is not None and until is not None and since >= until:
        raise ValidationError(
            "since must be before until (the window is since inclusive, until exclusive)"
        )
    return since, until


def count(raw: str, name: str, *, default: int, top: int) -> int:
    """A non-negative integer parameter, at most ``top``; ``default`` when empty."""
    s = raw.strip()
    if not s:
        return default
    if not s.isdigit() or len(s) > 12:
        raise ValidationError(f"{name}: {raw[:40]!r} is not a whole number >= 0")
    n = int(s)
    if n > top:
        raise ValidationError(f"{name}: {n} is more than {top}")
    return n


def text(params: Mapping[str, str], name: str, *, top: int = 1000) -> str:
    """A text parameter (empty when absent), at most ``top`` characters."""
    s = params.get(name, "")
    if len(s) > top:
        raise ValidationError(f"{name}: longer than {top} characters")
    return s
