"""The runs list's paging and filters against a brute-force reading of the same events:
following "next" from the first page visits every matching run once, in order, whatever
the page size, the scan budget, the order, and whether the reader sorts newest first."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.model import Event
from ledger.sinks import MemoryReader, RunSummary
from ledger.viewer.listing import RunQuery, event_matches, list_runs

T0 = datetime(2026, 11, 1, tzinfo=UTC)
TOOLS = ("read", "write", "shell")
AGENTS = ("alpha", "beta/gamma", "Delta")


class OldestFirstReader(MemoryReader):
    """A reader whose ``runs`` cannot sort newest first (as readers before ``newest=``)."""

    def runs(  # type: ignore[override]
        self, *, since: datetime | None = None, until: datetime | None = None,
        limit: int | None = None,
    ) -> Iterator[RunSummary]:  # fmt: skip
        return super().runs(since=since, until=until, limit=limit)


run_shape = st.tuples(
    st.sampled_from(TOOLS), st.sampled_from(AGENTS), st.booleans(), st.integers(0, 3),
    st.text(alphabet="abxyz", max_size=4),
)  # fmt: skip


def _events(shapes: list[tuple[str, str, bool, int, str]]) -> list[Event]:
    out = []
    for i, (tool, agent, denied, start, word) in enumerate(shapes):
        run, when = f"r{i:02d}", T0 + timedelta(minutes=start)  # equal starts: ties by id
        out.append(Event(kind="request", run_id=run, args=f'"{word}"', agent_path=agent,
                         time=when))  # fmt: skip
        out.append(Event(kind="action", run_id=run, call_id="c", tool=tool, args={},
                         verdict="denied" if denied else "allowed", agent_path=agent,
                         time=when + timedelta(seconds=1)))  # fmt: skip
    return out


def _expected(events: list[Event], q: RunQuery) -> list[str]:
    by_run: dict[str, list[Event]] = {}
    for e in events:
        by_run.setdefault(e.run_id, []).append(e)

    def ok(es: list[Event]) -> bool:
        return (
            (not q.tool or any(e.tool == q.tool for e in es))
            and (not q.verdict or any(str(e.verdict) == q.verdict for e in es))
            and (not q.agent or any(event_matches(e, agent=q.agent) for e in es))
            and (not q.q or any(event_matches(e, q=q.q) for e in es))
        )

    order = sorted(by_run, key=lambda r: (min(e.time for e in by_run[r]), r))
    if q.newest:
        order.reverse()
    return [r for r in order if ok(by_run[r])]


@settings(max_examples=150, deadline=None)
@given(
    shapes=st.lists(run_shape, max_size=30),
    tool=st.sampled_from(("", *TOOLS)),
    verdict=st.sampled_from(("", "allowed", "denied")),
    agent=st.sampled_from(("", "a", "GAMMA", "zzz")),
    text=st.sampled_from(("", "x", "ab")),
    limit=st.integers(1, 7),
    budget=st.integers(1, 12),
    newest=st.booleans(),
    sorting=st.booleans(),
)
def test_paging_visits_every_match_once_in_order(
    shapes: list[Any], tool: str, verdict: str, agent: str, text: str, limit: int,
    budget: int, newest: bool, sorting: bool,
) -> None:  # fmt: skip
    events = _events(shapes)
    reader = MemoryReader(events) if sorting else OldestFirstReader(events)
    q = RunQuery(tool=tool, verdict=verdict, agent=agent, q=text, newest=newest, limit=limit)
    seen: list[str] = []
    for _ in range(200):
        page = list_runs(reader, q, budget=budget)
        assert len(page.rows) <= limit
        seen += [r.summary.run_id for r in page.rows]
        if page.next_offset is None:
            break
        assert page.next_offset > q.offset, "paging must move forward"
        q = RunQuery(tool=tool, verdict=verdict, agent=agent, q=text, newest=newest,
                     limit=limit, offset=page.next_offset)  # fmt: skip
    assert seen == _expected(events, q)
