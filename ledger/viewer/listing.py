"""The runs list: one page of run summaries, filtered, without reading the whole ledger.

>>> from ledger.sinks import MemoryReader
>>> page = list_runs(MemoryReader([]), RunQuery())
>>> page.rows, page.next_offset
((), None)

What each part costs (``W`` = runs with events in the window):

* The page itself comes from ``reader.runs(since=, until=)`` (a SQL reader aggregates the
  window in one indexed query and streams the summaries). Oldest first reads
  ``offset + limit + 1`` summaries and stops; newest first (the default) does the same
  where the reader sorts newest first (``runs(newest=True)``), and otherwise streams all
  ``W`` summaries once, keeping only the last ``offset + scan`` in memory.
* Filters the reader cannot apply to runs are applied while paging, per run, to the
  run's events in the window: ``verdict=denied`` is read off the summary; ``tool`` and
  any other verdict are one indexed probe each (``events(run_id=, tool=, limit=1)``);
  ``agent``, ``principal`` and free text (``q``) stream the run's events and stop at the
  first match. At most :data:`SCAN_BUDGET` runs are examined per page; when the budget
  runs out before the page is full, the page says how far it got and links on.
* Each shown row reads the run's request (one probe) for its text, agent and principal.
"""

from __future__ import annotations

import inspect
import itertools
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ledger.errors import CorruptRecord
from ledger.model.erasure import erased_text
from ledger.model.event import Event
from ledger.model.values import Kind, Verdict
from ledger.sinks.base import Reader, RunSummary
from ledger.viewer.identity import agent_of, principal_of
from ledger.viewer.source import readable_events

__all__ = ["SCAN_BUDGET", "RunPage", "RunQuery", "RunRow", "event_matches", "list_runs"]

SCAN_BUDGET = 2000
"""Runs examined at most per page when filters apply."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQuery:
    """What the runs list asks for; empty strings mean "any"."""

    since: datetime | None = None
    until: datetime | None = None
    tool: str = ""
    verdict: str = ""
    agent: str = ""
    principal: str = ""
    q: str = ""
    newest: bool = True
    offset: int = 0
    limit: int = 50

    @property
    def filtered(self) -> bool:
        """True when a filter needs the runs' events (more than the summaries)."""
        return bool(self.tool or self.verdict or self.agent or self.principal or self.q)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRow:
    """One row of the list: the summary, and what the run's request says."""

    summary: RunSummary
    request: str = ""
    agent: str = ""
    principal: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPage:
    """One page of the list. ``next_offset`` is where the next page starts (None at the
    end); ``scanned`` counts runs examined; ``exhausted`` is True when the scan budget
    ran out before the page was full; ``total`` is the number of runs in the window when
    it was counted (newest first counts it)."""

    rows: tuple[RunRow, ...]
    next_offset: int | None
    scanned: int
    exhausted: bool = False
    total: int | None = None
    skipped: tuple[CorruptRecord, ...] = field(default=())


def event_matches(e: Event, *, agent: str = "", principal: str = "", q: str = "") -> bool:
    """True when ``e`` matches every given criterion (case-insensitive substrings):
    ``agent`` in its agent, ``principal`` in its principal, ``q`` in any of its texts
    (ids, tool, args, result, reason, error, label, preview, agent, principal)."""
    if agent and agent.lower() not in agent_of(e).lower():
        return False
    if principal and principal.lower() not in principal_of(e).lower():
        return False
    if q:
        needle = q.lower()
        texts = (
            e.run_id,
            e.call_id,
            e.tool,
            e.args or "",
            e.result or "",
            e.reason,
            e.err,
            e.label,
            e.preview,
            agent_of(e),
            principal_of(e),
            str(e.event_id),
        )
        return any(needle in t.lower() for t in texts)
    return True


def _probe(
    reader: Reader, skipped: list[CorruptRecord], q: RunQuery, run_id: str, **filters: object
) -> bool:
    events = readable_events(
        reader, skipped, run_id=run_id, since=q.since, until=q.until, limit=1, **filters
    )
    return next(iter(events), None) is not None


