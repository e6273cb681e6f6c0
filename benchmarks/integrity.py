"""What the Merkle log costs, as ratios against baselines measured in the same run.

    python benchmarks/integrity.py               # SQLite parts, 1,000,000-event ledger
    LEDGER_TEST_POSTGRES_DSN=postgresql://postgres@127.0.0.1:5432/test \\
        python benchmarks/integrity.py           # PostgreSQL too
    python benchmarks/integrity.py --quick       # smaller sizes, for a smoke run

Each comparison alternates candidate and baseline ``--reps`` times (the single-thread
commit at least 21 times, in pairs taken back to back whose median ratio is its figure:
one fsync per commit makes it the noisiest, and the spread of its pairs is printed) and
compares the MEDIANS. Bars (the script exits 1 when one fails):

- SQLite ``commit_action``, 1 thread, log on >= 0.9x the same sink with the log off
  (``SQLiteSink`` with ``_merkle = False``: the write path without the tree, for this
  benchmark only); p50/p99 latency of both printed;
- SQLite ``commit_action``, 8 threads >= 2.5x 1 thread (log on);
- ``record_many`` in batches of 1,000 >= 0.8x the same without the log;
- PostgreSQL ``commit_action``, 8 threads >= 0.8x plain psycopg with 8 connections (one
  row per transaction, the rows built beforehand); beside it, no bar, the same loop
  building each row (``event_row``) as it goes, as ``commit_action`` must;
- inclusion and consistency proofs in the large ledger: stored hashes read <= 2*log2(n)
  + 2 (counted), time beside one primary-key ``SELECT`` (context, no bar);
- ``verify_ledger`` of the large ledger >= 0.5x a plain loop that reads every row's bytes
  and hashes each with ``hashlib.sha256``.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledger.integrity.merkle import consistency_nodes, inclusion_nodes
from ledger.integrity.verify import verify_ledger
from ledger.model import Event, Kind, Ref
from ledger.sinks import PostgresSink, SQLiteSink
from ledger.sinks.rows import event_row
from ledger.sinks.sql import COLUMNS

FAILED: list[str] = []


class PlainSQLiteSink(SQLiteSink):
    """The same sink with the Merkle log switched off (the baseline only)."""

    _merkle = False


def action(run: str, i: int) -> Event:
    return Event(
        kind=Kind.ACTION,
        run_id=run,
        call_id=f"c{i}",
        tool="delete_file",
        args='{"path":"/tmp/x"}',
        verdict="allowed",
        reason="the user asked to clean up",
        refs=[Ref(source="tool", id="01J000000000000000000000RQ", hash="")],
    )


def report(
    name: str,
    ours: float,
    base: float,
    bar: float | None,
    unit: str = "ops/s",
    ratio: float | None = None,
) -> None:
    """Print one figure (``ratio``: the figure when it is not ``ours / base``, the
    median of paired ratios) and note a failed bar."""
    if ratio is None:
        ratio = ours / base if base else float("inf")
    verdict = "info" if bar is None else "PASS" if ratio >= bar else "FAIL"
    shown = "  no bar" if bar is None else f"(bar {bar:.1f}x)"
    print(
        f"{name:<58} {ours:>10.0f} vs {base:>10.0f} {unit:<7} ratio {ratio:5.2f} {shown} {verdict}"
    )
    if verdict == "FAIL":
        FAILED.append(f"{name}: {ratio:.2f} < {bar}")


def alternate(reps: int, a: Callable[[], float], b: Callable[[], float]) -> tuple[float, float]:
    ra: list[float] = []
    rb: list[float] = []
    for _ in range(reps):
        ra.append(a())
        rb.append(b())
    return statistics.median(ra), statistics.median(rb)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def sqlite_single(tmp: Path, n: int, reps: int) -> None:
    lat_on: list[float] = []
    lat_off: list[float] = []

    def bench(cls: type[SQLiteSink], lat: list[float]) -> Callable[[], float]:
        def run() -> float:
            path = tmp / f"single-{cls.__name__}-{random.random()}.db"
            evs = [action("s", i) for i in range(n)]
            with cls(path) as sink:
                start = time.perf_counter()
                for ev in evs:
                    t0 = time.perf_counter()
                    sink.commit_action(ev)
                    lat.append(time.perf_counter() - t0)
                took = time.perf_counter() - start
            return n / took

        return run

    runs_on: list[float] = []
    runs_off: list[float] = []
    on_sink, off_sink = bench(SQLiteSink, lat_on), bench(PlainSQLiteSink, lat_off)
    for i in range(reps):  # pairs in turn on-off and off-on, so neither always goes first
        first, second = (on_sink, off_sink) if i % 2 == 0 else (off_sink, on_sink)
        a, b = first(), second()
        runs_on.append(a if i % 2 == 0 else b)
        runs_off.append(b if i % 2 == 0 else a)
    on, off = statistics.median(runs_on), statistics.median(runs_off)
    pairs = sorted(a / b for a, b in zip(runs_on, runs_off, strict=True))
    # The figure is the median of the pairs' ratios: the disk's fsync time drifts by
    # more than the bar's margin over a run, and a pair, taken back to back, sees one
    # disk; the ratio of the two sides' medians is printed beside it.
    report(
        "SQLite commit_action, 1 thread: log on vs off",
        on,
        off,
        0.9,
        ratio=statistics.median(pairs),
    )
    print(
        f"    {reps} alternating pairs of {n} commits a side: the median pair's ratio is the "
        f"figure; the pairs range {pairs[0]:.2f}-{pairs[-1]:.2f} (quartiles "
        f"{pct(pairs, 0.25):.2f}-{pct(pairs, 0.75):.2f}); the sides' medians give "
        f"{on / off:.2f}"
    )
    print(
        f"    commit_action latency p50/p99: log on {pct(lat_on, 0.5) * 1e3:.2f}/"
        f"{pct(lat_on, 0.99) * 1e3:.2f} ms, log off {pct(lat_off, 0.5) * 1e3:.2f}/"
        f"{pct(lat_off, 0.99) * 1e3:.2f} ms"
    )


def in_threads(sink: SQLiteSink | PostgresSink, evs: list[Event], threads: int) -> float:
    parts = [evs[k::threads] for k in range(threads)]

    def work(k: int) -> None:
        for ev in parts[k]:
            sink.commit_action(ev)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    start = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return len(evs) / (time.perf_counter() - start)


def sqlite_threads(tmp: Path, n: int, reps: int) -> None:
    def run(threads: int) -> Callable[[], float]:
        def go() -> float:
            with SQLiteSink(tmp / f"threads-{threads}-{random.random()}.db") as sink:
                return in_threads(sink, [action(f"t{threads}", i) for i in range(n)], threads)

        return go

    eight, one = alternate(reps, run(8), run(1))
    report("SQLite commit_action, 8 threads vs 1 thread (log on)", eight, one, 2.5)


def sqlite_batches(tmp: Path, batches: int, reps: int) -> None:
    def run(cls: type[SQLiteSink]) -> Callable[[], float]:
        def go() -> float:
            evs = [[action("b", b * 1000 + i) for i in range(1000)] for b in range(batches)]
            with cls(tmp / f"batch-{cls.__name__}-{random.random()}.db") as sink:
                start = time.perf_counter()
                for batch in evs:
                    sink.record_many(batch)
                return batches * 1000 / (time.perf_counter() - start)

        return go

    on, off = alternate(reps, run(SQLiteSink), run(PlainSQLiteSink))
    report("record_many x1000: log on vs off", on, off, 0.8, "rows/s")


def postgres_compare(dsn: str, n: int, reps: int) -> None:
    import psycopg

    from ledger.sinks.url import parse_url

    schema = f"bench_integrity_{os.getpid()}"
    sink = PostgresSink.open(dsn, schema=schema)
    plain_dsn = (parse_url(dsn).dsn or "").replace("postgresql+psycopg://", "postgresql://")
    names = ", ".join(COLUMNS)
    insert = f'INSERT INTO "{schema}".events ({names}) VALUES ({", ".join(["%s"] * len(COLUMNS))})'

    def ours() -> float:
        return in_threads(sink, [action("pg", i) for i in range(n)], 8)

    def plain(build: bool) -> Callable[[], float]:
        def go() -> float:
            evs = [action("plain", i) for i in range(n)]
            rows = [] if build else [event_row(ev) for ev in evs]
            parts = [(evs if build else rows)[k::8] for k in range(8)]
            conns = [psycopg.connect(plain_dsn) for _ in range(8)]

            def work(k: int) -> None:
                conn = conns[k]
                for item in parts[k]:
                    row = event_row(item) if build else item  # type: ignore[arg-type]
                    conn.execute(insert, row)
                    conn.commit()

            ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
            start = time.perf_counter()
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            took = time.perf_counter() - start
            for c in conns:
                c.close()
            return n / took

        return go

    try:
        a, b = alternate(reps, ours, plain(build=False))
        report("PostgreSQL commit_action, 8 threads vs plain psycopg x8", a, b, 0.8)
        a, c = alternate(reps, ours, plain(build=True))
        report("  (vs plain psycopg x8 building each row in the loop)", a, c, None)
    finally:
        sink.close()
        with psycopg.connect(plain_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def build_large(path: Path, total: int) -> None:
    template = event_row(action("big", 0))
    with SQLiteSink(path) as sink:
        done = 0
        while done < total:
            k = min(1000, total - done)
            sink.record_many([action(f"run{(done + i) // 20}", done + i) for i in range(k)])
            done += k
    del template


def proofs_and_verify(tmp: Path, total: int, reps: int) -> None:
    path = tmp / "large.db"
    t0 = time.perf_counter()
    build_large(path, total)
    print(f"    built a {total:,}-event ledger in {time.perf_counter() - t0:.0f} s")
    bound = 2 * math.ceil(math.log2(total)) + 2
    rng = random.Random(1)
    with SQLiteSink(path, migrate=False) as sink:
        head = sink.tree_head()
        ids = [
            r[0]
            for r in sqlite3.connect(path).execute(
                "SELECT event_id FROM events WHERE seq % 9973 = 1"
            )
        ]
        worst_incl = max(len(inclusion_nodes(rng.randrange(total), total)) for _ in range(2000))
        worst_cons = max(
            len(consistency_nodes(rng.randrange(1, total), total)) for _ in range(2000)
        )
        print(
            f"    stored hashes read per proof, n={total:,}: inclusion <= {worst_incl}, "
            f"consistency <= {worst_cons}; bound 2*log2(n)+2 = {bound} "
            f"{'PASS' if max(worst_incl, worst_cons) <= bound else 'FAIL'}"
        )
        if max(worst_incl, worst_cons) > bound:
            FAILED.append("proof reads more stored hashes than 2*log2(n)+2")

        def proofs() -> float:
            start = time.perf_counter()
            for eid in ids:
                p = sink.inclusion_proof(eid)
                p.verify(head.root)
            return len(ids) / (time.perf_counter() - start)

        def pk_select() -> float:
            conn = sqlite3.connect(path)
            start = time.perf_counter()
            for eid in ids:
                conn.execute("SELECT event_json FROM events WHERE event_id = ?", (eid,)).fetchone()
            took = time.perf_counter() - start
            conn.close()
            return len(ids) / took

        a, b = alternate(reps, proofs, pk_select)
        report("inclusion proof (read + verify) vs one primary-key SELECT", a, b, None, "ops/s")

        def cons() -> float:
            start = time.perf_counter()
            for _ in range(200):
                sink.consistency_proof(rng.randrange(1, total))
            return 200 / (time.perf_counter() - start)

        a, b = alternate(reps, cons, pk_select)
        report("consistency proof vs one primary-key SELECT", a, b, None, "ops/s")

        def ours() -> float:
            start = time.perf_counter()
            result = verify_ledger(sink, None)
            took = time.perf_counter() - start
            assert result.ok, result.findings
            return total / took

        def floor() -> float:
            conn = sqlite3.connect(path)
            start = time.perf_counter()
            sha = hashlib.sha256
            for (data,) in conn.execute("SELECT CAST(event_json AS BLOB) FROM events ORDER BY seq"):
                sha(data).digest()
            took = time.perf_counter() - start
            conn.close()
            return total / took

        a, b = alternate(max(1, reps // 2), ours, floor)
        report(f"verify_ledger of {total:,} events vs read+sha256 loop", a, b, 0.5, "rows/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--large", type=int, default=None, help="events in the large ledger")
    args = parser.parse_args()
    n = 300 if args.quick else 1500
    large = args.large or (50_000 if args.quick else 1_000_000)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        # the noisiest figure (this sink's fsync costs ~0.1 ms on a VM, and its time
        # varies by more than the bar's margin from run to run): at least 21 runs a side
        sqlite_single(tmp, n, max(args.reps, 21))
        sqlite_threads(tmp, n * 2, args.reps)
        sqlite_batches(tmp, 5 if args.quick else 20, args.reps)
        dsn = os.environ.get("LEDGER_TEST_POSTGRES_DSN", "")
        if dsn:
            postgres_compare(dsn, n * 2, args.reps)
        else:
            print("PostgreSQL: skipped (set LEDGER_TEST_POSTGRES_DSN)")
        proofs_and_verify(tmp, large, 3)
    if FAILED:
        print("\nFAILED bars:")
        for why in FAILED:
            print(f"  {why}")
        raise SystemExit(1)
    print("\nall bars met")


if __name__ == "__main__":
    main()
