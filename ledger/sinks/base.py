"""The sink roles (``Sink``, ``DurableSink``, ``Reader``) and the action validation.

Durability is a capability of the type, as in the reference: a sink either has
``commit_action`` or it does not, so a gate asks ``isinstance(sink, DurableSink)``::

    >>> from ledger.sinks import DiscardSink, DurableSink
    >>> isinstance(DiscardSink(), DurableSink)
    False

``validate_action(event)`` is the one definition of a self-explaining action, shared by
every durable sink (and usable by a gate before it commits)::

    validate_action(event)   # raises NotSelfExplaining(problems=[...]) naming every gap
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

from ulid import ULID

from ledger.errors import NotSelfExplaining, ValidationError
from ledger.model.erasure import ADMIN_RUN_PREFIX
from ledger.model.event import Event
from ledger.model.values import Kind, RefSource, Verdict, text_value

if TYPE_CHECKING:
    from ledger.chain.assemble import Chain

__all__ = [
    "KEY_FIELDS",
    "Closing",
    "DurableSink",
    "KeyLimits",
    "Reader",
    "RunSummary",
    "Sink",
    "check_events",
    "check_limit",
    "check_path",
    "check_storable",
    "check_text",
    "key_limits",
    "validate_action",
]

_KNOWN_SOURCES = "tool, memory, ledger"


class Closing:
    """Mixin for sinks and readers: ``with sink:`` closes it on leaving the block."""

    __slots__ = ()

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@runtime_checkable
class Sink(Protocol):
    """Where events go. ``record`` is the observation path; safe for many threads."""

    def record(self, event: Event) -> None:
        """Store or forward ``event``; raise on failure (the caller decides to swallow)."""
        ...

    def close(self) -> None:
        """Release the sink's resources; idempotent. Writes after close raise SinkClosed
        (except on ``DiscardSink``, which drops every event, before and after)."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class DurableSink(Sink, Protocol):
    """A sink that can promise a record is durable before an action runs."""

    def commit_action(self, event: Event) -> None:
        """Validate ``event`` (see :func:`validate_action`), then persist it durably.

        Returns only once the record would survive a crash of this process (see each
        sink's durability notes). Raises ``NotSelfExplaining`` (nothing stored),
        ``DuplicateEvent`` (the stored one unchanged) or ``StorageError``.
        """
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """One run, as ``Reader.runs()`` reports it.

    ``actions`` counts ``action`` events; ``denials`` counts denied calls (events with
    verdict ``denied``, one per call id when they carry one); ``errors`` counts events
    with a non-empty ``err``; ``ended`` is true when a ``run_end`` or ``abort`` was seen.
    """

    run_id: str
    first_time: datetime
    last_time: datetime
    events: int
    actions: int
    denials: int
    errors: int
    ended: bool


StoredRow = tuple[str, str, str | bytes, str | None, dict[str, Any]]
"""``(event_id, run_id, event JSON as stored, content hash, {filter column: value})``."""


@runtime_checkable
class StoredRows(Protocol):
    """A reader that can hand out its rows exactly as stored (the SQL sinks), for checks
    that recompute what was written: content hashes, the tamper-evident log."""

    def stored_rows(
        self, *, since: datetime | None = None, until: datetime | None = None
    ) -> Iterator[StoredRow]:
        """Every stored row in ``[since, until)`` (event time), in commit order, paged."""
        ...