def _matches(reader: Reader, q: RunQuery, s: RunSummary, skipped: list[CorruptRecord]) -> bool:
    if q.verdict == Verdict.DENIED.value:
        if not s.denials:
            return False
    elif q.verdict and not _probe(reader, skipped, q, s.run_id, verdict=q.verdict):
        return False
    if q.tool and not _probe(reader, skipped, q, s.run_id, tool=q.tool):
        return False
    wanted = {"agent": q.agent, "principal": q.principal, "q": q.q}
    if not any(wanted.values()):
        return True
    pending = {k: v for k, v in wanted.items() if v}
    for e in readable_events(reader, skipped, run_id=s.run_id, since=q.since, until=q.until):
        for key in [k for k, v in pending.items() if event_matches(e, **{k: v})]:
            del pending[key]
        if not pending:
            return True
    return False


def _ordered(reader: Reader, q: RunQuery, take: int) -> tuple[list[RunSummary], int | None]:
    """The ``take`` summaries from ``q.offset`` on, in the wanted order, and the number
    of runs in the window when it was counted."""
    if not q.newest:
        stream = reader.runs(since=q.since, until=q.until, limit=q.offset + take)
        return list(itertools.islice(stream, q.offset, q.offset + take)), None
    if _orders_newest(reader):  # the reader sorts newest first itself: read no more
        sorting: Any = reader  # newest= is newer than some readers' signatures
        stream = sorting.runs(since=q.since, until=q.until, limit=q.offset + take, newest=True)
        return list(itertools.islice(stream, q.offset, q.offset + take)), None
    stream = reader.runs(since=q.since, until=q.until)
    last: deque[RunSummary] = deque(maxlen=q.offset + take)
    total = 0
    for s in stream:
        last.append(s)
        total += 1
    newest = list(reversed(last))
    return newest[q.offset : q.offset + take], total


def _orders_newest(reader: Reader) -> bool:
    """True when ``reader.runs`` takes ``newest=`` (readers that can sort newest first)."""
    try:
        return "newest" in inspect.signature(reader.runs).parameters
    except (TypeError, ValueError):
        return False


def _request(reader: Reader, run_id: str, skipped: list[CorruptRecord]) -> Event | None:
    found = readable_events(reader, skipped, run_id=run_id, kind=Kind.REQUEST, limit=1)
    return next(iter(found), None)


def _row(reader: Reader, s: RunSummary, skipped: list[CorruptRecord]) -> RunRow:
    head = _request(reader, s.run_id, skipped)
    if head is None:
        return RunRow(summary=s)
    # an erased request reads as erased (never as "no request"), its agent likewise
    text = erased_text(head, "args", "preview") or head.preview or head.args or ""
    agent = agent_of(head) or erased_text(head, "agent_path", "actor")
    return RunRow(summary=s, request=text, agent=agent, principal=principal_of(head))


def _take(
    reader: Reader, q: RunQuery, candidates: Iterable[RunSummary], skipped: list[CorruptRecord]
) -> Iterator[tuple[int, RunSummary]]:
    for i, s in enumerate(candidates):
        if not q.filtered or _matches(reader, q, s, skipped):
            yield i, s


def list_runs(reader: Reader, q: RunQuery, *, budget: int = SCAN_BUDGET) -> RunPage:
    """One page of runs for ``q``, examining at most ``budget`` runs when filters apply
    (see the module's notes for what it costs)."""
    skipped: list[CorruptRecord] = []
    want = q.limit + 1  # one more tells whether there is a next page
    take = max(budget, 1) if q.filtered else want
    candidates, total = _ordered(reader, q, max(take, want))
    found: list[RunSummary] = []
    examined = 0
    for i, s in _take(reader, q, candidates, skipped):
        examined = i + 1
        found.append(s)
        if len(found) == want:
            break
    else:
        examined = len(candidates)
    more = len(found) == want
    shown = found[: q.limit]
    rows = tuple(_row(reader, s, skipped) for s in shown)
    exhausted = q.filtered and not more and len(candidates) == max(take, want)
    if more:
        # the next page starts at the first match not shown (found[q.limit])
        next_offset: int | None = q.offset + examined - 1
    elif exhausted:
        next_offset = q.offset + examined
    else:
        next_offset = None
    return RunPage(
        rows=rows,
        next_offset=next_offset,
        scanned=examined,
        exhausted=exhausted,
        total=total,
        skipped=tuple(skipped),
    )
