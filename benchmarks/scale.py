"""Scale benchmark: a year of a busy fleet, 10^5 to 10^7 events, read back.

    python benchmarks/scale.py                          # SQLite, 10^5 and 10^6 events
    LEDGER_TEST_POSTGRES_DSN=postgresql://postgres@127.0.0.1:5432/test \\
        python benchmarks/scale.py                      # PostgreSQL too
    python benchmarks/scale.py --sizes 1e5,1e6,1e7      # the 10^7 ledgers as well
    python benchmarks/scale.py --only sqlite --sizes 1e5 --reps 3

**The ledgers.** :func:`fleet` yields the events a gate records for a fleet of agents
over one year (2025): a dozen runs at a time, interleaved; each run a request, what was
retrieved, then its calls (safe reads: a ``safe:`` decision and the result; approved
writes: a decision, the committed action, its result, 5 % of them failed, 30 % carrying
an approver; denials: a denied decision and the denied action), then ``run_end`` (90 %),
``abort`` (5 %) or nothing (still open). A few calls in ten thousand break the rules the
report checks (a result with no intent, an approved action with no result). Forty
principals, fifteen agents, sixty tools; one run in the middle of the year has exactly
1,000 events (the run ``chain()`` is timed on). The events are real: every row is made
by ``ledger.sinks.rows.event_row`` from an :class:`~ledger.model.Event` (the sink's own
JSON encoder and RFC 8785 content hash), numbered as leaves of the Merkle log with the
sink's own :func:`~ledger.sinks.tree.number_rows`, in a database created by the sink's
migrations. Only the commit path is skipped: rows go in with ``executemany`` (SQLite) or
``COPY`` (PostgreSQL, copied from the SQLite ledger of the same size, so both hold the
same rows), the indexes built after the load.

**The cache.** Each ledger is kept between runs: SQLite files in ``$LEDGER_BENCH_CACHE``
(default ``~/.cache/agentledger-bench``), PostgreSQL schemas ``ledger_scale_v<V>_<size>``;
the key is the size, :data:`GENERATOR_VERSION` and the schema's Alembic head, and a
ledger counts as built only once its marker is written (a sidecar JSON file; a comment on
the schema), so an interrupted build is rebuilt. ``--rebuild`` forces it. A ledger built
at a revision whose migrations to the head leave the rows as they are
(:data:`UPGRADABLE_FROM`) is upgraded in place instead.

**The figures.** For each backend and size, each candidate beside a baseline written by
hand against the same database (plain DB-API, no ledger code but the hash primitives),
as the MEDIAN of alternating runs:

=====================  ===================================  ================================
figure                 ledger                               hand-written baseline
=====================  ===================================  ================================
whole-year report      ``build_report(reader, since, until)``  the same aggregates in SQL +
                                                            one streaming content-hash pass
                                                            (the issue's); and with each
                                                            row's leaf checked too
30-day report          the same over 30 days                the same over 30 days
runs() over the year   ``list(reader.runs(...))``           ``GROUP BY run_id`` fetched
chain() of 1,000       ``reader.chain(run)``                fetch of the run's JSON +
                                                            ``json.loads`` each (and, no
                                                            bar, the plain fetch)
events() first page    ``events(tool=, since=)``, 500       ``... WHERE tool AND time ORDER
                                                            BY seq LIMIT 500`` + json.loads
verification           ``verify_rows`` (hashes and the      a fetch recomputing each content
                       Merkle log, one pass)                hash and leaf, folding the root
=====================  ===================================  ================================

Peak memory (``VmHWM``, the peak resident set) of the report (whole year, 30 days) and
of verification is measured in a fresh subprocess each, beside an idle interpreter that
opened the same ledger (``--memory-only``: only these). The growth from the smallest to
the largest size is printed per figure. Exit 1 when a bar fails.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson
from ulid import ULID

from ledger.canonical import CanonicalizationError, canonical_bytes
from ledger.integrity.merkle import Frontier, leaf_hash
from ledger.model.event import Event
from ledger.model.values import Actor, Approval, Kind, Ref, RefSource, Verdict
from ledger.sinks.rows import event_row
from ledger.sinks.tree import number_rows, raised

GENERATOR_VERSION = 1
SEED = 20250101
START = datetime(2025, 1, 1, tzinfo=UTC)
END = datetime(2026, 1, 1, tzinfo=UTC)
START_US = int(START.timestamp()) * 1_000_000
YEAR_US = int((END - START).total_seconds()) * 1_000_000
LONG_RUN = "run-long-1000"
LONG_EVENTS = 1000
ACTIVE_RUNS = 12
WINDOW_30 = (datetime(2025, 6, 1, tzinfo=UTC), datetime(2025, 7, 1, tzinfo=UTC))
PROBE_TOOL = "write_ticket"  # events(tool=..., since=...) is timed on this tool
PROBE_SINCE = datetime(2025, 9, 1, tzinfo=UTC)
PAGE = 500
LISTED = 1000  # the report lists the first 1,000 of each listing (ledger.report.listing)

SAFE_TOOLS = tuple(
    f"{verb}_{noun}"
    for verb in ("read", "list", "search", "fetch")
    for noun in ("file", "ticket", "doc", "page", "mail", "log")
)
WRITE_TOOLS = tuple(
    f"{verb}_{noun}"
    for verb in ("write", "delete", "send", "deploy", "update", "create")
    for noun in ("file", "ticket", "doc", "page", "mail", "log")
)
PRINCIPALS = tuple(f"user{i:02d}@example.com" for i in range(40))
AGENTS = tuple((f"agent-{name}", f"{major}.{minor}") for name, major, minor in (
    ("triage", 1, 4), ("planner", 2, 0), ("coder", 3, 1), ("reviewer", 1, 0),
    ("deployer", 0, 9), ("support", 2, 2), ("billing", 1, 1), ("security", 4, 0),
    ("docs", 1, 3), ("oncall", 2, 5), ("research", 0, 3), ("release", 1, 7),
    ("data", 3, 0), ("mail", 1, 2), ("ops", 2, 1),
))  # fmt: skip
APPROVERS = ("bob", "carol", "dave", "erin")
DENY_REASONS = (
    "policy denies deletes outside /tmp",
    "no approval within 300 s",
    "dangerous: shell metacharacters in the arguments",
    "rate limit: 20 writes a minute",
)

# --- the fleet ------------------------------------------------------------------------


@dataclass(slots=True)
class _Run:
    run_id: str
    steps: Iterator[tuple[str, int, str]]  # (step kind, call number, tool)
    actor: Actor
    request_id: str = ""
    last_result: str = ""


def _plan(rng: random.Random, calls: int, end: str) -> Iterator[tuple[str, int, str]]:
    yield "request", 0, ""
    for _ in range(1 + rng.randrange(2)):
        yield "retrieved", 0, ""
    for c in range(calls):
        yield from _call(rng, c)
    if end:
        yield end, 0, ""


def _call(rng: random.Random, c: int) -> Iterator[tuple[str, int, str]]:
    p = rng.random()
    if p < 0.5:
        tool = rng.choice(SAFE_TOOLS)
        yield "safe_decision", c, tool
        yield "result", c, tool
    elif p < 0.94:
        tool = rng.choice(WRITE_TOOLS)
        approved = rng.random() < 0.3
        yield ("approved_decision" if approved else "decision"), c, tool
        yield ("approved_action" if approved else "action"), c, tool
        yield ("failed" if rng.random() < 0.05 else "result"), c, tool
    elif p < 0.9996:
        tool = rng.choice(WRITE_TOOLS)
        yield "denied_decision", c, tool
        yield "denied_action", c, tool
    elif p < 0.9998:  # a result that ran without a committed intent (a violation)
        yield "result", c, rng.choice(WRITE_TOOLS)
    else:  # an approved action whose result was never recorded (a crash)
        tool = rng.choice(WRITE_TOOLS)
        yield "decision", c, tool
        yield "action", c, tool


def _long_plan(rng: random.Random) -> Iterator[tuple[str, int, str]]:
    """Exactly :data:`LONG_EVENTS` events: request, retrievals, calls, run_end."""
    yield "request", 0, ""
    left, c = LONG_EVENTS - 2, 0
    while left >= 3:
        for step in _call(rng, c):
            left -= 1
            yield step
            if left == 0:
                break
        c += 1
    for _ in range(left):
        yield "retrieved", 0, ""
    yield "run_end", 0, ""


def fleet(total: int, seed: int = SEED) -> Iterator[Event]:
    """``total`` events of a year of a fleet, in commit order (see the module doc)."""
    rng = random.Random(seed)
    step_us = YEAR_US / total
    active: list[_Run] = []
    serial = 0
    long_started = False
    emitted = 0
    while emitted < total:
        while len(active) < ACTIVE_RUNS:
            serial += 1
            end = rng.choices(("run_end", "abort", ""), (90, 5, 5))[0]
            who = rng.choice(AGENTS)
            actor = Actor(principal=rng.choice(PRINCIPALS), agent_id=who[0], agent_version=who[1])
            run_id = f"run-{serial:07d}"
            active.append(_Run(run_id, _plan(rng, 1 + int(rng.expovariate(1 / 8)), end), actor))
        if not long_started and emitted >= total * 2 // 5:
            long_started = True
            actor = Actor(principal=PRINCIPALS[0], agent_id="agent-batch", agent_version="1.0")
            active.append(_Run(LONG_RUN, _long_plan(rng), actor))
        run = active[rng.randrange(len(active))]
        step = next(run.steps, None)
        if step is None:
            active.remove(run)
            continue
        micros = START_US + int(emitted * step_us + rng.random() * step_us * 0.9)
        event_id = ULID.from_int(((micros // 1000) << 80) | emitted)
        yield _event(rng, run, step, event_id, micros)
        emitted += 1


def _event(
    rng: random.Random, run: _Run, step: tuple[str, int, str], event_id: ULID, micros: int
) -> Event:
    what, c, tool = step
    when = START + timedelta(microseconds=micros - START_US)
    common: dict[str, Any] = {
        "event_id": event_id, "run_id": run.run_id, "time": when, "actor": run.actor,
        "agent_path": run.actor.agent_id,
    }  # fmt: skip
    call = {"call_id": f"c{c}", "tool": tool}
    args = f'{{"path":"/srv/{run.run_id}/{c}.txt","text":"quarterly figures, part {c}"}}'
    if what == "request":
        run.request_id = str(event_id)
        text = f"tidy the notes of project {rng.randrange(500)} and file the report"
        return Event(kind=Kind.REQUEST, args=json.dumps(text), preview=text, **common)
    if what == "retrieved":
        ref = Ref(source=RefSource.MEMORY, id=f"style-{rng.randrange(50)}", hash=_fake_hash(rng))
        return Event(kind=Kind.RETRIEVED, refs=(ref,), **common)
    if what == "safe_decision":
        return Event(kind=Kind.GATE_DECISION, verdict=Verdict.ALLOWED, label="safe:readers",
                     reason="safe tool", args=args, preview=f"{tool} {args}"[:120],
                     **call, **common)  # fmt: skip
    approval = None
    if what.startswith("approved"):
        approval = Approval(
            approver=rng.choice(APPROVERS), time=when - timedelta(seconds=rng.randrange(1, 90)),
            reason=f"change ticket {rng.randrange(10_000)}",
        )  # fmt: skip
    if what in ("decision", "approved_decision"):
        return Event(kind=Kind.GATE_DECISION, verdict=Verdict.ALLOWED, label="policy:writes",
                     reason="allowed by policy writes", approval=approval, **call,
                     **common)  # fmt: skip
    if what in ("action", "approved_action"):
        refs = [Ref(source=RefSource.TOOL, id=run.request_id)]
        if run.last_result:
            refs.append(Ref(source=RefSource.TOOL, id=run.last_result, hash=_fake_hash(rng)))
        return Event(kind=Kind.ACTION, verdict=Verdict.ALLOWED, refs=refs, args=args,
                     reason="the user asked for the report to be filed", approval=approval,
                     preview=f"{tool} {args}"[:120], **call, **common)  # fmt: skip
    if what in ("denied_decision", "denied_action"):
        kind = Kind.GATE_DECISION if what == "denied_decision" else Kind.ACTION
        extra: dict[str, Any] = {}
        if kind is Kind.ACTION:
            extra = {"args": args, "refs": [Ref(source=RefSource.TOOL, id=run.request_id)]}
        return Event(kind=kind, verdict=Verdict.DENIED, reason=DENY_REASONS[c % 4], **extra,
                     **call, **common)  # fmt: skip
    if what == "failed":
        return Event(kind=Kind.TOOL_RESULT, err="PermissionError: /srv is read-only",
                     duration_ms=rng.randrange(1, 400), **call, **common)  # fmt: skip
    if what == "result":
        run.last_result = str(event_id)
        body = f'{{"ok":true,"bytes":{rng.randrange(1, 1 << 20)},"lines":{rng.randrange(900)}}}'
        return Event(kind=Kind.TOOL_RESULT, result=body, duration_ms=rng.randrange(1, 400),
                     **call, **common)  # fmt: skip
    reason = "completed" if what == "run_end" else "ToolDenied: too many denials"
    err = "" if what == "run_end" else reason
    return Event(kind=Kind(what), reason=reason, err=err, **common)


def _fake_hash(rng: random.Random) -> str:
    return "sha256:" + rng.getrandbits(256).to_bytes(32, "big").hex()


# --- building and caching the ledgers -------------------------------------------------


def cache_dir() -> Path:
    base = os.environ.get("LEDGER_BENCH_CACHE") or str(Path.home() / ".cache" / "agentledger-bench")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _head() -> str:
    from ledger.sinks.schema import head_revision

    return str(head_revision())


UPGRADABLE_FROM = frozenset({"0004_tree_in_rows", "0005_payload_keys", "0006_time_high_water"})
"""Schema revisions from which the migrations to the head leave every row and index as
a fresh build makes them (0005 only adds the payload-key tables; 0006 adds and fills
``time_hi_us``, the running maximum of the time, as the generator fills it; 0007 swaps
the tool index for one in commit order): a cached ledger at one of them is upgraded in
place instead of rebuilt."""


def _upgradable(found: Any, key: dict[str, Any]) -> bool:
    """True when the cached ``found`` key differs from ``key`` only by an upgradable
    schema revision."""
    if not isinstance(found, dict) or found.get("schema") not in UPGRADABLE_FROM:
        return False
    return {k: v for k, v in found.items() if k != "schema"} == {
        k: v for k, v in key.items() if k != "schema"
    }


def upgrade_postgres_cache(dsn: str, size: int) -> None:
    """Upgrade in place the cached PostgreSQL ledger of ``size`` events when it was built
    at an upgradable revision (see :data:`UPGRADABLE_FROM`), so that
    :func:`postgres_ledger` finds it fresh."""
    import psycopg

    from ledger.sinks.opening import upgrade

    schema = f"ledger_scale_v{GENERATOR_VERSION}_{size}"
    key = cache_key(size)
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute(
            "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s",
            (schema,),
        ).fetchone()
        if found is None or not found[0] or not _upgradable(json.loads(found[0]), key):
            return
        upgrade(f"{dsn}{'&' if '?' in dsn else '?'}ledger_schema={schema}")
        # a migration that rewrote every row (0006) leaves dead tuples and old statistics
        # behind; a fresh build is analyzed, so the upgraded one is too
        conn.execute(f'VACUUM ANALYZE "{schema}".events')
        text = json.dumps(key, sort_keys=True)
        conn.execute(f"COMMENT ON SCHEMA \"{schema}\" IS '{text}'")
    print(f"  upgraded the cached PostgreSQL ledger of {size:,} events to {key['schema']}")


def cache_key(size: int) -> dict[str, Any]:
    return {"size": size, "generator": GENERATOR_VERSION, "seed": SEED, "schema": _head()}


def sqlite_ledger(size: int, rebuild: bool = False) -> Path:
    """The cached SQLite ledger of ``size`` events (built when missing or stale)."""
    path = cache_dir() / f"scale-v{GENERATOR_VERSION}-{size}.db"
    marker = path.with_suffix(".json")
    key = cache_key(size)
    fresh = not rebuild and path.exists() and marker.exists()
    if fresh and json.loads(marker.read_text()).get("key") == key:
        return path
    if fresh and _upgradable(json.loads(marker.read_text()).get("key"), key):
        from ledger.sinks.opening import upgrade

        upgrade(f"sqlite:///{path}")
        with sqlite3.connect(path) as lite:  # as a fresh build is (see the PostgreSQL one)
            lite.execute("ANALYZE")
        found = json.loads(marker.read_text())
        marker.write_text(json.dumps(found | {"key": key, "upgraded_from": found["key"]["schema"]}))
        print(f"  upgraded the cached SQLite ledger of {size:,} events to {key['schema']}")
        return path
    for stale in (path, marker, Path(f"{path}-wal"), Path(f"{path}-shm")):
        stale.unlink(missing_ok=True)
    started = time.perf_counter()
    print(f"  building the SQLite ledger of {size:,} events (cached in {path.parent}) ...",
          flush=True)  # fmt: skip
    _build_sqlite(path, size)
    took = time.perf_counter() - started
    marker.write_text(json.dumps({"key": key, "build_seconds": round(took, 1)}))
    print(f"  built in {took:.0f} s ({path.stat().st_size / 2**20:,.0f} MiB)", flush=True)
    return path


def _indexes(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    return conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type='index' AND sql IS NOT NULL"
    ).fetchall()


def _build_sqlite(path: Path, size: int) -> None:
    from ledger.sinks.sqlite import SQLiteSink

    SQLiteSink(path).close()  # the schema as the sink's migrations make it
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=OFF")  # a bulk load; an interrupted build is redone
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("PRAGMA cache_size=-262144")
    indexes = _indexes(conn)
    for name, _sql in indexes:
        conn.execute(f"DROP INDEX {name}")
    insert = (
        "INSERT INTO events (event_id, run_id, call_id, kind, tool, verdict, time_us, has_err,"
        " event_json, content_hash, leaf_index, time_hi_us, nodes)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
    )
    frontier = Frontier()
    batch: list[tuple[Any, ...]] = []
    high: int | None = None  # the largest time of the batches before

    def numbered(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        # number_rows' time_hi_us covers its batch; raised to the batches' before it, as
        # the sink raises it to the largest time stored
        nonlocal high
        out = raised(number_rows(frontier, rows), high)
        high = out[-1][-2] if out else high
        return out

    conn.execute("BEGIN")
    for i, event in enumerate(fleet(size)):
        batch.append(event_row(event))
        if len(batch) >= 20_000:
            conn.executemany(insert, numbered(batch))
            batch.clear()
            if i % 500_000 < 20_000:
                conn.execute("COMMIT")
                conn.execute("BEGIN")
    conn.executemany(insert, numbered(batch))
    conn.execute("UPDATE tree_head SET size = ?, root = ? WHERE id = 1",
                 (frontier.size, frontier.root()))  # fmt: skip
    conn.execute("COMMIT")
    for _name, sql in indexes:
        conn.execute(sql)
    conn.execute("ANALYZE")
    conn.execute("PRAGMA journal_mode=WAL")  # as the sink keeps it
    conn.close()


def postgres_ledger(dsn: str, size: int, source: Path, rebuild: bool = False) -> str:
    """The cached PostgreSQL schema of ``size`` events, copied from the SQLite ledger
    ``source`` (the same rows); returns the schema name."""
    import psycopg

    from ledger.sinks.postgres import PostgresSink

    schema = f"ledger_scale_v{GENERATOR_VERSION}_{size}"
    key = json.dumps(cache_key(size), sort_keys=True)
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute(
            "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s",
            (schema,),
        ).fetchone()
        if found is not None and found[0] == key and not rebuild:
            return schema
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    started = time.perf_counter()
    print(f"  building the PostgreSQL ledger of {size:,} events (schema {schema}) ...", flush=True)
    PostgresSink.open(dsn, schema=schema).close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = "
            "'events' AND indexname LIKE %s",
            (schema, "i%"),
        ).fetchall()
        indexes += conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND "
            "indexname = 'ux_events_leaf_index'",
            (schema,),
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{schema}"."{name}"')
        lite = sqlite3.connect(source)
        with conn.transaction():
            columns = (
                "event_id, run_id, call_id, kind, tool, verdict, time_us, has_err, event_json,"
                " content_hash, leaf_index, time_hi_us, nodes"
            )
            with conn.cursor().copy(f"COPY events ({columns}) FROM STDIN") as copy:
                for row in lite.execute(f"SELECT {columns} FROM events ORDER BY seq"):
                    copy.write_row((*row[:7], bool(row[7]), *row[8:]))
            size_, root = lite.execute("SELECT size, root FROM tree_head").fetchone()
            conn.execute("UPDATE tree_head SET size = %s, root = %s WHERE id = 1", (size_, root))
        lite.close()
        for _, sql in indexes:
            conn.execute(sql)
        conn.execute("ANALYZE")
        conn.execute(f"COMMENT ON SCHEMA \"{schema}\" IS '{key}'")
    print(f"  built in {time.perf_counter() - started:.0f} s", flush=True)
    return schema


# --- the hand-written baselines -------------------------------------------------------


class Plain:
    """A plain DB-API connection and the hand-written queries (``?`` placeholders,
    rewritten for psycopg)."""

    def __init__(self, dialect: str, conn: Any) -> None:
        self.dialect = dialect
        self.conn = conn

    @classmethod
    def sqlite(cls, path: Path) -> Plain:
        return cls("sqlite", sqlite3.connect(f"file:{path}?mode=ro", uri=True))

    @classmethod
    def postgres(cls, dsn: str, schema: str) -> Plain:
        import psycopg

        conn = psycopg.connect(dsn, autocommit=True)
        conn.execute(f'SET search_path TO "{schema}"')
        return cls("postgresql", conn)

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        if self.dialect == "postgresql":
            sql = sql.replace("?", "%s")
        return list(self.conn.execute(sql, params).fetchall())

    def stream(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[Any]:
        if self.dialect == "postgresql":
            with self.conn.transaction(), self.conn.cursor(name="stream") as cur:
                cur.itersize = 5000
                cur.execute(sql.replace("?", "%s"), params)
                yield from cur
        else:
            yield from self.conn.execute(sql, params)

    def json(self, column: str, path: str) -> str:
        if self.dialect == "sqlite":
            return f"json_extract({column}, '$.{path}')"
        return f"(({column})::json ->> '{path}')"

    def close(self) -> None:
        self.conn.close()


def _us(moment: datetime) -> int:
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def plain_report(db: Plain, since: datetime, until: datetime, log: bool = True) -> dict[str, Any]:
    """What the report computes, by hand: the aggregates in SQL, the listed rows fetched
    (denials and approved actions with their JSON parsed: reasons, approvers, who), and
    one pass checking every row of the window (:func:`plain_row_ok`); with ``log``, that
    pass reads every row of the ledger and folds the Merkle root too, as the report
    verifies the tamper-evident log (:func:`plain_checked_log`)."""
    w = (_us(since), _us(until))
    win = "time_us >= ? AND time_us < ?"
    out: dict[str, Any] = {}
    out["counts"] = db.rows(
        f"SELECT tool, kind, verdict, has_err, count(*) FROM events WHERE {win} "
        "GROUP BY tool, kind, verdict, has_err", w,
    )  # fmt: skip
    out["runs"] = plain_runs(db, since, until)
    width = 7 * 86400 * 1_000_000
    out["timeline"] = db.rows(
        "SELECT (time_us - ?) / ?, sum(CASE WHEN verdict = 'allowed' THEN 1 ELSE 0 END), "
        f"sum(CASE WHEN verdict = 'allowed' THEN 0 ELSE 1 END) FROM events WHERE {win} AND "
        "kind = 'action' GROUP BY 1", (w[0], width, *w),
    )  # fmt: skip
    # the listed rows streamed, their JSON parsed; the first LISTED kept, the rest counted
    # (per tool and reason, per approver and tool), as a report of bounded size does
    denials: list[tuple[Any, ...]] = []
    reasons: Counter[tuple[str, str]] = Counter()
    for run, call, tool, t, v, j in db.stream(
        f"SELECT run_id, call_id, tool, time_us, verdict, event_json FROM events WHERE {win}"
        " AND kind = 'action' AND (verdict IS NULL OR verdict <> 'allowed') ORDER BY seq", w,
    ):  # fmt: skip
        reason = orjson.loads(j).get("reason", "")
        reasons[(tool, reason)] += 1
        if len(denials) < LISTED:
            denials.append((run, call, tool, t, v, reason))
    out["denials"] = (denials, reasons)
    approved: list[tuple[Any, ...]] = []
    approvers: Counter[tuple[str, str]] = Counter()
    for run, call, tool, t, j in db.stream(
        f"SELECT run_id, call_id, tool, time_us, event_json FROM events WHERE {win} AND "
        "kind = 'action' AND verdict = 'allowed' ORDER BY seq", w,
    ):  # fmt: skip
        obj = orjson.loads(j)
        approvers[((obj.get("approval") or {}).get("approver", ""), tool)] += 1
        if len(approved) < LISTED:
            approved.append((run, call, tool, t, obj))
    out["approved"] = (approved, approvers)
    out["missing"] = db.rows(
        f"SELECT a.run_id, a.call_id, a.tool, a.time_us, a.event_id FROM events a WHERE {win} "
        "AND a.kind = 'action' AND a.verdict = 'allowed' AND NOT EXISTS (SELECT 1 FROM events r"
        " WHERE r.run_id = a.run_id AND r.call_id = a.call_id AND r.kind = 'tool_result')", w,
    )  # fmt: skip
    label, reason = db.json("d.event_json", "label"), db.json("d.event_json", "reason")
    out["unintended"] = db.rows(
        f"SELECT r.run_id, r.call_id, r.tool, r.time_us, r.event_id, "
        f"(SELECT {label} || '|' || coalesce({reason}, '') || '|' || d.verdict FROM events d"
        " WHERE d.run_id = r.run_id AND d.call_id = r.call_id AND d.kind = 'gate_decision' "
        f"ORDER BY d.seq LIMIT 1) FROM events r WHERE {win.replace('time_us', 'r.time_us')} "
        "AND r.kind = 'tool_result' AND NOT EXISTS (SELECT 1 FROM events a WHERE a.run_id = "
        "r.run_id AND a.call_id = r.call_id AND a.kind = 'action' AND a.verdict = 'allowed' "
        "AND a.seq < r.seq)", w,
    )  # fmt: skip
    out["held"] = db.rows("SELECT min(time_us), max(time_us) FROM events")
    if log:
        out["checked"] = plain_checked_log(db, since, until)
    else:
        out["hashes"] = plain_hash_pass(db, since, until)
    return out


def plain_checked_log(db: Plain, since: datetime, until: datetime) -> bool:
    """One pass over the rows from the window's first to its last (in ``seq`` order):
    the window's rows checked (:func:`plain_row_ok`), every row's leaf recomputed and
    compared with the leaf hash stored with it (the first 32 bytes of ``events.nodes``):
    the hand-written minimum of what the report's log check does over a window (the
    report also recomputes every inner node and folds the root into the stored head)."""
    low, high = _us(since), _us(until)
    ((first, last),) = db.rows(
        "SELECT min(seq), max(seq) FROM events WHERE time_us >= ? AND time_us < ?", (low, high)
    )
    bad = 0
    sql = _CHECKED.replace(" FROM", ", nodes FROM") + " WHERE seq >= ? AND seq <= ? ORDER BY seq"
    for row in db.stream(sql, (first, last)):
        if low <= row[6] < high and not plain_row_ok(row[:-1]):
            bad += 1
        text = row[8]
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        if leaf_hash(data) != bytes(row[-1][:32]):
            bad += 1
    return bad == 0


def canonical_hash(obj: Any) -> str | None:
    """The content hash of parsed stored JSON, as a careful hand-written check computes it."""
    try:
        return "sha256:" + hashlib.sha256(canonical_bytes(obj)).hexdigest()
    except CanonicalizationError:
        return None


_CHECKED = (
    "SELECT event_id, run_id, call_id, kind, tool, verdict, time_us, has_err, event_json, "
    "content_hash FROM events"
)


def plain_row_ok(row: tuple[Any, ...]) -> bool:
    """What the ledger's check checks of a row, by hand: the content hash recomputed
    from the stored JSON, the id and the filter columns against the JSON."""
    event_id, run_id, call_id, kind, tool, verdict, time_us, has_err, text, stored = row
    obj = orjson.loads(text)
    get = obj.get
    when = datetime.fromisoformat(get("time", ""))
    return (
        canonical_hash(obj) == stored
        and get("event_id") == event_id
        and get("run_id", "") == run_id
        and get("call_id", "") == call_id
        and get("kind") == kind
        and get("tool", "") == tool
        and get("verdict") == verdict
        and bool(get("err")) == bool(has_err)
        and (when - EPOCH) // timedelta(microseconds=1) == time_us
    )


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def plain_hash_pass(db: Plain, since: datetime | None, until: datetime | None) -> int:
    """Check every row in the window (:func:`plain_row_ok`); the number that fail."""
    where, params = "", ()
    if since is not None and until is not None:
        where, params = " WHERE time_us >= ? AND time_us < ?", (_us(since), _us(until))
    return sum(1 for row in db.stream(_CHECKED + where, params) if not plain_row_ok(row))


def plain_runs(db: Plain, since: datetime, until: datetime) -> list[Any]:
    return db.rows(
        "SELECT run_id, min(time_us), max(time_us), count(*), "
        "sum(CASE WHEN kind = 'action' THEN 1 ELSE 0 END), count(DISTINCT CASE WHEN verdict ="
        " 'denied' THEN coalesce(nullif(call_id, ''), event_id) END), sum(CASE WHEN has_err "
        "THEN 1 ELSE 0 END), max(CASE WHEN kind IN ('run_end', 'abort') THEN 1 ELSE 0 END) "
        "FROM events WHERE time_us >= ? AND time_us < ? GROUP BY run_id ORDER BY 2, 1",
        (_us(since), _us(until)),
    )


def plain_verify(db: Plain) -> bool:
    """Every row checked (:func:`plain_row_ok`) and its leaf recomputed in one pass, the
    root folded and compared with the stored head."""
    frontier = Frontier()
    bad = 0
    for row in db.stream(_CHECKED.replace(" FROM", ", leaf_index FROM") + " ORDER BY seq"):
        text = row[8]
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        if not plain_row_ok(row[:-1]):
            bad += 1
        frontier.push(leaf_hash(data))
    (root,) = db.rows("SELECT root FROM tree_head WHERE id = 1")[0]
    return bad == 0 and frontier.root() == bytes(root)


# --- measuring ------------------------------------------------------------------------


@dataclass(slots=True)
class Figure:
    backend: str
    size: int
    name: str
    ours: float  # seconds (median)
    base: float  # seconds (median)
    bar: float | None  # ratio base/ours must be >= bar
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.base / self.ours if self.ours else float("inf")

    @property
    def verdict(self) -> str:
        if self.bar is None:
            return "info"
        return "PASS" if self.ratio >= self.bar else "FAIL"


@dataclass(slots=True)
class Results:
    figures: list[Figure] = field(default_factory=list)
    memory: list[tuple[str, int, str, float, float]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def add(self, fig: Figure) -> None:
        self.figures.append(fig)
        shown = "  no bar" if fig.bar is None else f"(bar {fig.bar:.1f}x)"
        print(
            f"  {fig.name:<34} {_secs(fig.ours):>9} vs {_secs(fig.base):>9}  ratio "
            f"{fig.ratio:5.2f} {shown} {fig.verdict}{'  ' + fig.note if fig.note else ''}",
            flush=True,
        )
        if fig.verdict == "FAIL":
            self.failed.append(f"{fig.backend} {fig.size:,}: {fig.name}")


def _secs(value: float) -> str:
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.1f} ms"
    return f"{value * 1e6:.0f} us"


def _time(work: Callable[[], object], before: Callable[[], None] | None = None) -> float:
    if before is not None:
        before()
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def alternate(
    reps: int,
    ours: Callable[[], object],
    base: Callable[[], object],
    before: Callable[[], None] | None = None,
    warm: bool = True,
) -> tuple[float, float]:
    """Median seconds of ``ours`` and ``base`` run alternately ``reps`` times (with
    ``warm``, one untimed warm-up of each first; ``before`` runs untimed before each
    timed call)."""
    if warm:
        ours()
        base()
    a, b = [], []
    for _ in range(reps):
        a.append(_time(ours, before))
        b.append(_time(base, before))
    return statistics.median(a), statistics.median(b)


def alternate_many(
    reps: int,
    ours: Callable[[], object],
    bases: tuple[Callable[[], object], ...],
    warm: bool = True,
) -> tuple[float, list[float]]:
    """:func:`alternate` with several baselines: ``ours``, then each baseline in turn,
    ``reps`` times; the median seconds of ``ours`` and of each baseline."""
    if warm:
        ours()
        for base in bases:
            base()
    a: list[float] = []
    b: list[list[float]] = [[] for _ in bases]
    for _ in range(reps):
        a.append(_time(ours))
        for times, base in zip(b, bases, strict=True):
            times.append(_time(base))
    return statistics.median(a), [statistics.median(t) for t in b]


def evict(path: Path) -> None:
    """Drop a SQLite file's pages from the OS page cache (a run long out of memory)."""
    for name in (path, Path(f"{path}-wal")):
        if name.exists():
            fd = os.open(name, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def child_peak(url: str, what: str, since: str, until: str) -> tuple[float, float]:
    """``(seconds, peak RSS MiB)`` of ``what`` (report, verify or idle) in a fresh process."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", what, "--url", url, "--since", since,
         "--until", until],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    found = json.loads(out.strip().splitlines()[-1])
    return float(found["seconds"]), float(found["maxrss_kib"]) / 1024


def _peak_kib() -> int:
    """This process's peak resident set (VmHWM: reset at exec, unlike ``ru_maxrss``,
    which Linux carries over from the process that forked)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def run_child(what: str, url: str, since: str, until: str) -> None:
    from ledger.report.build import build_report
    from ledger.report.verification import verify_rows
    from ledger.sinks.opening import open_reader
    from ledger.timefmt import parse_time

    start = time.perf_counter()
    with open_reader(url) as reader:
        if what == "report":
            report = build_report(reader, since=parse_time(since), until=parse_time(until))
            assert report.events > 0
        elif what == "verify":
            hashes, result = verify_rows(reader)
            assert hashes.mismatch_count == 0 and result is not None and result.ok
    took = time.perf_counter() - start
    print(json.dumps({"seconds": took, "maxrss_kib": _peak_kib()}))


