"""Benchmark: ``ledger ui`` pages on a large ledger, beside the reader calls they make.

Run from the repository root::

    python benchmarks/viewer.py                 # SQLite, 20,000 runs (about 70,000 events)
    python benchmarks/viewer.py --quick         # 2,000 runs, for a smoke run

It fills a fresh SQLite ledger (each run: request, action, result; one run in 100 calls
the rare tool ``audit_export``; one long run of 150 reads and 150 actions citing them),
serves it with ``ledger.viewer.serve`` on 127.0.0.1,
and times each page over real HTTP against a **baseline measured in the same run**: the
same reader calls the page makes, made directly (no HTTP, no HTML). Candidate and
baseline alternate request by request; each figure is the median of the samples, with
p99 beside it. A bar is the median ratio page / baseline: it says what the viewer adds
on top of reading the ledger (HTTP, escaping, HTML). The script exits 1 when a bar fails.

==========================  ====================================================  =====
page                         baseline                                              bar
==========================  ====================================================  =====
runs, oldest first           ``runs(limit=51)`` + 50 request probes               3.0
runs, newest first           ``runs(newest=True, limit=51)`` + probes (a reader    3.0
                             without ``newest=``: ``runs()`` into a deque)
runs, ``tool=`` rare tool    ``runs()`` + one ``events(run_id, tool, limit=1)``   3.0
                             probe per run examined (2,000) + probes
run page (600 events)        ``chain(run)`` + drift check of its 150 refs          3.0
runs, offset 10,000 (oldest) the first page (context: what a deep page costs)     none
==========================  ====================================================  =====
"""

from __future__ import annotations

import argparse
import http.client
import inspect
import statistics
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from ledger.drift import EventResolver, chain_refs, content_hash, verify_refs
from ledger.model import Event, Kind
from ledger.sinks import Reader, RunSummary, open_reader, open_sink
from ledger.viewer import serve

START = datetime(2026, 1, 1, tzinfo=UTC)
RESULTS: list[tuple[str, float, float, float, float, float | None]] = []


def fill(url: str, runs: int) -> str:
    """``runs`` runs of three events and one long run; returns the long run's id."""
    with open_sink(url) as sink:
        batch: list[Event] = []
        for i in range(runs):
            run, when = f"run-{i:06d}", START + timedelta(seconds=30 * i)
            tool = "audit_export" if i % 100 == 7 else f"tool-{i % 9}"
            batch += [
                Event(kind="request", run_id=run, args=f'"job {i}: tidy the notes"', time=when,
                      agent_path=f"agent-{i % 7}"),
                Event(kind="action", run_id=run, call_id="c1", tool=tool, args={"i": i},
                      verdict="allowed", reason="allow-list", time=when + timedelta(seconds=1),
                      refs=[{"source": "memory", "id": f"m{i}", "hash": "sha256:00"}]),
                Event(kind="tool_result", run_id=run, call_id="c1", tool=tool,
                      result=f'"done {i}"', duration_ms=5, time=when + timedelta(seconds=2)),
            ]  # fmt: skip
            if len(batch) >= 3000:
                sink.record_many(batch)  # type: ignore[attr-defined]
                batch = []
        batch += long_run(START + timedelta(seconds=15))
        sink.record_many(batch)  # type: ignore[attr-defined]
    return LONG_RUN


LONG_RUN = "long-run"


def long_run(start: datetime, calls: int = 150) -> list[Event]:
    """One long run: ``calls`` safe reads, each followed by an action citing it."""
    out = [Event(kind="request", run_id=LONG_RUN, args='"a long job"', time=start)]
    for i in range(calls):
        when = start + timedelta(seconds=i + 1)
        read = Event(
            kind="tool_result",
            run_id=LONG_RUN,
            call_id=f"r{i}",
            tool="read_file",
            result=f'"page {i} of the notes"',
            duration_ms=3,
            time=when,
        )
        cite = {"source": "tool", "id": str(read.event_id), "hash": content_hash(read.result or "")}
        out += [
            Event(kind="gate_decision", run_id=LONG_RUN, call_id=f"r{i}", tool="read_file",
                  verdict="allowed", label="safe:ro", time=when),
            read,
            Event(kind="action", run_id=LONG_RUN, call_id=f"w{i}", tool="write_file",
                  args={"path": f"out/{i}.txt", "text": "x" * 400}, verdict="allowed",
                  reason="allow-list", refs=[cite], time=when),
            Event(kind="tool_result", run_id=LONG_RUN, call_id=f"w{i}", tool="write_file",
                  result='"ok"', duration_ms=7, time=when),
        ]  # fmt: skip
    return out