@runtime_checkable
class Reader(Protocol):
    """Reads a store back: by id, by run, filtered streams, run summaries."""

    def get(self, event_id: ULID | str) -> Event:
        """The event with this id; ``EventNotFound`` when absent."""
        ...

    def chain(self, run_id: str) -> Chain:
        """The run's events ordered by event id, assembled by ``assemble_chain``;
        ``RunNotFound`` when no event of it is stored."""
        ...

    def events(
        self,
        *,
        run_id: str | None = None,
        kind: Kind | str | None = None,
        tool: str | None = None,
        verdict: Verdict | str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: ULID | str | int | None = None,
        limit: int | None = None,
    ) -> Iterator[Event]:
        """Matching events in commit order, streamed in pages. ``after`` is an event id
        (or the store's position number, ``seq``, as ``CorruptRecord.seq`` gives it):
        only events committed after it are returned."""
        ...

    def runs(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        newest: bool = False,
    ) -> Iterator[RunSummary]:
        """One summary per run, oldest first."""
        ...

    def close(self) -> None:
        """Release the reader's resources; idempotent."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


def validate_action(event: Event) -> None:
    """Raise ``NotSelfExplaining`` unless ``event`` is an action that explains itself.

    >>> validate_action(Event(kind="prompt"))  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ledger.errors.NotSelfExplaining: action record not self-explaining: kind is ...

    The rules (every broken one is named, not only the first): kind ``action``; a run id,
    a call id and a tool; ``args`` a JSON object; verdict ``allowed``; at least one ref
    with a known source (tool, memory, ledger) and a non-empty id.
    """
    if not isinstance(event, Event):
        raise ValidationError(f"event: expected an Event, got {type(event).__name__}")
    args = event.args
    if (  # the common case, checked in one expression; the details only when it fails
        event.kind is Kind.ACTION
        and event.run_id
        and event.call_id
        and event.tool
        and args is not None
        and args[:1] == "{"  # Event keeps args as JSON text, stripped: "{" is an object
        and event.verdict is Verdict.ALLOWED
        and any(ref.id and type(ref.source) is RefSource for ref in event.refs)
    ):
        return
    problems: list[str] = []
    if event.kind is not Kind.ACTION:
        problems.append(f"kind is {str(event.kind)!r}, must be 'action'")
    for name in ("run_id", "call_id", "tool"):
        if not getattr(event, name):
            problems.append(f"{name} is empty")
    if args is None:
        problems.append("args is missing (must be a JSON object)")
    elif not args.lstrip().startswith("{"):
        problems.append(f"args must be a JSON object, got {args[:40]!r}")
    if event.verdict is not Verdict.ALLOWED:
        shown = "missing" if event.verdict is None else repr(str(event.verdict))
        problems.append(f"verdict is {shown}, must be 'allowed'")
    problems.extend(_ref_problems(event))
    if problems:
        raise NotSelfExplaining(problems)


def _ref_problems(event: Event) -> list[str]:
    if not event.refs:
        return [f"refs is empty: give at least one ref with a source ({_KNOWN_SOURCES}) and an id"]
    if any(ref.known_source and ref.id for ref in event.refs):
        return []
    shown = ", ".join(f"(source {str(r.source)!r}, id {r.id!r})" for r in event.refs[:3])
    return [f"refs: no ref has a known source ({_KNOWN_SOURCES}) and a non-empty id: {shown}"]


# --- argument checks shared by the sinks and readers ---------------------------------


def check_text(value: object, name: str, *, optional: bool = False) -> str | None:
    """``value`` if it is a string (or None when ``optional``); else ``ValidationError``."""
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValidationError(
                    f"{name}: {value!r} is not valid Unicode text (a lone surrogate: bytes "
                    "that are not UTF-8?); no stored event can have it"
                ) from None
        return value
    if optional and value is None:
        return value
    wanted = "a string or None" if optional else "a string"
    raise ValidationError(f"{name}: expected {wanted}, got {type(value).__name__}")


def check_member(enum: type[Kind] | type[Verdict], value: object, name: str) -> str:
    """The value of the member of ``enum`` that ``value`` names (a member or its string);
    else ``ValidationError`` listing the allowed values."""
    try:
        return str(enum(value).value)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        allowed = ", ".join(m.value for m in enum)
        raise ValidationError(f"{name}: {value!r} is not one of {allowed}") from None


def check_limit(value: object, name: str = "limit") -> int | None:
    """``value`` if it is None or a non-negative integer; else ``ValidationError``. A
    value past 2**63 - 1 (more than any store holds, and more than a database integer
    takes) is read as 2**63 - 1, which means the same: no bound on any real ledger.

    >>> check_limit(10), check_limit(2**64) == 2**63 - 1
    (10, True)
    """
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError(
            f"{name}: expected a non-negative integer, got {type(value).__name__}"
        )
    if value < 0:
        raise ValidationError(f"{name}: expected a non-negative integer, got {value}")
    return min(value, _INT64_MAX)


_INT64_MAX = 2**63 - 1


def check_path(value: object, what: str) -> Path:
    """``value`` (a ``str`` or ``os.PathLike``, not empty) as an absolute ``Path``.

    Absolute so that a later ``os.chdir`` cannot point the sink's next connection at
    another file."""
    if isinstance(value, bytes) or not isinstance(value, str | os.PathLike):
        raise ValidationError(
            f"path: {what} expects a str or pathlib.Path, got {type(value).__name__}"
        )
    text = os.fspath(value)
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(f"path: {what} needs a file path, got {text!r}")
    return Path(text).absolute()


def check_storable(event: Event) -> Event:
    """``event``, when a writer may store it; otherwise ``ValidationError``. Two kinds
    of event only the ledger writes, so that a writer's look-alike cannot pass for one:

    - a run id with the prefix ``ledger-retention-``
      (:data:`~ledger.model.erasure.ADMIN_RUN_PREFIX`) names the runs the ledger appends
      to its own log to record a retention policy, a legal hold or an erasure
      (``ledger.retention``): a look-alike record could release a hold, or stand as a
      hold nobody placed, to whoever reads the log;
    - an event carrying ``erased`` is a tombstone, which an erasure writes in place of
      a stored event (keeping its leaf): stored as a new event it would claim an
      erasure no record made, and ``ledger verify`` would report the ledger changed.

    What is not an ``Event`` is left to the store's own check.

    >>> check_storable(Event(kind="request", run_id="r1")).run_id
    'r1'
    """
    if not isinstance(event, Event):  # a caller without type checks: the store says
        return event  # type: ignore[unreachable]
    if event.run_id.startswith(ADMIN_RUN_PREFIX):
        raise ValidationError(
            f"run_id {event.run_id!r}: the prefix {ADMIN_RUN_PREFIX!r} is reserved for the "
            "ledger's own retention records (written by `ledger retention`, `ledger hold` "
            "and `ledger erase`); record these events under another run id"
        )
    if event.erased is not None:
        raise ValidationError(
            f"event {event.event_id}: it carries 'erased', which marks a tombstone; only "
            "an erasure writes one, in place of the stored event (`ledger erase`, "
            "Retention.erase). Record the event without 'erased'"
        )
    return event


def check_events(events: object) -> Iterable[Event]:
    """``events`` if it is an iterable of events (each is checked as it is stored)."""
    if isinstance(events, Event | str | bytes) or not isinstance(events, Iterable):
        raise ValidationError(
            f"events: record_many expects an iterable of Event, got {type(events).__name__}"
        )
    return events


# --- what a sink can store in an event's key columns ----------------------------------

KEY_FIELDS = ("run_id", "call_id", "tool")
"""The event fields a SQL sink also stores in columns of their own (indexed)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyLimits:
    r"""What a sink can hold in the key fields (:data:`KEY_FIELDS`) of an event: the
    one statement of it, which the sink enforces (``ValidationError`` before anything is
    sent) and a writer such as the gate uses to store what fits instead of nothing.

    >>> limits = KeyLimits(nul=False, max_bytes=16)
    >>> limits.problem("ab")
    ''
    >>> limits.problem("a" + chr(0) + "b")
    'holds a NUL (\\x00) character, which this store cannot hold'
    >>> limits.fit("a" + chr(0) + "b"), limits.fit("x" * 40)
    ('a\\x00b', 'xxxxxxxxxxxxx…')

    ``nul``: whether NUL characters can be stored (PostgreSQL text cannot hold them);
    ``max_bytes``: the most UTF-8 bytes a value may have (an index entry limit), or None.
    Every sink also needs valid Unicode (no lone surrogates), as every :class:`Event` does.
    """

    nul: bool = True
    max_bytes: int | None = None

    def problem(self, value: str) -> str:
        """Why ``value`` cannot be stored in a key field (``""`` when it can)."""
        try:
            text_value(value, "value")
        except ValidationError:
            return "is not valid Unicode (it holds a lone surrogate)"
        if not self.nul and "\x00" in value:
            return "holds a NUL (\\x00) character, which this store cannot hold"
        if self.max_bytes is not None and len(value) * 4 > self.max_bytes:
            size = len(value.encode("utf-8"))
            if size > self.max_bytes:
                return f"is {size} bytes long, over this store's limit of {self.max_bytes}"
        return ""

    def fit(self, value: str) -> str:
        """``value`` as it can be stored: lone surrogates and (where refused) NUL written as
        backslash escapes, then cut (an ellipsis marking the cut) to ``max_bytes``."""
        if not self.problem(value):
            return value
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
        if not self.nul:
            value = value.replace("\x00", "\\x00")
        if self.max_bytes is not None and len(value.encode("utf-8")) > self.max_bytes:
            cut = value.encode("utf-8")[: self.max_bytes - 3].decode("utf-8", "ignore")
            value = cut + "…"
        return value

    def check(self, event: Event, *, sizes: bool = True) -> None:
        """``ValidationError`` naming the first key field of ``event`` this store cannot
        hold, and what to do. ``sizes=False`` leaves the length to the store itself (a
        server that accepts a longer value when it compresses, and refuses it otherwise)."""
        limits = self if sizes else KeyLimits(nul=self.nul)
        for name in KEY_FIELDS:
            why = limits.problem(getattr(event, name))
            if why:
                raise ValidationError(
                    f"{name} {why}; shorten or clean it (a SQLite or JSONL ledger has no "
                    "such limit)"
                )


_NO_LIMITS = KeyLimits()


def key_limits(sink: object) -> KeyLimits:
    """What ``sink`` can store in key fields: its ``key_limits`` attribute, or no limit
    beyond valid Unicode (SQLite, JSONL, discard)."""
    limits = getattr(sink, "key_limits", None)
    return limits if isinstance(limits, KeyLimits) else _NO_LIMITS
