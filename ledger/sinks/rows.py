"""The events table's rows: an ``Event`` to its row values, and a stored row back.

>>> row = event_row(event)   # COLUMNS order, content hash included  # doctest: +SKIP
>>> parse_row(stored)        # a row of READ_COLUMNS back to its Event  # doctest: +SKIP

``event_row`` writes ``event.to_json()`` (the truth) and beside it the columns that
queries filter on, plus the ``sha256:`` content hash of the JSON's RFC 8785 form.
``parse_row`` decodes the JSON through ``Event.from_json`` (what this module wrote is
compact and takes the fast path, every field still checked; anything else, a hand-edited
row included, takes the exact scanner): a row that does not parse raises
``CorruptRecord`` naming it; filter columns that disagree with the JSON are logged, and
the JSON (the truth) wins.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from ledger.canonical import loads_exact, sha256_of
from ledger.errors import CanonicalizationError, CorruptRecord, ValidationError
from ledger.ids import ulid_text
from ledger.model.codec import encode_event_hashed, event_and_id_from_json
from ledger.model.event import Event
from ledger.model.marks import failed, stated_failed
from ledger.timefmt import coerce_bound, parse_time

__all__ = [
    "COLUMNS",
    "FILTER_COLUMNS",
    "LOWERED_HIGH_WATER",
    "READ_COLUMNS",
    "TimeHighWater",
    "column_disagreements",
    "content_hash",
    "event_row",
    "flag_column",
    "from_micros",
    "is_micros",
    "parse_row",
    "read_failure",
    "row_dicts",
    "sqlite_read_failed",
    "to_micros",
]

log = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ZERO_TEXT = "0" * 26
_MICRO = timedelta(microseconds=1)
_ID_PREFIX = '{"event_id":"'
_ID_PREFIX_BYTES = _ID_PREFIX.encode()
COLUMNS = (
    "event_id", "run_id", "call_id", "kind", "tool", "verdict", "time_us", "has_err",
    "event_json", "content_hash",
)  # fmt: skip


READ_COLUMNS = (
    "seq", "event_id", "run_id", "call_id", "kind", "tool", "verdict", "time_us", "has_err",
    "event_json",
)  # fmt: skip


def to_micros(value: datetime | str, field: str = "time") -> int:
    """``value`` (aware, or RFC 3339 text: a bound, :func:`~ledger.timefmt.coerce_bound`)
    as Unix microseconds; ``ValidationError`` naming ``field``."""
    return (coerce_bound(value, field=field) - _EPOCH) // timedelta(microseconds=1)


def from_micros(value: int) -> datetime:
    """Unix microseconds as an aware UTC datetime."""
    return _EPOCH + timedelta(microseconds=value)


def is_micros(value: object) -> bool:
    """True when ``value`` is Unix microseconds a datetime can hold (what a ``time_us``
    column holds unless SQL changed it: text, a float, a number out of range).

    >>> is_micros(0), is_micros(2**63 - 1), is_micros("abc")
    (True, False, False)
    """
    try:
        from_micros(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return False
    return True


def content_hash(event_json: str | bytes) -> str | None:
    """``sha256:`` of the RFC 8785 form of ``event_json``; None when it has no such form
    (an integer beyond 2^53 in args, say): the event is still stored, unhashed."""
    try:
        return sha256_of(loads_exact(event_json), profile="rfc8785")
    except (CanonicalizationError, orjson.JSONDecodeError) as exc:
        log.warning("event stored without a content hash: %s", exc)
        return None


def event_row(event: Event) -> tuple[Any, ...]:
    """The row values for ``event``, in :data:`COLUMNS` order.

    Refuses a zero ULID (``ValidationError``): an id that cannot identify anything.
    The content hash is built from the event's fields along with the JSON
    (:func:`ledger.eventjson.encode_event_hashed`; equal to :func:`content_hash` of the
    JSON); when a part has no RFC 8785 form the JSON itself goes through
    :func:`content_hash`, which says so in the log.
    """
    if not isinstance(event, Event):
        raise ValidationError(f"event: expected an Event, got {type(event).__name__}")
    text, event_id, digest = encode_event_hashed(event)
    if event_id == _ZERO_TEXT:
        raise ValidationError("event_id: the zero ULID is refused; give a fresh new_event_id()")
    if digest is None:
        digest = content_hash(text)
    verdict = None if event.verdict is None else str(event.verdict)
    micros = (event.time - _EPOCH) // _MICRO  # Event guarantees an aware UTC time
    return (
        event_id, event.run_id, event.call_id, str(event.kind), event.tool,
        verdict, micros, failed(event), text, digest,
    )  # fmt: skip


def row_dicts(rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Rows as ``{column: value}`` mappings, for Core ``insert``."""
    return [dict(zip(COLUMNS, row, strict=True)) for row in rows]


