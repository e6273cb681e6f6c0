"""Benchmark: the compliance report over a ledger of 100,000 events.

Run from the repository root::

    python benchmarks/report.py                 # SQLite, 100,000 events
    python benchmarks/report.py --events 20000 --db postgresql://postgres@127.0.0.1/test

It fills a fresh ledger with runs shaped like the demo's (request, retrieved, a safe read,
a denied attempt, an approved write, run end: 10 events a run, a year of timestamps),
then times, in the same process:

* baseline: streaming every event once through ``Reader.events()`` (parse only);
* ``build_report(reader)`` over the whole store (SQL aggregates, one pass checking every
  row, its leaf and its calls; see :mod:`ledger.report.aggregate`), and over a 30-day
  window (which re-reads only the window's rows);
* the three renderings (dict/JSON, CSV, HTML).

and prints each time and its ratio to the baseline. The figures are not asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from ledger.model import Event, Kind, Ref, RefSource
from ledger.report import build_report
from ledger.sinks import Reader, open_sink

START = datetime(2025, 1, 1, tzinfo=UTC)
T = TypeVar("T")


def run_events(i: int, when: datetime) -> list[Event]:
    """One demo-shaped run of 10 events."""
    run, step = f"run-{i:06d}", timedelta(milliseconds=50)
    req = Event(kind=Kind.REQUEST, run_id=run, args='"tidy the notes"', time=when)
    ref = Ref(source=RefSource.TOOL, id=str(req.event_id))
    mem = Ref(source=RefSource.MEMORY, id="style", hash="sha256:" + "ab" * 32)

    def at(n: int) -> datetime:
        return when + n * step

    return [
        req,
        Event(kind=Kind.RETRIEVED, run_id=run, refs=[mem], time=at(1)),
        Event(kind=Kind.GATE_DECISION, run_id=run, call_id="r", tool="read_file",
              verdict="allowed", reason="safe tool", args='{"path":"notes.txt"}', time=at(2)),
        Event(kind=Kind.TOOL_RESULT, run_id=run, call_id="r", tool="read_file",
              result='"todo: renew the TLS cert"', duration_ms=1, time=at(3)),
        Event(kind=Kind.GATE_DECISION, run_id=run, call_id="s", tool="run_shell",
              verdict="denied", reason="dangerous", args='{"command":"rm -rf /"}', time=at(4)),
        Event(kind=Kind.ACTION, run_id=run, call_id="s", tool="run_shell", verdict="denied",
              reason="dangerous", args='{"command":"rm -rf /"}', refs=[ref], time=at(5)),
        Event(kind=Kind.ACTION, run_id=run, call_id="w", tool="write_file", verdict="allowed",
              reason="approved", args='{"path":"out.txt","text":"x"}', refs=[ref, mem],
              time=at(6)),
        Event(kind=Kind.GATE_DECISION, run_id=run, call_id="w", tool="write_file",
              verdict="allowed", reason="approved", args='{"path":"out.txt"}', time=at(7)),
        Event(kind=Kind.TOOL_RESULT, run_id=run, call_id="w", tool="write_file", result="1",
              duration_ms=2, time=at(8)),
        Event(kind=Kind.RUN_END, run_id=run, reason="completed", time=at(9)),
    ]  # fmt: skip


def generate(total: int) -> Iterator[list[Event]]:
    """Batches of runs spread evenly over one year."""
    runs = max(1, total // 10)
    spacing = timedelta(days=365) / runs
    batch: list[Event] = []
    for i in range(runs):
        batch.extend(run_events(i, START + i * spacing))
        if len(batch) >= 5000:
            yield batch
            batch = []
    if batch:
        yield batch


def timed(label: str, fn: Callable[[], T]) -> tuple[float, T]:
    """Run ``fn`` once, print and return its wall time and its value."""
    start = time.perf_counter()
    value = fn()
    elapsed = time.perf_counter() - start
    print(f"  {label:<34} {elapsed:8.2f} s")
    return elapsed, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--db", help="ledger URL (default: a fresh SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or "sqlite:///" + str(Path(tmp) / "bench.db")
        print(f"filling {url} with {args.events} events ...")
        with open_sink(url) as sink:
            start = time.perf_counter()
            for batch in generate(args.events):
                record_many = getattr(sink, "record_many", None)
                assert record_many is not None, "a SQL sink has record_many"
                record_many(batch)
            print(f"  {'fill (record_many)':<34} {time.perf_counter() - start:8.2f} s")
        with open_sink(url) as opened:
            assert isinstance(opened, Reader)
            reader: Reader = opened
            base, _ = timed("baseline: stream all events", lambda: sum(1 for _ in reader.events()))
            full, report = timed("build_report (whole year)", lambda: build_report(reader))
            since, until = START + timedelta(days=150), START + timedelta(days=180)
            timed(
                "build_report (30-day window)",
                lambda: build_report(reader, since=since, until=until),
            )
            json_t, _ = timed("to_dict + JSON", lambda: json.dumps(report.to_dict()))
            csv_t, _ = timed("to_csv", report.to_csv)
            html_t, _ = timed("to_html", report.to_html)
        print(f"events checked: {report.hash_check.checked}, runs: {report.counts.runs}")
        print(f"build_report / baseline stream: {full / base:.2f}x")
        print(f"total report incl. renderings: {full + json_t + csv_t + html_t:.2f} s")


if __name__ == "__main__":
    main()
