"""Actions and denials over time: the buckets behind the report's chart.

>>> [b.actions for b in bucket([t0, t0], [t0], t0, t0 + timedelta(hours=2))]  # doctest: +SKIP
[2, 0, ...]

The bucket width is the smallest of 1, 5, 15 and 30 seconds, one minute, 5 and 15
minutes, one and 6 hours, one day, one week, 30 and 365 days that cuts the span into at
most 60 buckets (a few seconds of events still make a chart of several bars); buckets are aligned
to multiples of their width since the Unix epoch (days start at midnight UTC).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from ledger.report.model import TimeBucket

__all__ = ["MAX_BUCKETS", "Layout", "bucket", "buckets_of", "layout", "span_end", "width_for"]

MAX_BUCKETS = 60
_WIDTHS = tuple(
    timedelta(seconds=s)
    for s in (1, 5, 15, 30, 60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400, 365 * 86400)
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


_LAST = datetime.max.replace(tzinfo=UTC)


def width_for(span: timedelta) -> timedelta:
    """The bucket width for a span of time (see the module docstring); spans of more than
    :data:`MAX_BUCKETS` years get buckets of whole years, still at most that many."""
    for width in _WIDTHS:
        if span / width <= MAX_BUCKETS:
            return width
    years = -(-span // (_WIDTHS[-1] * MAX_BUCKETS))  # ceil
    return _WIDTHS[-1] * years


def _floor(moment: datetime, width: timedelta) -> datetime:
    try:
        return _EPOCH + ((moment - _EPOCH) // width) * width
    except OverflowError:  # before the first representable bucket start
        return moment


def span_end(until: datetime | None, last: datetime | None) -> datetime | None:
    """Where the timeline ends: ``until`` (exclusive), else just past ``last``, the
    newest event (so the bucket holding it is drawn, not one that ends at its time).

    >>> t = datetime(2026, 3, 1, 12, 0, 3, tzinfo=UTC)
    >>> span_end(None, t) - t, span_end(t, None) == t
    (datetime.timedelta(microseconds=1), True)
    """
    if until is not None or last is None:
        return until
    return last + _TICK if _LAST - last >= _TICK else last


_TICK = timedelta(microseconds=1)

Layout = tuple[datetime, timedelta, int]
"""``(first bucket start, width, number of buckets)``."""


def layout(start: datetime | None, end: datetime | None) -> Layout | None:
    """Where the buckets over ``[start, end)`` lie (``end`` exclusive: give
    :func:`span_end`); None when there is no span. The
    width is the smallest that gives at most :data:`MAX_BUCKETS` buckets once the first
    is aligned (an hour from 10:00:30 is 61 minutes from 10:00: 5-minute buckets).

    >>> first, width, count = layout(datetime(2026, 3, 1, 10, 0, 30, tzinfo=UTC),
    ...                              datetime(2026, 3, 1, 11, 0, 30, tzinfo=UTC))
    >>> width, count
    (datetime.timedelta(seconds=300), 13)
    """
    if start is None or end is None or end < start:
        return None
    width = width_for(end - start)
    while True:
        first = _floor(start, width)
        count = max(1, -(-(end - first) // width))  # ceil
        if count <= MAX_BUCKETS:
            return first, width, count
        wider = [w for w in _WIDTHS if w > width]
        width = wider[0] if wider else width + _WIDTHS[-1]


def bucket(
    actions: Sequence[datetime],
    denials: Sequence[datetime],
    start: datetime | None,
    end: datetime | None,
) -> tuple[TimeBucket, ...]:
    """Count ``actions`` and ``denials`` (event times) per bucket over ``[start, end)``."""
    where = layout(start, end)
    if where is None:
        return ()
    first, width, count = where
    starts = [first + i * width for i in range(count)]

    def tally(times: Sequence[datetime]) -> Counter[int]:
        return Counter(min(max(bisect_right(starts, t) - 1, 0), count - 1) for t in times)

    return buckets_of(where, tally(actions), tally(denials))


def buckets_of(
    where: Layout, actions: Mapping[int, int], denials: Mapping[int, int]
) -> tuple[TimeBucket, ...]:
    """The buckets of ``where`` with the counts per bucket index (indexes below 0 count
    in the first bucket, beyond the last in the last, as :func:`bucket` places them)."""
    first, width, count = where
    a: Counter[int] = Counter()
    d: Counter[int] = Counter()
    for source, into in ((actions, a), (denials, d)):
        for index, n in source.items():
            into[min(max(index, 0), count - 1)] += n
    starts = [first + i * width for i in range(count)]
    return tuple(
        TimeBucket(start=s, end=_end(s, width), actions=a[i], denials=d[i])
        for i, s in enumerate(starts)
    )


def _end(start: datetime, width: timedelta) -> datetime:
    """``start + width``, or the last representable moment when that is past it."""
    return start + width if _LAST - start > width else _LAST
