"""Replaying the reference engine's oracle vectors (tests/vectors/ghaw-oracle/) here.

``check_projection_case(case, tmp)`` writes a case's shard files into a fresh store,
reads, replays and projects it as a user would, and returns every way the result
differs from what the reference engine produced (an empty list: they agree).
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

from ledger.errors import LedgerError
from ledger.typed.config import parse_serialized_config
from ledger.typed.projection import build_projection
from ledger.typed.reducers.simple import replay
from ledger.typed.storage import LedgerStore
from ledger.typed.store import ShardStore

ORACLE = Path(__file__).resolve().parent.parent / "vectors" / "ghaw-oracle"


def load(name: str) -> list[dict[str, Any]]:
    """Every case of ``<name>.jsonl.gz``."""
    with gzip.open(ORACLE / f"{name}.jsonl.gz", "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def case_id(case: dict[str, Any]) -> str:
    return f"{case['case']}-{case['config']['name']}"


def config_of(case: dict[str, Any]) -> Any:
    """The trusted config of a case, read back as the persistence step reads it."""
    text = json.dumps([case["config"]], ensure_ascii=False)
    encoded = base64.b64encode(text.encode("utf-8", "surrogatepass")).decode()
    return parse_serialized_config(encoded)


def write_store(case: dict[str, Any], root: Path) -> ShardStore:
    config = config_of(case)
    store = ShardStore(root, config)
    shards = root / "ledgers" / case["config"]["name"] / "ledger" / "shards"
    shards.mkdir(parents=True)
    for file, text in case["shards"].items():
        (shards / file).write_bytes(text.encode("utf-8", "surrogatepass"))
    return store


def _cells(row: tuple[Any, ...], types: tuple[str, ...]) -> list[list[Any]]:
    return [[t, v] for t, v in zip(types, row, strict=True)]


def read_projection(path: Path) -> dict[str, Any]:
    """The projection in the oracle's shape: master, per-table columns and typed rows."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    conn.text_factory = lambda b: b.decode("utf-8", "surrogateescape")
    try:
        master = [
            list(r)
            for r in conn.execute(
                "SELECT type, name, tbl_name FROM sqlite_master ORDER BY type, name"
            )
        ]
        tables: dict[str, Any] = {}
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        ):
            info = conn.execute(f'PRAGMA table_info("{name}")').fetchall()
            columns = [[c[1], c[2], c[3], c[5]] for c in info]
            pk = [c[1] for c in sorted(info, key=lambda c: c[5]) if c[5]]
            names = [c[1] for c in info]
            select = ", ".join(f'"{n}", typeof("{n}")' for n in names)
            order = ", ".join(f'"{n}"' for n in (pk or names))  # no key: every column
            rows = []
            for raw in conn.execute(f'SELECT {select} FROM "{name}" ORDER BY {order}'):
                values, types = raw[0::2], raw[1::2]
                rows.append(_cells(values, types))
            natural = None
            if name == "replay_metadata":
                natural = [list(r) for r in conn.execute(f'SELECT * FROM "{name}" ORDER BY rowid')]
            tables[name] = {"columns": columns, "rows": rows, "natural_order": natural}
    finally:
        conn.close()
    mode = "0o" + format(stat.S_IMODE(os.stat(path).st_mode), "o")
    return {"master": master, "tables": tables, "mode": mode}


def _norm(value: Any) -> Any:
    """JSON round trip, so tuples and lists (and float/int spellings) compare alike."""
    return json.loads(json.dumps(value, ensure_ascii=True))


def check_projection_case(
    case: dict[str, Any], tmp: Path, store: LedgerStore | None = None
) -> list[str]:
    """Every difference between our reading of ``case`` and the reference's (from a
    folder store written here, or from ``store`` holding the case's shard files)."""
    expected = case["expected"]
    name = case["config"]["name"]
    problems: list[str] = []
    store = store if store is not None else write_store(case, tmp / "store")
    config = store.config
    assert config is not None
    rec = store.read(name)
    got = {
        "replay_order": [r.id for r in rec.records],
        "shas": [r.sha for r in rec.records],
        "heads": list(rec.heads),
        "diagnostics": [d.code for d in rec.diagnostics],
    }
    for key in ("replay_order", "shas", "heads"):
        if got[key] != expected[key]:
            problems.append(f"{key}: {got[key][:3]}... != {expected[key][:3]}...")
    want_diag = [d["code"] if isinstance(d, dict) else d for d in expected["diagnostics"]]
    if got["diagnostics"] != want_diag:
        problems.append(f"diagnostics: {got['diagnostics']} != {want_diag}")
    ledger = config[name]
    if expected.get("replay_output") is not None and ledger.type is not None:
        try:
            result = replay(ledger, rec.records, ordered=True)
            mine = {k: _norm(v) for k, v in result.tables.items()}
            theirs = {k: v["rows"] for k, v in expected["replay_output"]["tables"].items()}
            if _norm(mine) != _norm(theirs):
                problems.append(f"replay_output differs: {str(mine)[:300]} != {str(theirs)[:300]}")
        except LedgerError as exc:
            problems.append(f"replay raised {type(exc).__name__}: {exc}")
    out = tmp / "out"
    try:
        paths = build_projection(config, store, out)
    except LedgerError as exc:
        if expected["projection_error"] is None:
            problems.append(f"projection raised {type(exc).__name__}: {exc}")
        elif expected["projection_error"]["message"] not in str(exc):
            problems.append(f"projection error {exc} != {expected['projection_error']}")
        return problems
    except Exception as exc:  # an undocumented error is a disagreement too
        problems.append(f"projection crashed with {type(exc).__name__}: {exc}")
        return problems
    if expected["projection_error"] is not None:
        problems.append(f"projection succeeded, reference refused: {expected['projection_error']}")
        return problems
    mine_p = read_projection(paths[name])
    theirs_p = expected["projection"]
    if mine_p["master"] != theirs_p["master"]:
        problems.append(f"master: {mine_p['master']} != {theirs_p['master']}")
    if mine_p["mode"] != theirs_p["mode"]:
        problems.append(f"mode {mine_p['mode']} != {theirs_p['mode']}")
    for table, want in theirs_p["tables"].items():
        have = mine_p["tables"].get(table)
        if have is None:
            problems.append(f"table {table} missing")
            continue
        if _norm(have["columns"]) != _norm(want["columns"]):
            problems.append(f"{table} columns {have['columns']} != {want['columns']}")
        mine_rows, their_rows = _norm(have["rows"]), _norm(want["rows"])
        if mine_rows != their_rows:
            pairs = zip(mine_rows, their_rows, strict=False)
            at = next((i for i, (a, b) in enumerate(pairs) if a != b), None)
            at = min(len(mine_rows), len(their_rows)) if at is None else at
            problems.append(
                f"{table} rows differ at {at} ({len(mine_rows)} vs {len(their_rows)}): "
                f"{mine_rows[at : at + 1]} != {their_rows[at : at + 1]}"
            )
        if want.get("natural_order") is not None and _norm(have["natural_order"]) != _norm(
            want["natural_order"]
        ):
            problems.append(
                f"{table} natural order {have['natural_order']} != {want['natural_order']}"
            )
    extra = set(mine_p["tables"]) - set(theirs_p["tables"])
    if extra:
        problems.append(f"extra tables {sorted(extra)}")
    return problems
