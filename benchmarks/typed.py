"""Typed-ledger replay benchmark: the engine beside a plain floor pipeline, same process.

Run::

    python benchmarks/typed.py                      # 200,000 records, 10,000 keys
    python benchmarks/typed.py --records 20000      # or LEDGER_BENCH_RECORDS=20000

It writes a table ledger and a counter ledger (half the records each, over the same
10,000 keys) as reference-format shards in a folder store, commits the very same shard
files to ``ledgers/<name>`` branches of a bare git repository (``git fast-import``), then
measures, alternating the three in every round and taking the **median** of the rounds:

1. the engine: ``build_projection`` over the folder store (read and verify every shard
   line, canonical order, replay, atomic read-only SQLite file);
2. the engine over the git branches: ``build_projection`` over a ``GitShardStore`` (a new
   one each round: list the refs and trees, read every blob through one ``cat-file
   --batch``);
3. the floor: the same work as 1 written plainly (parse each line, hash its canonical
   form, validate, apply to a dict, ``executemany``) with no diagnostics, ordering or
   atomicity;

then the peak Python memory of the engine (tracemalloc, a separate run) and the
wave-order time of a DAG of the same size (``order_records``).

Bars (the script exits 1 when one fails): engine/floor >= 0.5x, git/folder >= 0.5x
(records per second).
"""

from __future__ import annotations

import argparse
import graphlib
import hashlib
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import jsonschema_rs
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ledger.typed import LedgerConfig, Record, ShardStore, build_projection, final_id, parse_config
from ledger.typed.gitstore import GitShardStore
from ledger.typed.order import order_records
from ledger.typed.projection import GENERIC_DDL, GENERIC_INDEXES

SCHEMA = {
    "type": "object",
    "required": ["id", "score"],
    "properties": {"id": {"type": "string"}, "score": {"type": "integer"}},
}
TS = "2026-01-01T00:00:00.000Z"


def table_ops(count: int, keys: int, rng: random.Random) -> list[dict[str, Any]]:
    """Inserts for new keys, then updates and upserts of existing ones."""
    seen: set[str] = set()
    ops: list[dict[str, Any]] = []
    for _ in range(count):
        key = f"k{rng.randrange(keys):05d}"
        if key not in seen:
            seen.add(key)
            ops.append({"operation": "insert", "value": {"id": key, "score": 0, "tag": "new"}})
        elif rng.random() < 0.7:
            ops.append({"operation": "update", "key": key, "patch": {"score": rng.randrange(100)}})
        else:
            ops.append({"operation": "upsert", "value": {"id": key, "score": 1, "tag": "re"}})
    return ops


def counter_ops(count: int, keys: int, rng: random.Random) -> list[dict[str, Any]]:
    kinds = ("increment", "decrement")
    return [
        {
            "operation": rng.choice(kinds),
            "name": f"k{rng.randrange(keys):05d}",
            "amount": rng.randrange(10),
        }
        for _ in range(count)
    ]


def write_history(store: ShardStore, name: str, payloads: list[dict[str, Any]]) -> None:
    """One writer appending in batches of 500 (a linear chain), reference layout."""
    parents: tuple[str, ...] = ()
    for start in range(0, len(payloads), 500):
        batch: list[Record] = []
        for i, payload in enumerate(payloads[start : start + 500]):
            rid = final_id(name, start + i)
            record = Record.new(id=rid, timestamp=TS, parents=parents, payload=payload)
            batch.append(record)
            parents = (record.sha,)
        store.append_records(name, batch)


def floor_pipeline(store: ShardStore, config: LedgerConfig, out: Path) -> int:
    """The same work written plainly: parse, hash, validate, apply to a dict, executemany."""
    validator = jsonschema_rs.Draft202012Validator(SCHEMA)
    total = 0
    for ledger in config.ledgers:
        by_sha: dict[str, tuple[dict[str, Any], str, int]] = {}
        for path in sorted(store.shard_dir(ledger.name).glob("*.jsonl")):
            offset = 0
            for line in path.read_bytes().split(b"\n")[:-1]:
                obj = orjson.loads(line)
                sha = obj.pop("sha")
                digest = hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()
                if "sha256:" + digest != sha:
                    raise ValueError("bad sha")
                by_sha[sha] = (obj, path.name, offset)
                offset += len(line) + 1
        out.mkdir(parents=True, exist_ok=True)
        graph = {sha: item[0]["parents"] for sha, item in by_sha.items()}
        rows: list[tuple[Any, ...]] = []
        parents: list[tuple[str, str]] = []
        state: dict[str, Any] = {}
        for sha in graphlib.TopologicalSorter(graph).static_order():
            obj, shard, offset = by_sha[sha]
            payload = obj["payload"]
            _floor_apply(ledger.type, payload, state, validator)
            payload_text = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode()
            rows.append(
                (
                    len(rows),
                    obj["id"],
                    sha,
                    obj["type"],
                    obj["timestamp"],
                    payload_text,
                    shard,
                    offset,
                )
            )
            parents.extend((sha, parent) for parent in obj["parents"])
        total += len(rows)
        _floor_write(out / f"{ledger.name}.db", rows, parents, state)
    return total


def _floor_apply(
    kind: str | None, p: dict[str, Any], state: dict[str, Any], validator: Any
) -> None:
    op = p["operation"]
    if kind == "counter":
        amount = p["amount"]
        if type(amount) is not int or amount < 0:
            raise ValueError("bad amount")
        state[p["name"]] = state.get(p["name"], 0) + (amount if op == "increment" else -amount)
        return
    row = {**state[p["key"]], **p["patch"]} if op == "update" else p["value"]
    validator.validate(row)
    state[row["id"]] = row


