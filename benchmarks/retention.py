"""What erasure costs, as ratios against baselines measured in the same run.

    python benchmarks/retention.py             # 1,000,000-event SQLite ledger (and
                                               # PostgreSQL when $LEDGER_TEST_POSTGRES_DSN
                                               # or --postgres DSN is given)
    python benchmarks/retention.py --quick     # 100,000 events, for a smoke run
    python benchmarks/retention.py --only postgres

Bars (the script exits 1 when one fails):

- erasing one run of 1,000 events in the large ledger (``Retention.erase``: the floor and
  hold checks, reading each row and its stored leaf, the tombstones, the erasure record
  appended to the log, one transaction and one fsync) >= 0.5x a plain SQL ``UPDATE`` of
  those 1,000 rows in one transaction (``UPDATE events SET event_json = ?, content_hash =
  ? WHERE seq = ?`` for each, then ``COMMIT``, on a connection with the sink's
  ``synchronous=FULL``): what deleting the data by hand costs. Each repetition erases
  another run (an erasure happens once), candidate and baseline alternate, MEDIANS
  compared. On PostgreSQL the same, in a schema of its own (dropped afterwards), the
  baseline through a plain psycopg connection (``executemany`` of the same ``UPDATE``,
  pipelined by psycopg, then ``COMMIT``);
  On SQLite a third line, with no bar, times that baseline writing the erasure's own
  tombstones (built beforehand): the share of the erasure's time that is SQLite's;
- erasing by date streams: the peak memory (``tracemalloc``) of an erasure of 100,000
  events is <= 2x that of an erasure of 10,000 events (memory does not grow with the
  count).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledger.ids import new_event_id
from ledger.model import Event
from ledger.model.erasure import ALL_FIELDS
from ledger.retention import Retention, Selection
from ledger.retention.tombstones import TombstoneMaker
from ledger.sinks import SQLiteSink
from ledger.sinks.rows import content_hash

FAILED: list[str] = []
T0 = datetime(2024, 1, 1, tzinfo=UTC)
RUN = 1000  # events per run


def build(path: Path, events: int) -> None:
    """``events`` old events in runs of 1,000, one second apart, in batches of 5,000."""
    with SQLiteSink(path) as sink:
        fill(sink, events)


def fill(sink: Any, events: int) -> None:
    """Write the benchmark's history into ``sink`` and set a policy."""
    batch: list[Event] = []
    for i in range(events):
        run = f"run-{i // RUN:05d}"
        batch.append(
            Event(
                kind="tool_result" if i % 2 else "action",
                run_id=run,
                call_id=f"c{(i % RUN) // 2}",
                tool="send_mail",
                time=T0 + timedelta(seconds=i),
                args=None if i % 2 else {"to": f"user{i}@example.com", "body": "x" * 80},
                verdict=None if i % 2 else "allowed",
                result={"sent": f"user{i}@example.com"} if i % 2 else None,
            )
        )
        if len(batch) == 5000:
            sink.record_many(batch)
            batch = []
    if batch:
        sink.record_many(batch)
    Retention(sink).set_policy(keep="400d", floor="180d", reason="benchmark")


def plain_update(path: Path, run: str) -> float:
    """Seconds for one transaction updating every row of ``run`` (the baseline)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    start = time.perf_counter()
    seqs = [r[0] for r in conn.execute("SELECT seq FROM events WHERE run_id = ?", (run,))]
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        "UPDATE events SET event_json = ?, content_hash = ? WHERE seq = ?",
        [('{"erased":true}', None, s) for s in seqs],
    )
    conn.execute("COMMIT")
    took = time.perf_counter() - start
    conn.close()
    assert len(seqs) == RUN, len(seqs)
    return took


def same_update(path: Path, run: str) -> float:
    """Seconds for the SQL alone of an erasure of ``run``: the plain ``UPDATE`` of the
    baseline writing the tombstones, content hashes and ``has_err`` the erasure writes
    (built before the clock starts, by the erasure's own ``TombstoneMaker``). Not a
    bar: what is left of the erasure's time beside it is its Python work."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    rows = conn.execute(
        "SELECT seq, substr(nodes, 1, 32), CAST(event_json AS BLOB) FROM events "
        "WHERE run_id = ? ORDER BY seq",
        (run,),
    ).fetchall()
    maker = TombstoneMaker(fields=ALL_FIELDS, record=str(new_event_id()), reason="benchmark")
    made = maker.make_page([r[2] for r in rows], [r[1] for r in rows])
    updates = [
        (tomb, chash or content_hash(tomb), has_err, seq)
        for (tomb, chash, has_err), (seq, _, _) in zip(made, rows, strict=True)
    ]
    start = time.perf_counter()
    seqs = [r[0] for r in conn.execute("SELECT seq FROM events WHERE run_id = ?", (run,))]
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        "UPDATE events SET event_json = ?, content_hash = ?, has_err = ? WHERE seq = ?",
        updates,
    )
    conn.execute("COMMIT")
    took = time.perf_counter() - start
    conn.close()
    assert len(seqs) == RUN, len(seqs)
    return took


def erase_run(sink: Any, run: str) -> float:
    start = time.perf_counter()
    done = Retention(sink).erase(Selection.of_run(run), reason="benchmark", by="bench")
    took = time.perf_counter() - start
    assert done.erased == RUN, done
    return took


