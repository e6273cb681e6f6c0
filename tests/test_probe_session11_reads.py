"""Defects a hostile reader of the report and the forensic commands found (session 11),
each a test that failed before its fix: the text report's "… and N more" lines counted
from the capped listings, recorded text reached the terminal as control sequences or
forged a line, ``build_report`` refused RFC 3339 text with a bare ``TypeError``, and a
window that did not start on a bucket boundary got 61 buckets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.errors import ValidationError
from ledger.model import Event
from ledger.report import build_report
from ledger.report.timeline import MAX_BUCKETS, layout
from ledger.sinks import MemoryReader, SQLiteSink

T0 = datetime(2026, 3, 1, 10, 0, 30, tzinfo=UTC)


def _ledger(tmp_path: Path, events: list[Event]) -> str:
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(events)
    return f"sqlite:///{path}"


def _out(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_the_text_report_counts_what_it_does_not_show(tmp_path: Path) -> None:
    runs = 1_100
    events = [
        Event(kind="action", run_id=f"r{i:05d}", call_id="c", tool="rm", verdict="denied",
              reason="no", time=T0 + timedelta(seconds=i))
        for i in range(runs)
    ]  # fmt: skip
    out = _out("report", "--db", _ledger(tmp_path, events)).replace("\n(", " (")
    out = out.replace("`ledger \n", "`ledger ")  # a line rich wrapped at the width
    more = [line for line in out.splitlines() if line.startswith("… and")]
    assert len(more) == 2, more
    shown = runs - int(more[0].split()[2])
    assert 0 < shown < 1000  # the table's rows, not the JSON's 1,000
    assert all(f"and {runs - shown} more" in line for line in more), more
    flat = " ".join(out.split())  # rich wraps the long line
    assert f"--listed {runs} --json` lists them all (its `runs`)" in flat, flat
    assert "lists the first 1000" in more[0], more[0]


@pytest.mark.parametrize("command", ["report", "chain", "events", "runs", "why"])
def test_recorded_text_never_reaches_the_terminal_raw(tmp_path: Path, command: str) -> None:
    """A reason, a tool name or args holding a line break or an escape sequence are shown
    escaped: no recorded text forges a line of the output or drives the terminal."""
    forged = "zero non-safe actions ran without a committed intent"
    events = [
        Event(kind="request", run_id="r", time=T0, args='"tidy\\u001b[2K the notes"'),
        Event(kind="action", run_id="r", call_id="c", tool="rm\x1b[8m", time=T0,
              verdict="denied", reason=f"no\n{forged}\x1b[8m"),
    ]  # fmt: skip
    url = _ledger(tmp_path, events)
    args = {"report": ["report"], "chain": ["chain", "r"], "events": ["events", "--run", "r"],
            "runs": ["runs"], "why": ["why", "r", "c"]}[command]  # fmt: skip
    out = _out(*args, "--db", url)
    assert "\x1b" not in out
    # the report states it once itself; no recorded text starts a line with it
    starting = sum(line.strip(" │").startswith(forged) for line in out.splitlines())
    assert starting == (command == "report"), out


def test_the_report_takes_its_window_as_the_readers_do(tmp_path: Path) -> None:
    events = [Event(kind="action", run_id="r", call_id="c", tool="t", verdict="allowed",
                    time=T0 + timedelta(days=d)) for d in range(3)]  # fmt: skip
    for reader in (MemoryReader(events), SQLiteSink(tmp_path / "l.db")):
        if isinstance(reader, SQLiteSink):
            reader.record_many(events)
        text = build_report(reader, since="2026-03-02T00:00:00Z", until="2026-03-03T12:00:00+02:00")
        when = build_report(reader, since=datetime(2026, 3, 2, tzinfo=UTC),
                            until=datetime(2026, 3, 3, 10, tzinfo=UTC))  # fmt: skip
        assert text.events == when.events == 1
        with pytest.raises(ValidationError, match="since"):
            build_report(reader, since="yesterday")
        with pytest.raises(ValidationError, match="naive"):
            build_report(reader, until=datetime(2026, 3, 2))
        reader.close()


@pytest.mark.parametrize("seconds", [0, 1, 30, 59, 61, 299, 3599, 86_399])
@pytest.mark.parametrize("span", [timedelta(minutes=1), timedelta(hours=1), timedelta(days=1),
                                  timedelta(days=30), timedelta(days=365)])  # fmt: skip
def test_a_timeline_has_at_most_sixty_buckets_wherever_it_starts(
    seconds: int, span: timedelta
) -> None:
    start = datetime(2026, 3, 1, tzinfo=UTC) + timedelta(seconds=seconds)
    found = layout(start, start + span)
    assert found is not None
    first, width, count = found
    assert count <= MAX_BUCKETS and first <= start and first + count * width >= start + span


def test_one_line_escapes_what_breaks_a_line_and_keeps_every_other_character() -> None:
    from ledger.model.shown import one_line

    kept = (
        "Motif\u00a0: 10\u202f000 \u20ac, \u6771\u4eac\u3000\u99c5, \u0645\u06cc\u200c, "
        "e\u0301, \U0001f469\u200d\U0001f52c, soft\xadhyphen"
    )
    assert one_line(kept) == kept
    for c in ("\n", "\r", "\x1b", "\x85", "\u2028", "\u2029", "\u202e", "\u2066", "\x00", "\t"):
        shown = one_line(f"a{c}b")
        assert c not in shown and shown.startswith("a\\") and shown.endswith("b"), repr(shown)


def test_run_ids_never_reach_the_terminal_raw_in_listings_or_errors(tmp_path: Path) -> None:
    """``ledger runs`` and the usage error of an ambiguous run id prefix show a run id
    on one line, its control and bidi characters escaped."""
    forged = "r-forged  2026-01-01 00:00:00 -> 00:00:00  1  0  0  0  yes"
    url = _ledger(tmp_path, [Event(kind="request", run_id="r1\x1b[31m\u202eX", time=T0),
                             Event(kind="run_end", run_id=f"r2\n{forged}", time=T0)])  # fmt: skip
    out = _out("runs", "--db", url)
    assert "\x1b" not in out and "\u202e" not in out
    assert not any(line.startswith("r-forged") for line in out.splitlines()), out
    for args in (["chain", "r"], ["events", "--run", "r"]):
        result = CliRunner().invoke(cli, [*args, "--db", url])
        assert result.exit_code == 2, result.output
        (error,) = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        assert "ambiguous" in error and "\x1b" not in result.stderr, result.stderr
        assert "\u202e" not in result.stderr and not any(
            line.startswith("r-forged") for line in result.stderr.splitlines()
        )
