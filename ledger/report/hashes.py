"""The content-hash check of the compliance report: is every stored event unchanged?

The SQL sinks store, beside each event's JSON, ``content_hash``: ``sha256:`` of the
RFC 8785 form of that JSON (:func:`ledger.sinks.sql.content_hash`). The check reads every
row in the window, recomputes the hash from the stored JSON and lists each row whose
stored hash differs, is missing, or whose JSON no longer parses or no longer names the
row's event id.

>>> check = check_hashes(reader, since=start, until=end)     # doctest: +SKIP
>>> check.checked, [m.event_id for m in check.mismatches]    # doctest: +SKIP
(1520, [])

A JSONL file stores no hash: its check is reported as not available (``available`` is
False) rather than as passed.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from ledger.errors import CanonicalizationError, CorruptRecord, ValidationError
from ledger.model.codec import decode_problem, event_and_id_from_json
from ledger.model.event import Event
from ledger.model.marks import stated_failed
from ledger.sinks.base import Reader, StoredRow, StoredRows
from ledger.sinks.rows import LOWERED_HIGH_WATER, flag_column
from ledger.sinks.sql import SQLReader
from ledger.timefmt import parse_time

__all__ = [
    "HashCheck",
    "HashMismatch",
    "HashTally",
    "check_hashes",
    "check_rows",
    "each_checked_event",
    "each_event",
    "verify_row",
    "with_unreadable",
]

log = logging.getLogger(__name__)

_PAGE = 2000
_MAX_LISTED = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class HashMismatch:
    """One stored row whose content hash does not match its JSON."""

    event_id: str
    run_id: str
    stored: str | None
    computed: str | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "run_id": self.run_id,
            "stored": self.stored,
            "computed": self.computed,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class HashCheck:
    """The outcome: rows checked, mismatches (at most 1000 listed; ``mismatch_count`` is
    the full number), and whether the store holds hashes at all."""

    available: bool
    checked: int = 0
    mismatch_count: int = 0
    mismatches: tuple[HashMismatch, ...] = ()
    note: str = ""
    # intact rows stored without a content hash: the event has no RFC 8785 form (an
    # integer beyond 2^53, say), so no hash vouches for its JSON (the log's leaf does)
    unhashed: int = 0
    # the event ids of the mismatches a reader may refuse, listed or not (what
    # with_unreadable counts once)
    counted: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def summary(self) -> str:
        """One sentence for humans."""
        if not self.available:
            why = self.note or "this store keeps no content hashes"
            return f"content-hash check not available: {why}"
        if not self.checked and not self.mismatch_count:
            return "0 events checked: no events in the window, so no content hash to check"
        unhashed = (
            f" ({self.unhashed} stored without a content hash: no RFC 8785 form, so not "
            "checkable by hash)"
            if self.unhashed
            else ""
        )
        if not self.mismatch_count:
            if self.unhashed == self.checked:
                return f"{self.checked} events checked, none has a content hash{unhashed}"
            return f"{self.checked} events checked, all content hashes match{unhashed}"
        return (
            f"{self.checked} events checked, {self.mismatch_count} content-hash "
            f"mismatch(es){unhashed}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "available": self.available,
            "checked": self.checked,
            "mismatch_count": self.mismatch_count,
            "mismatches": [m.to_dict() for m in self.mismatches],
            "note": self.note,
            "unhashed": self.unhashed,
            "summary": self.summary(),
        }


def verify_row(
    event_id: str,
    text: str | bytes,
    stored: str | None,
    found: dict[str, Any] | Sequence[Any],
    committed: bool = False,
) -> tuple[Any, str | None, str]:
    """``(parsed JSON, computed hash, problem)`` of one stored row; problem is empty when
    the row is intact: its JSON matches its content hash, names its event id and reads
    back as an event as every reader decodes it (a row whose hash was recomputed over
    an edit the readers refuse, a ``duration_ms`` of ``"5"`` say, is not intact), and its
    filter columns (``found``: by name, or their values in ``FILTER_COLUMNS`` order)
    agree with the JSON. The parsed JSON is None when the text does not parse as an
    object. ``committed``: the caller found the bytes to be the leaf the Merkle log
    committed (what the sink validated as an event when it wrote them), so the decode
    check is not repeated."""
    from ledger.canonical import loads_exact, sha256_of
    from ledger.sinks.rows import FILTER_COLUMNS, column_disagreements

    try:
        obj = orjson.loads(text)
        named = obj.get("event_id")
    except (orjson.JSONDecodeError, AttributeError):
        return None, None, _NOT_AN_OBJECT
    computed: str | None = _matching(obj, stored)
    if computed is None:
        try:  # an integer beyond 64 bits read exactly, not rounded
            computed = sha256_of(loads_exact(text, obj), profile="rfc8785")
        except CanonicalizationError:
            computed = _rounded(obj, stored) if committed else None
    # a row with no RFC 8785 form (a huge integer, say) is stored unhashed by design; it
    # still goes through the id and column checks below
    if stored is None and computed is not None:
        return obj, computed, "no content hash stored for this row"
    if computed != stored:
        return obj, computed, "stored JSON does not match its content hash: changed after writing"
    if named != event_id:
        return obj, computed, f"{_OTHER_ID} {named!r}, the row says {event_id!r}"
    if not committed and (unreadable := decode_problem(Event, obj, text)):
        return obj, computed, f"{_NOT_AN_EVENT}: {unreadable}"
    if isinstance(found, dict):
        if _agrees(found, obj):
            return obj, computed, ""
    elif _agrees_values(found, obj):
        return obj, computed, ""
    else:
        found = dict(zip(FILTER_COLUMNS, found, strict=True))
    if wrong := column_disagreements(found, obj):
        return obj, computed, f"{_COLUMNS}: {'; '.join(wrong)}"
    return obj, computed, ""


_NOT_AN_OBJECT = "stored JSON does not parse as an event object"
_OTHER_ID = "stored JSON names event"
_NOT_AN_EVENT = "stored JSON does not read back as an event"
_COLUMNS = "the row's columns disagree with its JSON"
# the problems of a row the readers still read (its JSON is the truth): any other may be
# one they refuse (CorruptRecord), which with_unreadable meets again
_READ_ANYWAY = (_COLUMNS, LOWERED_HIGH_WATER)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER  # see _matching


def _rounded(obj: Any, stored: str | None) -> str | None:
    """``stored`` when it is the RFC 8785 hash of ``obj`` as ``orjson`` read it, an
    integer beyond 64 bits rounded to a float: what the sinks stored for such a row
    before it was stored unhashed. Asked only of a row whose bytes are the leaf the
    Merkle log committed (so they are the bytes written, and the hash is the one they
    were written with): elsewhere a float's digits edited into such an integer would
    match it. None otherwise."""
    from ledger.canonical import sha256_of

    try:
        return (
            stored if stored is not None and sha256_of(obj, profile="rfc8785") == stored else None
        )
    except CanonicalizationError:
        return None


def _matching(obj: Any, stored: str | None) -> str | None:
    """``stored`` when it is the SHA-256 of ``obj`` serialized by ``orjson`` with sorted
    keys, else None (then the exact RFC 8785 encoder decides).

    The stored hash is that of the RFC 8785 form of the event as written. When the
    ``orjson`` form of the JSON read back hashes to it, the two texts are the same
    (SHA-256), so the JSON read back parses to the event as written, whose RFC 8785 hash
    is ``stored``: the exact check would say the same, without walking every value in
    Python. Any other case (a changed row, a float or a key order where ``orjson`` and
    RFC 8785 differ) goes to the exact encoder.

    An integer beyond +/-(2^53 - 1) has no RFC 8785 form (the exact encoder refuses it),
    yet ``orjson`` writes it as the digits RFC 8785 writes for a float of that value
    (``1152921504606847000``): an edit of ``1152921504606846976.0`` into that integer
    would hash "alike". ``OPT_STRICT_INTEGER`` makes ``orjson`` refuse such an integer,
    so the exact encoder decides that row too."""
    if type(stored) is not str or not stored.startswith("sha256:"):
        return None  # (SQLite keeps a BLOB an UPDATE gave: it is no hash the sink wrote)
    try:
        fast = "sha256:" + hashlib.sha256(orjson.dumps(obj, option=_SORTED)).hexdigest()
    except (orjson.JSONEncodeError, TypeError):
        return None
    return stored if fast == stored else None


def _agrees(found: dict[str, Any], obj: dict[str, Any]) -> bool:
    """True when the filter columns ``found`` say what the JSON ``obj`` says: the quick
    answer of :func:`ledger.sinks.rows.column_disagreements` being empty (which names
    what differs when this is False)."""
    from ledger.sinks.rows import FILTER_COLUMNS

    return _agrees_values(tuple(found[name] for name in FILTER_COLUMNS), obj)


def _agrees_values(found: Sequence[Any], obj: dict[str, Any]) -> bool:
    """:func:`_agrees` of the filter columns' values in ``FILTER_COLUMNS`` order."""
    run_id, call_id, kind, tool, verdict, time_us, has_err = found
    get = obj.get
    if (
        get("run_id", "") != run_id
        or get("call_id", "") != call_id
        or get("kind") != kind
        or get("tool", "") != tool
        or (get("verdict") or None) != verdict
        or stated_failed(obj) is not flag_column(has_err)
    ):
        return False
    when = get("time")
    if type(when) is not str:
        return False
    if len(when) == 27 and when[10] == "T" and when[-1] == "Z" and when[19] == ".":
        try:  # the form the sink writes (microseconds, UTC): the C parser agrees
            return bool((datetime.fromisoformat(when) - _EPOCH) // _MICRO == time_us)
        except ValueError:
            pass
    try:
        return bool((parse_time(when) - _EPOCH) // _MICRO == time_us)
    except ValidationError:
        return False


class HashTally:
    """Counts checked rows and keeps the mismatches (the first 1000 listed)."""

    __slots__ = ("checked", "count", "ids", "listed", "unhashed")

    def __init__(self) -> None:
        self.checked = 0
        self.count = 0
        self.unhashed = 0
        self.listed: list[HashMismatch] = []
        self.ids: set[str] = set()  # of the rows a reader may refuse (counted once)

    def intact(self, stored: str | None) -> None:
        """Count one intact row (its stored content hash ``stored``: None when the
        event has no RFC 8785 form, counted as such)."""
        self.checked += 1
        if stored is None:
            self.unhashed += 1

    def add(
        self, event_id: str, run_id: str, stored: str | None, computed: str | None, problem: str
    ) -> None:
        """Count one checked row; ``problem`` empty when it is intact."""
        if not problem:
            self.intact(stored)
            return
        self.checked += 1
        self.count += 1
        event_id, run_id = _text(event_id), _text(run_id)  # SQLite keeps any type
        if not problem.startswith(_READ_ANYWAY):  # with_unreadable may meet it again
            self.ids.add(event_id)
        log.info("content-hash check: event %s: %s", event_id, problem)
        if len(self.listed) < _MAX_LISTED:
            self.listed.append(
                HashMismatch(
                    event_id=event_id,
                    run_id=run_id,
                    stored=None if stored is None else _text(stored),
                    computed=computed,
                    detail=problem,
                )
            )

    def result(self) -> HashCheck:
        return HashCheck(
            available=True,
            checked=self.checked,
            mismatch_count=self.count,
            mismatches=tuple(self.listed),
            unhashed=self.unhashed,
            counted=frozenset(self.ids),
        )


def _text(value: object) -> str:
    """A column's value as text: a BLOB (what SQLite keeps when SQL wrote one where
    the ledger writes text) decoded as UTF-8, anything else as ``str`` gives it."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    return value if type(value) is str else str(value)


def check_rows(rows: Iterable[StoredRow]) -> HashCheck:
    """Verify rows as :func:`iter_stored_rows` gives them."""
    from ledger.sinks.rows import TimeHighWater

    tally = HashTally()
    high = TimeHighWater()
    for event_id, run_id, text, stored, found in rows:
        obj, computed, problem = verify_row(event_id, text, stored, found)
        if "time_hi_us" in found:  # every row, in commit order (stored_rows' high_water)
            wrong = high.check(found["time_us"], obj, not problem, found["time_hi_us"])
            problem = problem or wrong
        tally.add(event_id, run_id, stored, computed, problem)
    return tally.result()


def each_event(reader: Reader, skipped: list[CorruptRecord], **filters: Any) -> Iterator[Event]:
    """``reader.events(**filters)``, stepping over a stored row that does not read back
    as an event: it is logged and appended to ``skipped`` (for :func:`with_unreadable`),
    so one damaged row does not keep a whole report from being made. (Only the SQL
    readers and the JSONL reader raise for a record; they resume after its ``seq``.)"""
    events = reader.events(**filters)
    while True:
        try:
            yield from events
            return
        except CorruptRecord as exc:
            if exc.seq is None:
                raise
            # the reader warned about the record already; the report lists it as a finding
            log.info("compliance report: %s; left out of the counts", exc)
            skipped.append(exc)
            events = reader.events(**filters, after=exc.seq)


def each_checked_event(
    reader: SQLReader,
    found: list[HashMismatch],
    keep: Callable[[dict[str, Any]], bool],
    where: str,
    **filters: Any,
) -> Iterator[Event]:
    """The events of the rows ``reader.stored_rows(**filters)`` gives whose filter
    columns ``keep`` takes, each row checked first as a window's rows are
    (:func:`verify_row`: its content hash, its id, that it reads back, its columns
    against its JSON). A row with a problem is listed in ``found`` (its detail saying
    ``where`` it was read) and, when it reads back, yielded as the readers read it (its
    JSON is the truth); one that does not is left out. For a report that relies on rows
    outside its window: they are checked where it reads them."""
    for event_id, run_id, raw, stored, columns in reader.stored_rows(**filters):
        if not keep(columns):
            continue
        _obj, computed, problem = verify_row(event_id, raw, stored, columns)
        if problem:
            found.append(
                HashMismatch(
                    event_id=event_id,
                    run_id=run_id,
                    stored=stored,
                    computed=computed,
                    detail=f"{problem} ({where})",
                )
            )
        try:
            event, _stated = event_and_id_from_json(Event, raw)
        except (ValidationError, RecursionError):
            continue  # listed: verify_row found it does not read back
        yield event


def with_unreadable(
    check: HashCheck,
    unreadable: Iterable[CorruptRecord],
    found: Iterable[HashMismatch] = (),
) -> HashCheck:
    """``check`` with each row a reader could not read back (``unreadable``), and each
    problem ``found`` in rows outside the check's (:func:`each_checked_event`), counted
    and listed too, unless the check counted it already (listed or beyond the listing's
    cap): a row the report had to leave out, or relied on, is a finding, counted once. A
    record with no event id (a JSONL line that does not parse) is told from another by
    where its message says it is."""
    seen = {m.event_id for m in check.mismatches if m.event_id} | (check.counted - {""})
    said = {m.detail for m in check.mismatches if not m.event_id}
    extra = []
    for mismatch in found:
        if mismatch.event_id not in seen:
            seen.add(mismatch.event_id)
            extra.append(mismatch)
    for exc in unreadable:
        detail = f"the row does not read back as an event: {exc}"
        if exc.event_id in seen or (not exc.event_id and detail in said):
            continue
        if exc.event_id:
            seen.add(exc.event_id)
        else:
            said.add(detail)
        extra.append(
            HashMismatch(
                event_id=exc.event_id, run_id="", stored=None, computed=None, detail=detail
            )
        )
    if not extra:
        return check
    return replace(
        check,
        mismatch_count=check.mismatch_count + len(extra),
        mismatches=(check.mismatches + tuple(extra))[:_MAX_LISTED],
        counted=check.counted | {m.event_id for m in extra if m.event_id},
    )


def check_hashes(
    reader: Reader, *, since: datetime | None = None, until: datetime | None = None
) -> HashCheck:
    """Recompute and compare the content hash of every stored event in ``[since, until)``.

    Reads the rows as stored through a reader that offers them
    (:class:`~ledger.sinks.base.StoredRows`: the SQL sinks); any other reader is reported
    as holding no hashes.
    """
    if not isinstance(reader, StoredRows):
        return HashCheck(
            available=False,
            note=f"{type(reader).__name__} stores no content hashes (only the SQL sinks do)",
        )
    return check_rows(reader.stored_rows(since=since, until=until))
