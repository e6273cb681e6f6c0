"""Event times: timezone-aware UTC, written as RFC 3339 with a ``Z``.

>>> format_time(parse_time("2026-01-02T03:04:05.5+01:00"))
'2026-01-02T02:04:05.5Z'

Fractional seconds are written without trailing zeros (as Go's RFC 3339 with nanoseconds
does); more than six digits are read and cut to microseconds, Python's precision.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from ledger.errors import ValidationError

__all__ = [
    "check_duration",
    "check_window",
    "coerce_bound",
    "coerce_time",
    "format_duration",
    "format_time",
    "format_time_us",
    "parse_duration",
    "parse_time",
    "round_up_finer",
    "utc_now",
]

_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:([Zz])|([+-])(\d\d):(\d\d))\Z",
    re.ASCII,
)

_FAST_LENGTHS = frozenset({20, *range(22, 28)})  # no fraction, or 1-6 fraction digits


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def coerce_time(value: object, *, field: str = "time") -> datetime:
    """Return ``value`` as an aware UTC datetime; naive datetimes are refused."""
    if isinstance(value, str):
        return parse_time(value, field=field)
    if not isinstance(value, datetime):
        raise ValidationError(f"{field}: expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(
            f"{field}: naive datetime {value.isoformat()} refused; give a timezone-aware "
            "time, e.g. datetime.now(timezone.utc)"
        )
    try:
        return value.astimezone(UTC) if value.utcoffset() else value.replace(tzinfo=UTC)
    except OverflowError:
        raise ValidationError(f"{field}: {value.isoformat()} is out of range in UTC") from None


def coerce_bound(value: object, *, field: str = "time") -> datetime:
    """:func:`coerce_time` for a bound of a time window (``since``, ``until``): text
    finer than a microsecond is rounded up (:func:`round_up_finer`).

    >>> coerce_bound("2026-01-31T00:00:00.0000001Z").microsecond
    1
    >>> coerce_time("2026-01-31T00:00:00.0000001Z").microsecond
    0
    """
    moment = coerce_time(value, field=field)
    return round_up_finer(moment, value, field=field) if isinstance(value, str) else moment


def check_window(since: datetime | None, until: datetime | None) -> None:
    """``ValidationError`` when ``since`` is not before ``until``: such a window holds
    nothing, and a report over it must not pass for a compliant one.

    >>> check_window(datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC))
    Traceback (most recent call last):
    ledger.errors.ValidationError: empty time window: since 2026-02-01T00:00:00Z is not ...
    """
    if since is not None and until is not None and since >= until:
        raise ValidationError(
            f"empty time window: since {format_time(since)} is not before until "
            f"{format_time(until)} (since is inclusive, until exclusive)"
        )


_FINER = re.compile(r"[.,]\d{6}(\d+)", re.ASCII)
_TICK = timedelta(microseconds=1)


def round_up_finer(moment: datetime, text: str, *, field: str = "time") -> datetime:
    """``moment``, parsed from ``text``, as a bound: events are stored to the
    microsecond, so a time finer than one (``text`` has more than six fraction digits,
    not all zero) is a bound between two stored times, rounded up to the next
    microsecond, where an event is at or after it (a ``since``) or before it (an
    ``until``, a ``before``) exactly when it is so of the time given."""
    finer = _FINER.search(text)
    if finer is None or not int(finer.group(1)):
        return moment
    try:
        return moment + _TICK
    except OverflowError:
        raise ValidationError(f"{field}: {text!r} is out of range") from None


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with ``Z`` and trimmed fractional seconds (an aware time in another
    zone is converted; a naive one is taken as UTC).

    >>> format_time(datetime(2025, 1, 5, tzinfo=timezone(timedelta(hours=-5))))
    '2025-01-05T05:00:00Z'
    """
    # isoformat is C code: "YYYY-MM-DDTHH:MM:SS[.ffffff]" then "+00:00" when in UTC
    utc = value.tzinfo is UTC
    if not utc and value.tzinfo is not None and value.utcoffset() is not None:
        try:
            value, utc = value.astimezone(UTC), True
        except OverflowError:
            raise ValidationError(f"{value.isoformat()} is out of range in UTC") from None
    text = value.isoformat()[:-6] if utc else value.replace(tzinfo=None).isoformat()
    return (text.rstrip("0") if value.microsecond else text) + "Z"


def format_time_us(value: datetime) -> str:
    """RFC 3339 in UTC with ``Z`` and always six fractional digits, so every time is one
    width and sorts as text: the form of machine output (``--json``, reports). (Stored
    events keep :func:`format_time`'s form, the reference's.)

    >>> format_time_us(parse_time("2026-01-02T03:04:05Z"))
    '2026-01-02T03:04:05.000000Z'
    """
    utc = value.astimezone(UTC).replace(tzinfo=None)
    return utc.isoformat(timespec="microseconds") + "Z"


