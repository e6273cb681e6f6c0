"""The report of a window: its log check reads the window, its listings stay bounded.

A compliance officer reporting on one month of a year-long ledger gets the month's rows
recomputed and bound to the stored tree head and checkpoints (``ledger.report.logcheck``),
not a rebuild of the whole year: tampering inside the window fails the report, tampering
outside it is left to ``ledger verify`` (and the report says so). A window with more
denials or approved actions than the report lists gives the counts, the first ones and
the command that lists them all.
"""

from __future__ import annotations

import shlex
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

# the benchmark's generator, as a module of the namespace package ``benchmarks`` (the
# checkout is on the path): putting benchmarks/ itself on sys.path would let its mcp.py
# shadow the mcp package for every test collected after this one
from benchmarks.scale import fleet
from ledger.canonical import sha256_of
from ledger.errors import ValidationError
from ledger.integrity.note import Signer, generate_key
from ledger.model import Event
from ledger.model.values import OUTSIDE_RUN_PREFIX
from ledger.report import build_report
from ledger.report.listing import LISTINGS, MAX_LISTED
from ledger.report.verification import verify_rows
from ledger.sinks import PostgresSink, SQLiteSink

JUNE = (datetime(2025, 6, 1, tzinfo=UTC), datetime(2025, 7, 1, tzinfo=UTC))


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(fleet(3000, seed=5))
    yield path


def _edit(path: Path, sql: str, *params: Any) -> None:
    conn = sqlite3.connect(path)
    conn.execute(sql, params)
    conn.commit()
    conn.close()


def _row_in(path: Path, inside: bool) -> int:
    """The seq of an action row inside (or before) June."""
    low, high = (int(m.timestamp()) * 1_000_000 for m in JUNE)
    where = "time_us >= ? AND time_us < ?" if inside else "time_us < ? AND ? > 0"
    conn = sqlite3.connect(path)
    (seq,) = conn.execute(
        f"SELECT seq FROM events WHERE kind = 'action' AND {where} ORDER BY seq LIMIT 1",
        (low, high) if inside else (low, 1),
    ).fetchone()
    conn.close()
    return int(seq)


def test_a_windowed_report_rereads_only_its_window(ledger: Path) -> None:
    with SQLiteSink(ledger) as sink:
        report = build_report(sink, since=JUNE[0], until=JUNE[1])
        whole = build_report(sink)
        head = sink.tree_head()
    assert report.compliant and report.log_check is not None and report.log_check.ok
    scope = report.log_scope
    assert scope is not None and not scope.whole
    assert 0 < scope.rows < 3000 and scope.rows >= report.events
    assert report.log_check.size == head.size and report.log_check.root == head.root
    assert "`ledger verify` rebuilds the whole log" in report.log_statement()
    assert whole.log_scope is not None and whole.log_scope.whole
    assert whole.log_scope.rows == 3000


def _forge(path: Path, seq: int) -> None:
    """Change the row's JSON and recompute its content hash to match: only the log can
    tell."""
    conn = sqlite3.connect(path)
    (text,) = conn.execute("SELECT event_json FROM events WHERE seq = ?", (seq,)).fetchone()
    conn.close()
    forged = text.replace('"reason":"', '"reason":"forged ', 1)
    assert forged != text
    rehashed = sha256_of(orjson.loads(forged), profile="rfc8785")
    _edit(
        path, "UPDATE events SET event_json = ?, content_hash = ? WHERE seq = ?", forged,
        rehashed, seq,
    )  # fmt: skip


def test_a_changed_row_inside_the_window_fails_the_report(ledger: Path) -> None:
    _forge(ledger, _row_in(ledger, inside=True))
    with SQLiteSink(ledger) as sink:
        report = build_report(sink, since=JUNE[0], until=JUNE[1])
    assert report.hash_check.mismatch_count == 0  # the content hash was made to match
    assert report.log_check is not None and not report.log_check.ok
    assert not report.compliant and report.log_scope is None  # the full check named it
    assert any(f.kind == "changed" for f in report.log_check.findings)


def test_a_changed_head_fails_the_windowed_report(ledger: Path) -> None:
    _edit(ledger, "UPDATE tree_head SET root = zeroblob(32)")
    with SQLiteSink(ledger) as sink:
        report = build_report(sink, since=JUNE[0], until=JUNE[1])
    assert report.log_check is not None and not report.log_check.ok and not report.compliant


def test_changed_stored_nodes_are_not_vouched_for_by_the_window_check(ledger: Path) -> None:
    """A row of the window whose stored nodes differ from the recomputed ones: the
    window's check does not vouch for the window, the report runs the full check."""
    seq = _row_in(ledger, inside=True)
    _edit(ledger, "UPDATE events SET nodes = zeroblob(length(nodes)) WHERE seq = ?", seq)
    with SQLiteSink(ledger) as sink:
        report = build_report(sink, since=JUNE[0], until=JUNE[1])
    assert report.log_check is not None and report.log_scope is None