def _floor_write(
    db: Path, rows: list[tuple[Any, ...]], parents: list[tuple[str, str]], state: dict[str, Any]
) -> None:
    """The same tables and indexes as the projection, written with plain executemany."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=OFF")  # the same settings the engine uses
    conn.execute("PRAGMA synchronous=OFF")
    for statement in (*GENERIC_DDL, *GENERIC_INDEXES):
        conn.execute(statement)
    conn.execute("CREATE TABLE state (key TEXT PRIMARY KEY, value)")
    conn.executemany("INSERT INTO records VALUES (?,?,?,?,?,?,?,?)", rows)
    conn.executemany("INSERT INTO parents VALUES (?, ?)", parents)
    conn.executemany(
        "INSERT INTO state VALUES (?, ?)",
        [
            (k, v if isinstance(v, int) else orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode())
            for k, v in sorted(state.items())
        ],
    )
    conn.commit()
    conn.close()


def wave_order_seconds(count: int, rng: random.Random) -> float:
    """Time ``order_records`` on a random DAG of ``count`` records (1-3 parents each)."""
    shas = sorted({f"sha256:{rng.getrandbits(256):064x}" for _ in range(count)})
    rng.shuffle(shas)
    records = []
    for i, sha in enumerate(shas):
        parents = (
            tuple(sorted(set(rng.sample(shas[max(0, i - 1000) : i], min(i, rng.randint(1, 3))))))
            if i
            else ()
        )
        records.append(
            Record(
                version=1,
                id="ldg-00000000-0000-4000-8000-000000000000",
                type="ledger_append",
                timestamp=TS,
                parents=parents,
                payload=None,
                sha=sha,
            )
        )
    started = time.perf_counter()
    ordering = order_records(records)
    elapsed = time.perf_counter() - started
    assert len(ordering.records) == count
    return elapsed


def commit_to_git(store: ShardStore, config: LedgerConfig, repo: Path) -> None:
    """The folder store's shard files, byte for byte, on ledgers/<name> of a bare repo."""
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    stream = bytearray()
    for ledger in config.ledgers:
        stream += f"commit refs/heads/ledgers/{ledger.name}\n".encode()
        stream += b"committer bench <bench@localhost> 1700000000 +0000\ndata 5\nbench\n"
        for path in sorted(store.shard_dir(ledger.name).glob("*.jsonl")):
            data = path.read_bytes()
            stream += f"M 100644 inline ledger/shards/{path.name}\ndata {len(data)}\n".encode()
            stream += data + b"\n"
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=bytes(stream), check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--records", type=int, default=int(os.environ.get("LEDGER_BENCH_RECORDS", 200_000))
    )
    parser.add_argument(
        "--keys", type=int, default=int(os.environ.get("LEDGER_BENCH_KEYS", 10_000))
    )
    parser.add_argument("--repeat", type=int, default=int(os.environ.get("LEDGER_BENCH_REPEAT", 3)))
    args = parser.parse_args()
    rng = random.Random(42)
    config = parse_config(
        {"rows": {"type": "table", "key": "id", "schema": SCHEMA}, "counts": {"type": "counter"}}
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = ShardStore(root / "repo", config)
        started = time.perf_counter()
        write_history(store, "rows", table_ops(args.records // 2, args.keys, rng))
        write_history(
            store, "counts", counter_ops(args.records - args.records // 2, args.keys, rng)
        )
        commit_to_git(store, config, root / "ledgers.git")
        print(f"wrote {args.records:,} records in {time.perf_counter() - started:.1f}s")

        floor_times: list[float] = []
        file_times: list[float] = []
        git_times: list[float] = []
        floor_count = 0
        for attempt in range(args.repeat):  # alternating, same process; medians below
            started = time.perf_counter()
            floor_count = floor_pipeline(store, config, root / f"floor{attempt}")
            floor_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            build_projection(config, store, root / f"out{attempt}")
            file_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            git_store = GitShardStore(root / "ledgers.git", config)
            build_projection(config, git_store, root / f"git{attempt}")
            git_times.append(time.perf_counter() - started)
        floor_rate = floor_count / statistics.median(floor_times)
        engine_rate = args.records / statistics.median(file_times)
        git_rate = args.records / statistics.median(git_times)

        tracemalloc.start()
        build_projection(config, store, root / "out-mem")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()

    engine_ratio, git_ratio = engine_rate / floor_rate, git_rate / engine_rate
    print(f"median of {args.repeat} alternating rounds")
    print(f"engine, folder store:      {engine_rate:,.0f} records/s")
    print(f"engine, git branches:      {git_rate:,.0f} records/s")
    print(f"floor (plain pipeline):    {floor_rate:,.0f} records/s")
    print(f"ratio engine/floor:        {engine_ratio:.2f}x (target >= 0.5x)")
    print(f"ratio git/folder:          {git_ratio:.2f}x (target >= 0.5x)")
    print(f"engine peak Python memory: {peak / 2**20:.1f} MiB (tracemalloc)")
    print(f"wave order, {args.records:,}-record DAG: {wave_order_seconds(args.records, rng):.2f}s")
    failed = [
        name
        for name, ratio in (("engine/floor", engine_ratio), ("git/folder", git_ratio))
        if ratio < 0.5
    ]
    if failed:
        print(f"FAILED: {', '.join(failed)} below 0.5x", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