def get(conn: http.client.HTTPConnection, path: str, params: dict[str, str]) -> None:
    conn.request("GET", path + ("?" + urlencode(params) if params else ""))
    answer = conn.getresponse()
    body = answer.read()
    if answer.status != 200:
        raise SystemExit(f"{path} {params}: HTTP {answer.status}: {body[:300]!r}")


def probes(reader: Reader, run_ids: list[str]) -> None:
    for run in run_ids:
        next(iter(reader.events(run_id=run, kind=Kind.REQUEST, limit=1)), None)


def measure(
    name: str, page: Callable[[], None], baseline: Callable[[], None], rounds: int,
    bar: float | None,
) -> None:  # fmt: skip
    page(), baseline()  # warm both
    a: list[float] = []
    b: list[float] = []
    for _ in range(rounds):
        for fn, out in ((page, a), (baseline, b)):
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)

    def p99(xs: list[float]) -> float:
        return sorted(xs)[min(len(xs) - 1, int(len(xs) * 0.99))]

    ratio = statistics.median(a) / statistics.median(b)
    RESULTS.append((name, statistics.median(a), p99(a), statistics.median(b), p99(b), bar))
    shown = f"{ratio:5.2f}x" + (f" (bar {bar:.1f}x)" if bar is not None else " (no bar)")
    print(
        f"{name:32s} page p50 {statistics.median(a) * 1000:8.2f} ms  p99 {p99(a) * 1000:8.2f} ms"
        f"   baseline p50 {statistics.median(b) * 1000:8.2f} ms  p99 {p99(b) * 1000:8.2f} ms"
        f"   {shown}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = 2_000 if args.quick else args.runs
    rounds = 5 if args.quick else args.rounds
    with tempfile.TemporaryDirectory() as tmp:
        url = "sqlite:///" + str(Path(tmp) / "bench.db")
        t = time.perf_counter()
        middle = fill(url, runs)
        print(f"filled {runs:,} runs ({runs * 3:,} events) in {time.perf_counter() - t:.1f} s")
        with serve(url) as viewer, open_reader(url) as reader:
            conn = http.client.HTTPConnection("127.0.0.1", viewer.port, timeout=600)

            def oldest_base() -> None:
                probes(reader, [s.run_id for s in reader.runs(limit=51)][:50])

            def newest(n: int) -> list[RunSummary]:
                """The reader calls the list makes for the newest ``n`` runs."""
                if "newest" in inspect.signature(reader.runs).parameters:
                    sorting: Any = reader
                    return list(sorting.runs(newest=True, limit=n))
                return list(reversed(deque(reader.runs(), maxlen=n)))

            def newest_base() -> None:
                probes(reader, [s.run_id for s in newest(51)][:50])

            def tool_base() -> None:
                hits = []
                for s in newest(2000):
                    if next(
                        iter(reader.events(run_id=s.run_id, tool="audit_export", limit=1)), None
                    ):
                        hits.append(s.run_id)
                probes(reader, hits[:50])

            def run_base() -> None:
                chain = reader.chain(middle)
                verify_refs(chain_refs(chain), EventResolver(reader))  # type: ignore[arg-type]

            measure("runs, oldest first", lambda: get(conn, "/", {"order": "oldest"}),
                    oldest_base, rounds, 3.0)  # fmt: skip
            measure("runs, newest first", lambda: get(conn, "/", {}), newest_base, rounds, 3.0)
            measure("runs, tool=audit_export", lambda: get(conn, "/", {"tool": "audit_export"}),
                    tool_base, rounds, 3.0)  # fmt: skip
            measure(
                "run page (600 events)",
                lambda: get(conn, "/run", {"id": middle}),
                run_base,
                rounds,
                3.0,
            )
            if runs > 10_000:
                measure("runs, offset 10,000 (oldest)",
                        lambda: get(conn, "/", {"order": "oldest", "offset": "10000"}),
                        lambda: get(conn, "/", {"order": "oldest"}), rounds, None)  # fmt: skip
            conn.close()
    failed = [
        f"{name}: page p50 is {a / b:.2f}x its baseline, over the bar of {bar:.1f}x"
        for name, a, _, b, _, bar in RESULTS
        if bar is not None and a / b > bar
    ]
    for line in failed:
        print("FAILED:", line)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