def parse_row(row: Any) -> Event:
    """Decode one stored row (its :data:`READ_COLUMNS`) into the event its JSON holds.

    ``CorruptRecord`` naming the row when the JSON does not parse as an event or names
    another event id. When a filter column (run, call, kind, tool, verdict, time, error
    flag) disagrees with the JSON, the JSON is the truth: its event is returned and a
    warning names the row and each column (``ledger report`` lists such rows), so a
    reader that reaches the row through an edited column still sees what was written.

    The one decode of a stored row (``get``, ``chain``, ``events`` and the report all
    come here). The JSON is decoded once (:func:`ledger.model.codec.event_and_id_from_json`:
    what the sink wrote is compact and takes its fast path, each field checked once, and
    gives the id's text as stored, so the id column is compared without formatting the
    id again), and the columns are compared with the decoded event one after another; the
    warning path, which names each column, runs only for a row that disagrees.
    """
    text = row[-1]
    try:
        event, stated = event_and_id_from_json(Event, text)
    except (ValidationError, RecursionError) as exc:  # RecursionError: absurd nesting
        seq, event_id = row[0], row[1]
        raise CorruptRecord(
            f"events row seq={seq} (event_id {event_id}) does not parse as an event: {exc}; "
            "the stored JSON was changed outside the ledger",
            seq=seq,
            event_id=str(event_id),
        ) from None
    event_id = row[1]
    if stated is None:
        stated = stored_id(text)
    if stated != event_id and ulid_text(event.event_id) != event_id:
        raise CorruptRecord(
            f"events row seq={row[0]}: column event_id {event_id} disagrees with the stored "
            f"JSON's {event.event_id}; the row was changed outside the ledger",
            seq=row[0],
            event_id=str(event_id),
        )
    if not (  # one comparison after another, the cheapest first (each row pays them)
        event.run_id == row[2]
        and event.call_id == row[3]
        and event.kind == row[4]
        and event.tool == row[5]
        and event.verdict == row[6]
        and failed(event) is flag_column(row[8])
        and (event.time - _EPOCH) // _MICRO == row[7]
    ):
        _disagrees(row)
    return event


def _disagrees(row: Any) -> None:
    """Log a warning naming each filter column of ``row`` that disagrees with its JSON."""
    wrong = "; ".join(
        column_disagreements(dict(zip(READ_COLUMNS, row, strict=True)), orjson.loads(row[-1]))
    )
    log.warning(
        "events row seq=%s (event_id %s): column %s; the row was changed outside the "
        "ledger, and its JSON is what is returned",
        row[0],
        row[1],
        wrong,
    )


def read_failure(exc: BaseException) -> str:
    """What a failed read of stored rows says: the driver's message and, for text that
    is not UTF-8 (which only SQL written around the ledger stores), what to do.

    >>> read_failure(ValueError("Could not decode to UTF-8 column 'run_id'")).split(" (")[1]
    'a value written outside the ledger)'
    """
    text = str(exc)
    if "Could not decode to UTF-8" in text:
        text += " (a value written outside the ledger)"
    return text


def sqlite_read_failed(path: Path | str, exc: BaseException) -> str:
    """The message of a failed read of the SQLite ledger ``path``: :func:`read_failure`,
    and for text that is not UTF-8 in a column of the events table the rows that hold
    it, found by one scan of that column as bytes (a failure's cost only)."""
    text = f"SQLite ledger {path}: read failed: {read_failure(exc)}"
    found = re.search(r"Could not decode to UTF-8 column '(\w+)'", str(exc))
    if found is None or found.group(1) not in _TEXT_COLUMNS or not isinstance(path, Path):
        return text
    column = found.group(1)
    rows: list[str] = []
    try:
        uri = f"{path.resolve().as_uri()}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True)) as conn:
            conn.text_factory = bytes
            query = f"SELECT seq, CAST(event_id AS BLOB), CAST({column} AS BLOB) FROM events"
            for seq, event_id, value in conn.execute(query):
                if isinstance(value, bytes) and not _utf8(value):
                    shown = event_id.decode("utf-8", "replace") if event_id else "?"
                    rows.append(f"seq={seq} (event_id {shown})")
                    if len(rows) == 5:
                        break
    except sqlite3.Error:
        return text
    if not rows:
        return text
    return (
        f"{text}; events row(s) whose {column} is not UTF-8: {', '.join(rows)}. Nothing "
        "the ledger writes is: the rows were changed outside it; restore them, then run "
        "`ledger verify`"
    )


_TEXT_COLUMNS = frozenset(COLUMNS)  # the events columns read as text (event_json too)


def _utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def stored_id(text: str | bytes) -> str:
    """The event id at the head of JSON the ledger wrote (``{"event_id":"…``), or ""."""
    if isinstance(text, bytes):
        return text[13:39].decode("ascii", "replace") if text.startswith(_ID_PREFIX_BYTES) else ""
    return text[13:39] if text.startswith(_ID_PREFIX) else ""


