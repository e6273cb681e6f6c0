"""``MemoryReader``: the :class:`~ledger.sinks.Reader` contract over events held in memory.

>>> from ledger.model import Event
>>> reader = MemoryReader([Event(kind="request", run_id="r1", args='"tidy up"')])
>>> [r.run_id for r in reader.runs()], reader.chain("r1").request is not None
(['r1'], True)

The list's order is the commit order (what ``events()`` and ``after`` follow; an integer
``after`` is a 1-based position, as ``seq`` is in SQL); chains are assembled in event-id
order, filters and run summaries follow the SQL readers' documented semantics exactly (a
test runs one contract suite over every reader), and every argument is checked as they
check it. :class:`~ledger.sinks.JSONLReader` is one over a JSONL file, whose unreadable
lines it holds as :class:`~ledger.errors.CorruptRecord` entries: an unreadable record has
no known run, kind, tool or verdict, so reads filtered on those step over it, and every
other read raises it where it stands (its ``seq`` lets the caller go on past it), as a SQL
reader raises for a row that does not parse.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime

from ulid import ULID

from ledger.chain import Chain, assemble_chain
from ledger.errors import CorruptRecord, EventNotFound, RunNotFound, ValidationError
from ledger.ids import coerce_event_id, ulid_text
from ledger.model.event import Event
from ledger.model.marks import failed
from ledger.model.values import Kind, Verdict
from ledger.sinks.base import Closing, RunSummary, check_limit, check_member, check_text
from ledger.timefmt import coerce_bound

__all__ = ["MemoryReader"]


class MemoryReader(Closing):
    """A read-only reader over ``events`` (taken in the order given: commit order)."""

    def __init__(self, events: Iterable[Event | CorruptRecord], *, where: str = "memory") -> None:
        self._rows: list[Event | CorruptRecord] = []
        for i, e in enumerate(events):
            if not isinstance(e, Event | CorruptRecord):
                raise ValidationError(f"events[{i}]: expected an Event, got {type(e).__name__}")
            self._rows.append(e)
        self._where = where
        self._position: dict[str, int] = {}  # event id -> 1-based position (its "seq")
        for i, e in enumerate(self._rows, start=1):
            if isinstance(e, Event):
                self._position.setdefault(ulid_text(e.event_id), i)

    @property
    def _events(self) -> Iterator[Event]:
        return (e for e in self._rows if isinstance(e, Event))

    def get(self, event_id: ULID | str) -> Event:
        """The event with ``event_id``; ``EventNotFound`` when none is held."""
        key = ulid_text(coerce_event_id(event_id))
        position = self._position.get(key)
        if position is None:
            raise EventNotFound(f"no event with id {key} in {self._where}")
        found = self._rows[position - 1]
        assert isinstance(found, Event)
        return found

    def chain(self, run_id: str) -> Chain:
        """The run ``run_id`` assembled from its events in event-id order;
        ``RunNotFound`` when no event of it is held."""
        check_text(run_id, "run_id")
        found = sorted((e for e in self._events if e.run_id == run_id), key=_by_id)
        if not found:
            raise RunNotFound(f"no events of run {run_id!r} in {self._where} (see `ledger runs`)")
        chain = assemble_chain(found)
        return chain if chain.run_id else replace(chain, run_id=run_id)

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
        """Matching events in commit order; ``since`` inclusive, ``until`` exclusive;
        ``after`` an event id (or a 1-based position) to resume after."""
        match = _Filter.of(run_id, kind, tool, verdict, since, until)
        start = self._cursor(after)
        wanted = check_limit(limit)
        return self._select(match, start, wanted)

    def _select(self, match: _Filter, start: int, limit: int | None) -> Iterator[Event]:
        sent = 0
        for e in self._rows[start:]:
            if limit is not None and sent >= limit:
                return
            if isinstance(e, CorruptRecord):
                if not match.on_columns:
                    raise e
            elif match(e):
                sent += 1
                yield e

    def _cursor(self, after: ULID | str | int | None) -> int:
        if after is None:
            return 0
        if isinstance(after, int) and not isinstance(after, bool):
            return check_limit(after, "after") or 0
        key = ulid_text(coerce_event_id(after, field="after"))
        position = self._position.get(key)
        if position is None:
            raise EventNotFound(f"after: no event with id {key} in {self._where}")
        return position

    def runs(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        newest: bool = False,
    ) -> Iterator[RunSummary]:
        """One :class:`RunSummary` per run (the empty run id included) with events in
        ``[since, until)``, oldest first (newest first with ``newest=True``); counts
        cover the run's events in the window."""
        match = _Filter.of(None, None, None, None, since, until)
        wanted = check_limit(limit)
        acc: dict[str, _Run] = {}
        for e in self._events:
            if match(e):
                acc.setdefault(e.run_id, _Run(e.time, e.time)).add(e)
        ordered = sorted(acc.items(), key=lambda item: (item[1].first, item[0]), reverse=newest)
        if wanted is not None:
            ordered = ordered[:wanted]
        return iter([run.summary(run_id) for run_id, run in ordered])

    def close(self) -> None:
        """Nothing to release."""


def _by_id(e: Event) -> str:
    return ulid_text(e.event_id)


@dataclass(frozen=True, slots=True)
class _Filter:
    run_id: str | None
    kind: Kind | None
    tool: str | None
    verdict: Verdict | None
    since: datetime | None
    until: datetime | None

    @classmethod
    def of(
        cls,
        run_id: str | None,
        kind: Kind | str | None,
        tool: str | None,
        verdict: Verdict | str | None,
        since: datetime | None,
        until: datetime | None,
    ) -> _Filter:
        return cls(
            run_id=check_text(run_id, "run_id", optional=True),
            kind=None if kind is None else Kind(check_member(Kind, kind, "kind")),
            tool=check_text(tool, "tool", optional=True),
            verdict=None if verdict is None else Verdict(check_member(Verdict, verdict, "verdict")),
            since=None if since is None else coerce_bound(since, field="since"),
            until=None if until is None else coerce_bound(until, field="until"),
        )

    @property
    def on_columns(self) -> bool:
        """True when it filters on what only a readable record tells (run, kind, ...)."""
        return not (self.run_id is self.kind is self.tool is self.verdict is None)

    def __call__(self, e: Event) -> bool:
        return (
            (self.run_id is None or e.run_id == self.run_id)
            and (self.kind is None or e.kind is self.kind)
            and (self.tool is None or e.tool == self.tool)
            and (self.verdict is None or e.verdict is self.verdict)
            and (self.since is None or e.time >= self.since)
            and (self.until is None or e.time < self.until)
        )


@dataclass(slots=True)
class _Run:
    first: datetime
    last: datetime
    events: int = 0
    actions: int = 0
    denied: set[str] = field(default_factory=set)
    errors: int = 0
    ended: bool = False

    def add(self, e: Event) -> None:
        self.first = min(self.first, e.time)
        self.last = max(self.last, e.time)
        self.events += 1
        self.actions += e.kind is Kind.ACTION
        if e.verdict is Verdict.DENIED:
            self.denied.add(e.call_id or ulid_text(e.event_id))  # one per call, as in SQL
        self.errors += failed(e)
        self.ended = self.ended or e.kind in (Kind.RUN_END, Kind.ABORT)

    def summary(self, run_id: str) -> RunSummary:
        return RunSummary(
            run_id=run_id,
            first_time=self.first,
            last_time=self.last,
            events=self.events,
            actions=self.actions,
            denials=len(self.denied),
            errors=self.errors,
            ended=self.ended,
        )