def test_a_change_outside_the_window_is_left_to_ledger_verify(ledger: Path) -> None:
    _forge(ledger, _row_in(ledger, inside=False))
    with SQLiteSink(ledger) as sink:
        report = build_report(sink, since=JUNE[0], until=JUNE[1])
        _, log = verify_rows(sink)
    assert report.compliant and report.log_scope is not None  # not re-read, and it says so
    assert "rows outside the window were not re-read" in report.log_statement()
    assert log is not None and not log.ok  # the whole rebuild finds it


def test_stored_checkpoints_are_checked_against_the_head(tmp_path: Path) -> None:
    skey, _ = generate_key("example.com/ledger")
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        events = list(fleet(2000, seed=9))
        sink.record_many(events[:1200])
        first = sink.checkpoint(Signer.from_key(skey))
        sink.record_many(events[1200:])
        report = build_report(sink, since=JUNE[0], until=JUNE[1])
        whole = build_report(Streamed(sink), since=JUNE[0], until=JUNE[1])
    assert report.log_check is not None and report.log_check.ok
    assert report.log_check.checkpoints_verified == (first.size,)
    assert whole.log_check is not None
    assert report.log_check.checkpoints_verified == whole.log_check.checkpoints_verified
    assert [f.kind for f in report.log_check.findings] == ["uncovered"]
    assert [f.kind for f in whole.log_check.findings] == ["uncovered"]