FILTER_COLUMNS = ("run_id", "call_id", "kind", "tool", "verdict", "time_us", "has_err")


def stated_micros(value: object) -> int | None:
    """The event time a stored JSON's ``time`` member states, as Unix microseconds (what
    its ``time_us`` column must hold), or None when it is not a time. The layout the
    ledger writes is read at C speed; any other as :func:`~ledger.timefmt.parse_time`
    reads it.

    >>> stated_micros("1970-01-01T00:00:01.5Z"), stated_micros("noon")
    (1500000, None)
    """
    if type(value) is not str:
        return None
    try:
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            raise ValueError(value)
    except ValueError:
        try:
            moment = parse_time(value)
        except ValidationError:
            return None
    return (moment - _EPOCH) // timedelta(microseconds=1)


LOWERED_HIGH_WATER = "the row's time_hi_us"
"""How :meth:`TimeHighWater.problem` begins (a finding of a row the readers still read)."""


class TimeHighWater:
    """The running maximum of the event time in commit order, against which each row's
    ``time_hi_us`` column is checked (the writers raise it by each row's ``time_us``).

    What a query since a time relies on is that no row's value is below the largest time
    of the rows up to it (a lowered value would start the query after rows it must
    return), and that is what is reported. A value above it only makes the query start
    earlier: a row deleted by hand leaves the rows after it so (the deletion is the log
    check's finding), and they are not blamed for it.

    >>> high = TimeHighWater()
    >>> high.problem(5, 5), high.problem(3, 9), high.problem(9, 8)[:30]
    ('', '', "the row's time_hi_us is 8 but ")
    """

    __slots__ = ("high",)

    def __init__(self) -> None:
        self.high: int | None = None

    def check(self, column: object, obj: object, agrees: bool, stated: object) -> str:
        """:meth:`problem` of a row whose ``time_us`` column is ``column`` and whose
        parsed JSON is ``obj``. The time the writer raised the maximum by was both, so
        when they differ (``agrees`` is false: the row checks found something) one of
        them was changed; the smaller is taken, so a time moved later (in the column or
        the JSON) does not make every row after it a finding of its own."""
        if agrees:
            return self.problem(column, stated)
        times = [column, stated_micros(obj.get("time")) if type(obj) is dict else None]
        known = [t for t in times if type(t) is int]
        return self.problem(min(known) if known else None, stated)

    def problem(self, when: object, stated: object) -> str:
        """Take the next row's time (``when``: None when it cannot be read) and say what
        is wrong with its ``stated`` ``time_hi_us`` (empty when nothing is). A row found
        wrong raises the maximum only as far as its own ``stated`` value: its time may
        be the edit (a time moved years later), and the rows after it are not blamed
        for it; a row whose value was lowered is named, as each such row after it."""
        high = self.high
        if type(when) is int and (high is None or when > high):
            high = when
        if high is None or (type(stated) is int and stated >= high):
            self.high = high
            return ""
        if type(stated) is int and (self.high is None or stated > self.high):
            self.high = stated
        return (
            f"{LOWERED_HIGH_WATER} is {stated!r} but the largest time_us of the rows up "
            f"to it is {high!r}: changed outside the ledger (a query for the events "
            "since a time starts where the column says, and would miss rows before it)"
        )


def flag_column(value: object) -> object:
    """A stored ``has_err`` as a bool when it is what a sink writes (PostgreSQL's
    boolean; SQLite's 1 or 0), else as it is, equal to neither: a ``'yes'`` or a BLOB
    put there by hand, which Python would take as true and SQL's ``CASE WHEN has_err``
    (``runs()``' error counts) as false, disagrees with any JSON.

    >>> flag_column(1), flag_column(False), flag_column("yes")
    (True, False, 'yes')
    """
    if value is True or value is False:
        return value
    if type(value) is int and (value == 0 or value == 1):
        return value == 1
    return value


def column_disagreements(found: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    """Each :data:`FILTER_COLUMNS` value in ``found`` (a stored row's) that differs from
    what the row's parsed JSON object ``obj`` implies, as ``"kind is 'x' but the JSON
    says 'y'"``; empty when they agree."""
    micros = stated_micros(obj.get("time"))
    expected = {
        "run_id": obj.get("run_id", ""),
        "call_id": obj.get("call_id", ""),
        "kind": obj.get("kind"),
        "tool": obj.get("tool", ""),
        "verdict": obj.get("verdict") or None,
        "time_us": micros,
        "has_err": stated_failed(obj),
    }
    have = {**found, "has_err": flag_column(found["has_err"])}
    return [
        f"{name} is {have[name]!r} but the JSON says {expected[name]!r}"
        for name in FILTER_COLUMNS
        if have[name] != expected[name]
    ]