# --- one ledger -----------------------------------------------------------------------


def bench_ledger(
    results: Results,
    backend: str,
    size: int,
    url: str,
    plain: Plain,
    reps: int,
    path: Path | None,
    measure_memory: bool,
    heavy_reps: int = 3,
    light: bool = False,
    report_only: bool = False,
    memory_only: bool = False,
    windows: tuple[str, ...] = ("whole year", "30 days"),
) -> None:
    from ledger.report.build import build_report
    from ledger.report.verification import verify_rows
    from ledger.sinks.opening import open_reader

    print(f"{backend}, {size:,} events:", flush=True)
    heavy = max(1, min(reps, heavy_reps))
    reader = open_reader(url)

    def fig(name: str, ours: float, base: float, bar: float | None, note: str = "") -> None:
        results.add(Figure(backend, size, name, ours, base, bar, note))

    year = (START, END)
    month = WINDOW_30

    for label, (since, until), runs_of in (("whole year", year, heavy), ("30 days", month, reps)):
        if light or memory_only:
            break
        if label not in windows:
            continue

        def report(since: datetime = since, until: datetime = until) -> None:
            build_report(reader, since=since, until=until)

        bases: tuple[Callable[[], object], ...] = (
            lambda since=since, until=until: plain_report(plain, since, until, log=False),
            lambda since=since, until=until: plain_report(plain, since, until),
        )
        if size >= 10**7 and label == "whole year":
            bases = bases[:1]  # a whole pass over 10^7 rows takes minutes: the only
        a, found = alternate_many(runs_of, report, bases, warm=size < 10**6)
        fig(f"report, {label}", a, found[0], 0.5, "vs SQL + one hash pass (the issue's)")
        if len(found) > 1:
            fig(f"report, {label}", a, found[1], 0.5, "vs SQL + hash pass + leaves")
    if report_only or memory_only:
        reader.close()
        if not memory_only:
            return
    if not memory_only:
        a, b = alternate(reps, lambda: list(reader.runs(since=year[0], until=year[1])),
                         lambda: plain_runs(plain, *year))  # fmt: skip
        fig("runs() over the year", a, b, 0.5)
        chain_sql = "SELECT event_json FROM events WHERE run_id = ? ORDER BY seq"

        def chain() -> None:
            assert len(reader.chain(LONG_RUN).events) == LONG_EVENTS

        def chain_base() -> None:
            assert (
                len([json.loads(j) for (j,) in plain.rows(chain_sql, (LONG_RUN,))]) == LONG_EVENTS
            )

        a, b = alternate(reps * 3, chain, chain_base)
        fig("chain() of 1,000, in RAM", a, b, 0.5, "vs fetch+json.loads")
        a, b = alternate(reps * 3, chain, lambda: plain.rows(chain_sql, (LONG_RUN,)))
        fig("chain() of 1,000, in RAM", a, b, None, "vs plain fetch")
        if path is not None:
            a, b = alternate(reps * 2, chain, lambda: plain.rows(chain_sql, (LONG_RUN,)),
                             before=lambda: evict(path))  # fmt: skip
            fig("chain() of 1,000, from disk", a, b, 0.5, "vs plain fetch")
            # what the bar asks of any decoder: the hand-written fetch + json.loads
            a, b = alternate(reps * 2, chain_base, lambda: plain.rows(chain_sql, (LONG_RUN,)),
                             before=lambda: evict(path))  # fmt: skip
            fig("fetch+json.loads of 1,000, from disk", a, b, None, "vs plain fetch (reference)")
        page_sql = (
            "SELECT seq, event_id, run_id, call_id, kind, tool, verdict, time_us, has_err, "
            "event_json FROM events WHERE tool = ? AND time_us >= ? ORDER BY seq LIMIT ?"
        )

        def first_page() -> None:
            assert len(list(reader.events(tool=PROBE_TOOL, since=PROBE_SINCE, limit=PAGE))) == PAGE

        def page_base() -> None:
            rows = plain.rows(page_sql, (PROBE_TOOL, _us(PROBE_SINCE), PAGE))
            assert len([json.loads(r[-1]) for r in rows]) == PAGE

        a, b = alternate(reps * 3, first_page, page_base)
        fig("events(tool, since) first page", a, b, 0.5, "vs fetch+json.loads")

        def verify() -> None:
            hashes, found = verify_rows(reader)
            assert hashes.mismatch_count == 0 and found is not None and found.ok

        if not light:
            a, b = alternate(heavy, verify, lambda: plain_verify(plain), warm=size < 10**6)
            # issue 18 names no bar for it: shown beside its baseline, as docs say
            fig("verification (hashes + Merkle)", a, b, None)
        reader.close()
    if measure_memory and not light:
        since, until = START.isoformat(), END.isoformat()
        _, idle = child_peak(url, "idle", since, until)
        for what, (start, end) in (
            ("report", (since, until)),
            ("report, 30 days", (WINDOW_30[0].isoformat(), WINDOW_30[1].isoformat())),
            ("verify", (since, until)),
        ):
            secs, peak = child_peak(url, what.split(",")[0], start, end)
            results.memory.append((backend, size, what, peak, idle))
            verdict = "PASS" if peak < 200 else "FAIL"
            if size >= 10_000_000 and verdict == "FAIL":
                results.failed.append(f"{backend} {size:,}: peak memory of {what}")
            shown = verdict if size >= 10_000_000 else "info (bar at 10^7)"
            print(f"  peak RSS, {what:<27} {peak:7.0f} MiB (idle {idle:.0f} MiB, {secs:.1f} s) "
                  f"(bar 200 MiB) {shown}", flush=True)  # fmt: skip