class Streamed:
    """The sink behind a reader that is not a SQL sink (the streaming build, whose log
    check rebuilds every row)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("record_many", "tree_head"):
            raise AttributeError(name)
        return getattr(self._inner, name)


# --- bounded listings ---------------------------------------------------------------------


def _denials(n: int) -> list[Event]:
    t0 = datetime(2025, 3, 1, tzinfo=UTC)
    return [
        Event(
            kind="action", run_id=f"r{i % 7}", call_id=f"c{i}", tool="rm", verdict="denied",
            reason=f"no {i % 3}", args={}, time=t0 + timedelta(seconds=i),
        )
        for i in range(n)
    ]  # fmt: skip


def test_a_window_with_more_denials_than_listed_counts_them_all(tmp_path: Path) -> None:
    n = MAX_LISTED + 234
    with SQLiteSink(tmp_path / "ledger.db") as sink:
        sink.record_many(_denials(n))
        report = build_report(sink)
        streamed = build_report(Streamed(sink))
    for r in (report, streamed):
        assert len(r.denials) == MAX_LISTED and r.counts.denials == n
        assert r.denials == tuple(sorted(r.denials, key=lambda d: (d.time, d.event_id)))
        assert r.denials[0].call_id == "c0"  # the first in time order
        data = r.to_dict()
        assert data["totals"]["denials"] == n
        listing = data["listing"]
        assert listing["more"] == {"denials": 234}
        assert listing["full"]["denials"] == f"ledger report --listed {n} --json"
        assert "234 more" in r.to_html()
        assert any(row.startswith("listing,") for row in r.to_csv().splitlines())
    assert report.denials == streamed.denials


def _overfull(t0: datetime) -> list[Event]:
    """More than a listing holds of: denials (some needing approval, some with no
    verdict), allowed actions with no result (after others that have one), results
    with no intent, and calls outside any run."""
    ref = [{"source": "tool", "id": "x"}]
    out: list[Event] = []
    for i in range(MAX_LISTED + 30):
        t = t0 + timedelta(seconds=i)
        out += [
            Event(kind="action", run_id=f"ok{i}", call_id="c", tool="w", verdict="allowed",
                  args={}, refs=ref, time=t),
            Event(kind="tool_result", run_id=f"ok{i}", call_id="c", tool="w", result="1",
                  time=t + timedelta(milliseconds=1)),
            Event(kind="action", run_id=f"miss{i}", call_id="c", tool="w", verdict="allowed",
                  args={}, refs=ref, time=t + timedelta(hours=2)),
            Event(kind="action", run_id=f"na{i}", call_id="c", tool="w",
                  verdict=("needs_approval", "denied", None)[i % 3], args={},
                  time=t + timedelta(hours=3)),
            Event(kind="tool_result", run_id=f"orphan{i}", call_id="c", tool="w",
                  result="1", time=t + timedelta(hours=4)),
            Event(kind="action", run_id=f"{OUTSIDE_RUN_PREFIX}{i}", call_id="c", tool="w",
                  verdict="denied",
                  args={}, time=t + timedelta(hours=5)),
        ]  # fmt: skip
    return out


@pytest.mark.parametrize("build", ["database", "streamed"])
def test_the_command_a_report_names_lists_every_item_of_each_listing(
    tmp_path: Path, build: str
) -> None:
    """For every listing longer than the report holds, the command the report names
    (its JSON ``listing.full``) lists exactly the items the report counted: not the
    events of a filter that takes in others (allowed actions that have a result, say)
    or leaves some out (denials needing approval)."""
    from click.testing import CliRunner

    from ledger.cli.main import cli
    from ledger.sinks import JSONLSink

    t0 = datetime(2025, 3, 1, tzinfo=UTC)
    if build == "database":
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
        with SQLiteSink(tmp_path / "ledger.db") as sink:
            sink.record_many(_overfull(t0))
    else:
        url = f"jsonl:///{tmp_path / 'ledger.jsonl'}"
        with JSONLSink(tmp_path / "ledger.jsonl") as jsonl:
            for event in _overfull(t0):
                jsonl.record(event)
    window = ["--since", "2025-03-01", "--until", "2025-03-02"]
    first = CliRunner().invoke(cli, ["report", "--db", url, *window, "--json"])
    assert first.exit_code in (0, 3), first.output
    data = orjson.loads(first.output)
    full = data["listing"]["full"]
    assert set(full) >= {"runs", "denials", "missing_results", "unsafe_without_intent",
                         "outside_runs", "approved"}  # fmt: skip
    for name, command in full.items():
        argv = shlex.split(command)
        assert argv[:4] == ["ledger", "report", "--db", url] and argv[-1] == "--json"
        again = CliRunner().invoke(cli, argv[1:])  # the command as printed
        assert again.exit_code in (0, 3), again.output
        items = _member(orjson.loads(again.output), LISTINGS[name])
        assert len(items) == data["listing"]["more"][name] + len(_member(data, LISTINGS[name])), (
            name
        )  # every item of the listing
        assert items[:MAX_LISTED] == _member(data, LISTINGS[name]), name  # its first ones
        if name == "denials":
            assert {d["verdict"] for d in items} == {"denied", "needs_approval", "none"}
        if name == "missing_results":
            assert all(m["run_id"].startswith("miss") for m in items)


def _member(data: dict[str, Any], path: str) -> list[Any]:
    found: Any = data
    for key in path.split("."):
        found = found[key]
    assert isinstance(found, list)
    return found


def test_listed_bounds_each_listing_and_is_checked(tmp_path: Path) -> None:
    with SQLiteSink(tmp_path / "ledger.db") as sink:
        sink.record_many(_denials(40))
        few = build_report(sink, listed=5)
        none = build_report(sink, listed=0)
        for bad in (-1, 2.5, "5", True):
            with pytest.raises(ValidationError):
                build_report(sink, listed=bad)  # type: ignore[arg-type]
    assert len(few.denials) == 5 and few.counts.denials == 40
    assert few.to_dict()["listing"]["limit"] == 5
    assert few.to_dict()["listing"]["full"]["denials"] == "ledger report --listed 40 --json"
    assert none.denials == () and none.runs == () and none.counts.denials == 40


def test_approved_actions_are_counted_per_approver_tool_and_policy(tmp_path: Path) -> None:
    with SQLiteSink(tmp_path / "ledger.db") as sink:
        sink.record_many(fleet(4000, seed=3))
        report = build_report(sink)
        streamed = build_report(Streamed(sink))
    assert report.approval_groups == streamed.approval_groups
    assert sum(g.count for g in report.approval_groups) == report.counts.approved
    assert {g.approver for g in report.approval_groups} >= {"", "bob"}
    assert report.counts.approved == len(report.approved) + report.listing()["more"].get(
        "approved", 0
    )


def test_the_postgres_report_of_a_window_rereads_only_its_window(pg_dsn: str) -> None:
    import psycopg

    schema = f"report_window_{datetime.now(UTC).strftime('%H%M%S%f')}"
    sink = PostgresSink.open(pg_dsn, schema=schema)
    try:
        sink.record_many(fleet(3000, seed=5))
        report = build_report(sink, since=JUNE[0], until=JUNE[1])
        head = sink.tree_head()
    finally:
        sink.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    assert report.compliant and report.log_check is not None
    assert report.log_check.root == head.root
    assert report.log_scope is not None and 0 < report.log_scope.rows < 3000


# --- the content-hash check's shortcut ----------------------------------------------------


@pytest.mark.parametrize(
    "obj",
    [
        {"event_id": "e1", "b": 1, "a": [1, 2, {"z": None, "y": "é"}]},
        {"event_id": "e1", "x": 1e21, "y": 0.1},  # orjson writes 1e21, RFC 8785 1e+21
        {"event_id": "e1", "\u20ac": 1, "\U0001f600": 2},  # key order: UTF-16 vs code points
    ],
)
def test_the_hash_check_says_what_the_exact_encoder_says(obj: dict[str, Any]) -> None:
    from ledger.report.hashes import verify_row

    text = orjson.dumps(obj)
    stored = sha256_of(obj, profile="rfc8785")
    columns = {"run_id": "r", "call_id": "", "kind": "x", "tool": "", "verdict": None,
               "time_us": 0, "has_err": False}  # fmt: skip
    _, computed, problem = verify_row("e1", text, stored, columns)
    # the hash is found good; what is wrong is the rest (no event: a field is missing)
    assert computed == stored and problem.startswith("stored JSON does not read back"), problem
    changed = text.replace(b"1", b"2", 1)
    _, computed, problem = verify_row("e1", changed, stored, columns)
    assert computed == sha256_of(orjson.loads(changed), profile="rfc8785") != stored
    assert "does not match its content hash" in problem