def pg_plain_update(dsn: str, schema: str, run: str) -> float:
    """The PostgreSQL baseline: one transaction updating every row of ``run``."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        table = f'"{schema}".events'
        start = time.perf_counter()
        seqs = [r[0] for r in conn.execute(f"SELECT seq FROM {table} WHERE run_id = %s", (run,))]
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                f"UPDATE {table} SET event_json = %s, content_hash = %s WHERE seq = %s",
                [('{"erased":true}', None, s) for s in seqs],
            )
        took = time.perf_counter() - start
    assert len(seqs) == RUN, len(seqs)
    return took


def run_bar(label: str, events: int, reps: int, erase: Any, plain: Any, same: Any = None) -> None:
    """Alternate ``erase(run)``, ``plain(run)`` (and ``same(run)``, informational) on
    distinct runs; compare medians."""
    runs = events // RUN
    step = 2 if same is None else 3
    erase_s: list[float] = []
    plain_s: list[float] = []
    same_s: list[float] = []
    for i in range(reps):
        last = runs - 1 - step * i
        erase_s.append(erase(f"run-{last:05d}"))
        plain_s.append(plain(f"run-{last - 1:05d}"))
        if same is not None:
            same_s.append(same(f"run-{last - 2:05d}"))
    e, p = statistics.median(erase_s), statistics.median(plain_s)
    print(f"{label}: erase one run of {RUN:,} events in a {events:,}-event ledger ({reps} reps):")
    print(f"  erase:        median {e * 1000:.1f} ms  ({RUN / e:,.0f} events/s)")
    print(f"  plain UPDATE: median {p * 1000:.1f} ms  ({RUN / p:,.0f} rows/s)")
    if same_s:
        s = statistics.median(same_s)
        print(
            f"  plain UPDATE writing the erasure's tombstones (no bar): median "
            f"{s * 1000:.1f} ms, {p / s:.2f}x the baseline's rate; the rest of the "
            f"erasure (its checks, tombstones and record, in Python) takes "
            f"{max(e - s, 0.0) * 1000:.1f} ms"
        )
    bar(f"{label} erase rate / plain UPDATE rate", p / e, 0.5)


def postgres(dsn: str, events: int, reps: int) -> None:
    """The run bar on PostgreSQL, in a schema made for it and dropped afterwards."""
    import sqlalchemy as sa

    from ledger.sinks import PostgresSink
    from ledger.sinks.url import parse_url

    schema = f"bench_retention_{str(new_event_id()).lower()}"
    plain_dsn = parse_url(dsn).dsn
    assert plain_dsn is not None
    try:
        with PostgresSink.open(dsn, schema=schema) as sink:
            start = time.perf_counter()
            fill(sink, events)
            print(
                f"built a {events:,}-event PostgreSQL ledger in {time.perf_counter() - start:.1f} s"
            )
            psycopg_dsn = plain_dsn.replace("postgresql+psycopg://", "postgresql://")
            import psycopg

            with psycopg.connect(psycopg_dsn, autocommit=True) as conn:
                conn.execute(f'VACUUM ANALYZE "{schema}".events')
            run_bar(
                "PostgreSQL",
                events,
                reps,
                lambda run: erase_run(sink, run),
                lambda run: pg_plain_update(psycopg_dsn, schema, run),
            )
    finally:
        engine = sa.create_engine(plain_dsn, poolclass=sa.pool.NullPool)
        with engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        engine.dispose()


def bar(name: str, value: float, limit: float, *, at_least: bool = True) -> None:
    ok = value >= limit if at_least else value <= limit
    sign = ">=" if at_least else "<="
    print(f"  {name}: {value:.2f} (bar {sign} {limit}) {'ok' if ok else 'FAILED'}")
    if not ok:
        FAILED.append(name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="100,000 events, fewer reps")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--only", choices=("sqlite", "postgres"), default=None)
    parser.add_argument(
        "--postgres",
        default=os.environ.get("LEDGER_TEST_POSTGRES_DSN", ""),
        metavar="DSN",
        help="PostgreSQL to measure on (default: $LEDGER_TEST_POSTGRES_DSN; none: skipped)",
    )
    args = parser.parse_args()
    events = 100_000 if args.quick else 1_000_000
    reps = 3 if args.quick else args.reps
    if args.only != "postgres":
        sqlite(events, reps, quick=args.quick)
    if args.only != "sqlite":
        if args.postgres:
            postgres(args.postgres, events, reps)
        else:
            print("PostgreSQL: skipped (give --postgres DSN or set LEDGER_TEST_POSTGRES_DSN)")
    if FAILED:
        print(f"FAILED: {', '.join(FAILED)}")
        return 1
    print("all bars met")
    return 0


def sqlite(events: int, reps: int, *, quick: bool) -> None:
    """The run bar and the streaming bar on SQLite."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.db"
        start = time.perf_counter()
        build(path, events)
        print(f"built a {events:,}-event SQLite ledger in {time.perf_counter() - start:.1f} s")
        with SQLiteSink(path) as sink:
            run_bar(
                "SQLite",
                events,
                reps,
                lambda run: erase_run(sink, run),
                lambda run: plain_update(path, run),
                lambda run: same_update(path, run),
            )

        small, large = (10_000, 100_000) if not quick else (5_000, 50_000)
        peaks = []
        with SQLiteSink(path) as sink:
            r = Retention(sink)
            for count, offset in ((small, 0), (large, small)):
                cut = T0 + timedelta(seconds=offset + count)
                tracemalloc.start()
                start = time.perf_counter()
                done = r.erase(Selection.older_than(cut), reason="benchmark", by="bench")
                took = time.perf_counter() - start
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                assert done.erased == count, (done.erased, count)
                peaks.append(peak)
                print(
                    f"erase by date, {count:,} events: {took:.1f} s (traced), peak "
                    f"{peak / 1e6:.1f} MB"
                )
        bar(f"peak memory {large:,} / {small:,} events", peaks[1] / peaks[0], 2.0, at_least=False)


if __name__ == "__main__":
    raise SystemExit(main())