def growth(results: Results) -> None:
    """Per backend and figure: time at the smallest and largest size, and the growth."""
    print("\ngrowth (median seconds, ours / baseline):")
    keys = sorted({(f.backend, f.name, f.note) for f in results.figures})
    for backend, name, note in keys:
        figs = sorted(
            (f for f in results.figures if (f.backend, f.name, f.note) == (backend, name, note)),
            key=lambda f: f.size,
        )
        if len(figs) < 2:
            continue
        lo, hi = figs[0], figs[-1]
        rows = hi.size / lo.size
        print(
            f"  {backend:<10} {name + (' ' + note if note else ''):<58} "
            + "  ".join(f"{f.size:.0e}: {_secs(f.ours)}/{_secs(f.base)}" for f in figs)
            + f"  growth x{hi.ours / lo.ours:.1f} for x{rows:.0f} rows"
        )


class _NotSQL:
    """A SQL ledger behind a reader that is not a SQL sink: ``build_report`` then takes
    the streaming build over whole events (as for JSONL)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)


def compare_builds(url: str, size: int) -> bool:
    """The whole-year report computed in the database against the streaming build over
    whole events on the same ledger: every number and listing equal (the log check
    apart: the database build re-reads the window, the streaming one every row)."""
    from ledger.report.build import build_report
    from ledger.sinks.opening import open_reader

    with open_reader(url) as reader:
        started = time.perf_counter()
        db = build_report(reader, since=START, until=END).to_dict()
        took = time.perf_counter() - started
        started = time.perf_counter()
        streamed = build_report(_NotSQL(reader), since=START, until=END).to_dict()
        took_streamed = time.perf_counter() - started
    skip = {"generated_at", "retention", "log_check", "log_scope", "log_statement"}
    differ = [k for k in streamed if k not in skip and db[k] != streamed[k]]
    same = not differ and db["log_check"]["ok"] == streamed["log_check"]["ok"]
    print(f"  the database build ({took:.1f} s) and the streaming build ({took_streamed:.1f} s)"
          f" of {size:,} events: {'the same report' if same else 'DIFFER in ' + str(differ)}",
          flush=True)  # fmt: skip
    return same


def parse_sizes(text: str) -> list[int]:
    return [int(float(part)) for part in text.split(",") if part.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e5,1e6", help="comma-separated, e.g. 1e5,1e6,1e7")
    parser.add_argument("--reps", type=int, default=3, help="alternating runs per figure")
    parser.add_argument(
        "--heavy-reps", type=int, default=3,
        help="alternating runs of the whole-year report and of verification",
    )  # fmt: skip
    parser.add_argument("--report-only", action="store_true", help="only the report figures")
    parser.add_argument("--memory-only", action="store_true", help="only the peak-memory runs")
    parser.add_argument(
        "--compare", action="store_true",
        help="only compare the database build of the report with the streaming build",
    )  # fmt: skip
    parser.add_argument(
        "--windows", default="year,30days",
        help="the report windows timed: year, 30days or both (comma-separated)",
    )  # fmt: skip
    parser.add_argument(
        "--light", action="store_true",
        help="skip the whole-year report, verification and memory (the passes over every row)",
    )  # fmt: skip
    parser.add_argument("--only", choices=("sqlite", "postgresql"), help="one backend")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached ledgers")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory runs")
    parser.add_argument("--build-only", action="store_true", help="build the caches, no timing")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--since", help=argparse.SUPPRESS)
    parser.add_argument("--until", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        run_child(opts.child, opts.url, opts.since, opts.until)
        return 0
    sizes = parse_sizes(opts.sizes)
    names = {"year": "whole year", "30days": "30 days"}
    windows = tuple(names[w.strip()] for w in opts.windows.split(",") if w.strip())
    dsn = os.environ.get("LEDGER_TEST_POSTGRES_DSN", "")
    results = Results()
    print(f"median of {opts.reps} alternating runs ({opts.heavy_reps} for the whole-year "
          f"report and verification); generator v{GENERATOR_VERSION}", flush=True)  # fmt: skip
    for size in sizes:
        path = sqlite_ledger(size, opts.rebuild)
        schema = None
        if dsn and opts.only != "sqlite":
            if not opts.rebuild:
                upgrade_postgres_cache(dsn, size)
            schema = postgres_ledger(dsn, size, path, opts.rebuild)
        if opts.build_only:
            continue
        if opts.compare:
            if opts.only != "postgresql" and not compare_builds(f"sqlite:///{path}", size):
                results.failed.append(f"sqlite {size:,}: the two builds differ")
            if schema is not None:
                url = f"{dsn}{'&' if '?' in dsn else '?'}ledger_schema={schema}"
                if not compare_builds(url, size):
                    results.failed.append(f"postgresql {size:,}: the two builds differ")
            continue
        if opts.only != "postgresql":
            plain = Plain.sqlite(path)
            bench_ledger(results, "sqlite", size, f"sqlite:///{path}", plain, opts.reps, path,
                         not opts.no_memory, opts.heavy_reps, opts.light,
                         opts.report_only, opts.memory_only, windows)  # fmt: skip
            plain.close()
        if schema is not None:
            plain = Plain.postgres(dsn, schema)
            url = f"{dsn}{'&' if '?' in dsn else '?'}ledger_schema={schema}"
            bench_ledger(results, "postgresql", size, url, plain, opts.reps, None,
                         not opts.no_memory, opts.heavy_reps, opts.light,
                         opts.report_only, opts.memory_only, windows)  # fmt: skip
            plain.close()
        elif not dsn and opts.only != "sqlite":
            print("PostgreSQL: skipped (set LEDGER_TEST_POSTGRES_DSN)")
    if opts.build_only:
        return 0
    growth(results)
    print("all bars passed" if not results.failed else "bars failed:")
    for name in results.failed:
        print(f"  {name}")
    return 1 if results.failed else 0


if __name__ == "__main__":
    sys.exit(main())