def parse_time(text: str, *, field: str = "time") -> datetime:
    """Parse RFC 3339 text into an aware UTC datetime; raise ``ValidationError``."""
    if not text.isascii():
        raise ValidationError(f"{field}: {text!r} is not an RFC 3339 time (non-ASCII)")
    fast = len(text) in _FAST_LENGTHS and text[4] == text[7] == "-" and text[10] == "T"
    if fast and text.endswith("Z"):
        try:  # our own layout: C-speed path
            return datetime.fromisoformat(text)
        except ValueError:
            pass
    m = _RFC3339.match(text)
    if m is None:
        raise ValidationError(f"{field}: {text!r} is not an RFC 3339 time with a zone")
    year, month, day, hour, minute, second = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    frac = (m.group(7) or "")[:6].ljust(6, "0")
    tz: timezone = UTC
    try:
        if m.group(9):
            offset = timedelta(hours=int(m.group(10)), minutes=int(m.group(11)))
            if int(m.group(10)) > 23 or int(m.group(11)) > 59:
                raise ValueError("zone offset out of range")
            tz = timezone(-offset if m.group(9) == "-" else offset)
        dt = datetime(year, month, day, hour, minute, second, int(frac), tzinfo=tz)
        return dt.astimezone(UTC) if tz is not UTC else dt
    except (ValueError, OverflowError) as exc:
        raise ValidationError(f"{field}: {text!r} is not a valid time ({exc})") from None


# --- durations (retention: 400d, 26w, 48h, 2y) ----------------------------------

_DURATION = re.compile(r"^(\d+)([hdwy])$", re.ASCII)
_UNIT = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1),
         "y": timedelta(days=365)}  # fmt: skip
_MAX = timedelta(days=365 * 1000)


def parse_duration(text: str, *, what: str = "duration") -> timedelta:
    """``400d``, ``26w``, ``48h``, ``2y`` (365 days each) or ``0`` as a ``timedelta``;
    ``ValidationError`` for anything else.

    >>> parse_duration("2y").days
    730
    >>> parse_duration("6m")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ledger.errors.ValidationError: duration: '6m' is not a duration; ...
    """
    if not isinstance(text, str):
        raise ValidationError(f"{what}: expected text such as 400d, got {type(text).__name__}")
    value = text.strip().lower()
    if value == "0":
        return timedelta(0)
    m = _DURATION.match(value)
    if m is None:
        hint = " ('m' is ambiguous: write 180d for six months)" if value.endswith("m") else ""
        raise ValidationError(
            f"{what}: {text!r} is not a duration; give a whole number and a unit: h (hours), "
            f"d (days), w (weeks) or y (365 days), e.g. 400d{hint}"
        )
    try:
        span = int(m.group(1)) * _UNIT[m.group(2)] if len(m.group(1)) <= 9 else None
    except OverflowError:
        span = None
    if span is None or span > _MAX:
        raise ValidationError(f"{what}: {text!r} is longer than 1000 years")
    return span


def check_duration(span: object, *, what: str = "duration") -> timedelta:
    """``span`` when it is a duration :func:`parse_duration` reads (a whole number of
    hours, 0 to 1000 years: what a policy record holds and is read back by);
    ``ValidationError`` naming ``what`` otherwise.

    >>> check_duration(timedelta(days=400)).days
    400
    >>> check_duration(timedelta(minutes=90), what="keep")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ledger.errors.ValidationError: keep: 1:30:00 is not a whole number of hours; ...
    """
    if not isinstance(span, timedelta) or span < timedelta(0):
        raise ValidationError(f"{what}: expected a duration >= 0, got {span!r}")
    if span > _MAX:
        raise ValidationError(f"{what}: {span.days}d is longer than 1000 years")
    if span % timedelta(hours=1):
        raise ValidationError(
            f"{what}: {span} is not a whole number of hours; give hours, days, weeks or years"
        )
    return span


def format_duration(span: timedelta) -> str:
    """The shortest exact form :func:`parse_duration` reads back.

    >>> format_duration(timedelta(days=400)), format_duration(timedelta(hours=36))
    ('400d', '36h')
    """
    hours, rest = divmod(span, timedelta(hours=1))
    if rest:
        raise ValidationError(f"{span} is not a whole number of hours")
    if hours == 0:
        return "0d"
    return f"{hours // 24}d" if hours % 24 == 0 else f"{hours}h"
