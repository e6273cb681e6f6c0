"""Disposable, read-only SQLite projections: one ``<out_dir>/<name>/ledger.db`` per ledger.

::

    try:
        paths = build_projection(config, store, out_dir)      # {name: Path}
    except ProjectionFailed as exc:
        exc.written      # {name: Path} of the ledgers that projected
        exc.failures     # {name: message naming the record} of the ones that did not

Each database holds the generic tables (``shards``, ``records``, ``parents``,
``diagnostics``), and for a typed ledger ``replay_metadata`` plus the type's ``state``
table or the four notes tables, with the reference's column types, indexes and limits.

A database is built in a temporary file beside its final path, made read-only (0444)
and renamed into place, so the path never holds a half-written database. Replay is
fail-closed (``strict=True``): any diagnostic or invalid operation stops that ledger's
projection, removes any stale database it had, and is reported in
:class:`ProjectionFailed` raised after every other ledger was projected. With
``strict=False`` bad records are quarantined instead: their diagnostics (and
``invalid-operation`` for operations replay refused) fill the ``diagnostics`` table and
the remaining records are projected. Raw (untyped) ledgers get the generic tables only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ledger.errors import LedgerError, ReplayError
from ledger.fsync import fsync_path
from ledger.typed.config import KEY_RE, LedgerConfig, LedgerDef
from ledger.typed.jsontext import canonical_json, well_formed
from ledger.typed.reconstruct import Diagnostic, Reconstruction
from ledger.typed.records import MAX_SAFE_INTEGER
from ledger.typed.reducers.base import TableSpec
from ledger.typed.reducers.simple import ReplayResult, replay
from ledger.typed.storage import LedgerStore

__all__ = [
    "ProjectionFailed",
    "build_projection",
    "project_ledger",
    "quarantined_records",
    "validate_replay_output",
]

log = logging.getLogger(__name__)

MAX_HISTORY_BYTES: Final = 100 * 1024 * 1024
MAX_CELL_BYTES: Final = 65_536
DEFAULT_ROW_LIMIT: Final = 10_000
_SQL_TYPES: Final = {
    "text": "TEXT",
    "integer": "INTEGER",
    "real": "REAL",
    "boolean": "INTEGER",
    "json": "TEXT",
}
GENERIC_DDL: Final = (
    "CREATE TABLE shards (file TEXT PRIMARY KEY, size INTEGER NOT NULL)",
    "CREATE TABLE records (ordinal INTEGER PRIMARY KEY, id TEXT NOT NULL, "
    "sha TEXT NOT NULL UNIQUE, type TEXT NOT NULL, timestamp TEXT NOT NULL, "
    'payload TEXT NOT NULL, shard TEXT NOT NULL, "offset" INTEGER NOT NULL)',
    "CREATE TABLE parents (child_sha TEXT NOT NULL, parent_sha TEXT NOT NULL, "
    "PRIMARY KEY (child_sha, parent_sha))",
    "CREATE TABLE diagnostics (ordinal INTEGER PRIMARY KEY, code TEXT NOT NULL, file TEXT, "
    "line INTEGER, id TEXT, detail TEXT)",
)
GENERIC_INDEXES: Final = (
    "CREATE INDEX records_by_id ON records(id)",
    "CREATE INDEX records_by_type_time ON records(type, timestamp)",
    'CREATE INDEX records_by_shard_offset ON records(shard, "offset")',
    "CREATE INDEX parents_by_parent ON parents(parent_sha)",
    "CREATE INDEX diagnostics_by_code ON diagnostics(code)",
)
METADATA_DDL: Final = (
    "CREATE TABLE replay_metadata (ledger_name TEXT NOT NULL, "
    "projection_version INTEGER NOT NULL, record_count INTEGER NOT NULL, "
    "script_sha256 TEXT NOT NULL, output_version INTEGER NOT NULL, "
    "table_name TEXT NOT NULL, columns_json TEXT NOT NULL)"
)
RESERVED: Final = frozenset(
    {
        "records",
        "parents",
        "shards",
        "diagnostics",
        "replay_metadata",
        "records_by_id",
        "records_by_type_time",
        "records_by_shard_offset",
        "parents_by_parent",
        "diagnostics_by_code",
    }
)


def table_ddl(spec: TableSpec) -> str:
    """``CREATE TABLE "<name>" (...)`` as the reference writes it (primary key last)."""
    columns = [
        f'"{name}" {_SQL_TYPES[kind]}' + (" NOT NULL" if name in spec.primary_key else "")
        for name, kind in spec.columns
    ]
    key = ", ".join(f'"{name}"' for name in spec.primary_key)
    return f'CREATE TABLE "{spec.name}" ({", ".join(columns)}, PRIMARY KEY ({key}))'


class ProjectionFailed(ReplayError):
    """Some ledgers could not be projected; the others were.

    ``failures`` maps each failed ledger to its error message; ``written`` maps each
    projected ledger to its database path (what ``build_projection`` would have returned).
    """

    def __init__(self, failures: Mapping[str, str], written: Mapping[str, Path]) -> None:
        self.failures = dict(failures)
        self.written = dict(written)
        lines = "; ".join(f"{name}: {message}" for name, message in self.failures.items())
        super().__init__(
            f"{len(self.failures)} ledger projection(s) failed ({lines}); "
            f"{len(self.written)} other ledger(s) were projected"
        )


def build_projection(
    config: LedgerConfig,
    store: LedgerStore,
    out_dir: str | os.PathLike[str],
    *,
    strict: bool = True,
) -> dict[str, Path]:
    """Project every configured ledger; return ``{name: <out_dir>/<name>/ledger.db}``.

    Raises :class:`ProjectionFailed` (a :class:`ReplayError`) after projecting the
    others when any ledger fails.
    """
    written: dict[str, Path] = {}
    failures: dict[str, str] = {}
    for ledger in config.ledgers:
        try:
            written[ledger.name] = project_ledger(ledger, store, out_dir, strict=strict)
        except (LedgerError, OSError, sqlite3.Error) as exc:
            log.warning("ledger %s was not projected: %s", ledger.name, exc)
            failures[ledger.name] = str(exc)
    if failures:
        raise ProjectionFailed(failures, written)
    return written


def project_ledger(
    ledger: LedgerDef, store: LedgerStore, out_dir: str | os.PathLike[str], *, strict: bool = True
) -> Path:
    """Project one ledger to ``<out_dir>/<name>/ledger.db``; raises :class:`ReplayError`."""
    target = Path(out_dir) / ledger.name / "ledger.db"
    try:
        reconstruction = store.read(ledger.name, max_segment_kb=ledger.max_segment_kb)
        _check_limits(ledger, reconstruction)
        diagnostics = list(reconstruction.diagnostics)
        if diagnostics and strict:
            raise ReplayError(
                f"Ledger branch contains invalid canonical records in ledger {ledger.name!r}: "
                f"{diagnostics[0]}"
                + (f" (and {len(diagnostics) - 1} more)" if len(diagnostics) > 1 else "")
            )
        result = replay(ledger, reconstruction.records, strict=strict, ordered=True)
        diagnostics.extend(_rejections(result))
        _write_atomically(target, ledger, reconstruction, result, diagnostics)
    except (LedgerError, OSError, sqlite3.Error):
        target.unlink(missing_ok=True)  # never leave a stale projection behind
        raise
    return target


def _check_limits(ledger: LedgerDef, reconstruction: Reconstruction) -> None:
    total = sum(shard.size for shard in reconstruction.shards)
    if total > MAX_HISTORY_BYTES:
        raise ReplayError(
            f"Ledger branch exceeds projection limits: ledger {ledger.name!r} holds {total} "
            f"bytes of history (at most {MAX_HISTORY_BYTES}); compact it"
        )


def _rejections(result: ReplayResult) -> list[Diagnostic]:
    return [
        Diagnostic(
            code="invalid-operation",
            file=item.record.shard,
            line=item.record.line_no,
            id=item.record.id,
            detail=item.error,
        )
        for item in result.rejected
    ]


def validate_replay_output(
    specs: Sequence[TableSpec],
    tables: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    row_limit: int = DEFAULT_ROW_LIMIT,
) -> dict[str, list[tuple[Any, ...]]]:
    """Check replay output against the reference's limits; return rows as SQL tuples.

    Refuses more than 16 tables, 1..32 columns each, bad or reserved or case-duplicate
    identifiers, unknown column types, null or duplicate primary keys, cells of the
    wrong type or over 65,536 bytes, unsafe integers and more than ``row_limit`` rows.
    """
    if len(specs) > 16:
        raise ReplayError(f"Replay output has {len(specs)} tables; at most 16 are allowed")
    _check_identifiers(specs)
    total = sum(len(tables.get(spec.name, ())) for spec in specs)
    if total > row_limit:
        raise ReplayError(f"Replay output has {total} rows, over the limit of {row_limit}")
    return {spec.name: _table_rows(spec, tables.get(spec.name, ())) for spec in specs}


def _check_identifiers(specs: Sequence[TableSpec]) -> None:
    seen: set[str] = set()
    for spec in specs:
        names = [spec.name, *spec.column_names]
        for name in names:
            if KEY_RE.fullmatch(name) is None or name.lower().startswith("sqlite_"):
                raise ReplayError(f"Replay output identifier {name!r} is not allowed")
        if spec.name.lower() in RESERVED or spec.name.lower() in seen:
            raise ReplayError(f"Replay output table name {spec.name!r} is reserved or repeated")
        seen.add(spec.name.lower())
        if not 1 <= len(spec.columns) <= 32 or len({c.lower() for c in spec.column_names}) != len(
            spec.columns
        ):
            raise ReplayError(f"Replay table {spec.name!r} needs 1..32 distinct columns")
        for _, kind in spec.columns:
            if kind not in _SQL_TYPES:
                raise ReplayError(
                    f"Replay table {spec.name!r} has unsupported column type {kind!r}"
                )


def _table_rows(spec: TableSpec, rows: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    keys: set[tuple[Any, ...]] = set()
    pk_index = [spec.column_names.index(name) for name in spec.primary_key]
    out: list[tuple[Any, ...]] = []
    for row in rows:
        cells = tuple(_cell(spec.name, name, kind, row.get(name)) for name, kind in spec.columns)
        key = tuple(cells[i] for i in pk_index)
        if any(part is None for part in key) or key in keys:
            raise ReplayError(
                f"Replay table {spec.name!r} has a null or duplicate primary key {key!r}"
            )
        keys.add(key)
        out.append(cells)
    return out


def _cell(table: str, column: str, kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == "json":
        value = canonical_json(value)
    elif kind == "boolean" and isinstance(value, bool):
        return int(value)
    elif (kind == "integer" and type(value) is int and abs(value) <= MAX_SAFE_INTEGER) or (
        kind == "real" and type(value) in (int, float)
    ):
        return value
    elif kind != "text" or not isinstance(value, str):
        raise ReplayError(f"Replay cell {table}.{column} does not match its type {kind}: {value!r}")
    if not value.isascii():
        value = well_formed(value)  # SQLite stores UTF-8: a lone surrogate becomes U+FFFD
    if len(value) > MAX_CELL_BYTES // 4 and len(value.encode()) > MAX_CELL_BYTES:
        raise ReplayError(f"Replay cell exceeds size limit in {table}.{column}")
    return value


def _write_atomically(
    target: Path,
    ledger: LedgerDef,
    reconstruction: Reconstruction,
    result: ReplayResult,
    diagnostics: Sequence[Diagnostic],
) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.parent / f".ledger.db.{uuid.uuid4().hex}.tmp"
    try:
        conn = sqlite3.connect(temp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute("BEGIN")
            _fill(conn, ledger, reconstruction, result, diagnostics)
            conn.execute("COMMIT")
        finally:
            conn.close()
        fsync_path(temp)
        os.chmod(temp, 0o444)
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)


def _fill(
    conn: sqlite3.Connection,
    ledger: LedgerDef,
    reconstruction: Reconstruction,
    result: ReplayResult,
    diagnostics: Sequence[Diagnostic],
) -> None:
    for statement in GENERIC_DDL:
        conn.execute(statement)
    conn.executemany(
        "INSERT INTO shards VALUES (?, ?)", [(s.file, s.size) for s in reconstruction.shards]
    )
    conn.executemany(
        "INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                i,
                r.id,
                r.sha,
                well_formed(r.type),
                r.timestamp,
                well_formed(r.payload_json()),
                r.shard or "",
                r.offset or 0,
            )
            for i, r in enumerate(reconstruction.records)
        ],
    )
    conn.executemany(
        "INSERT INTO parents VALUES (?, ?)",
        [(r.sha, p) for r in reconstruction.records for p in r.parents],
    )
    conn.executemany(
        "INSERT INTO diagnostics VALUES (?, ?, ?, ?, ?, ?)",
        [
            (i, d.code, d.file, d.line, d.id, d.detail and well_formed(d.detail))
            for i, d in enumerate(diagnostics)
        ],
    )
    for statement in GENERIC_INDEXES:  # after the bulk insert: cheaper than during it
        conn.execute(statement)
    if ledger.type is not None:
        _fill_replay(conn, ledger, result)


def _fill_replay(conn: sqlite3.Connection, ledger: LedgerDef, result: ReplayResult) -> None:
    total_rows = sum(len(rows) for rows in result.tables.values())
    limit = max(DEFAULT_ROW_LIMIT, result.record_count, total_rows)  # the built-ins' limit
    checked = validate_replay_output(result.specs, result.tables, row_limit=limit)
    conn.execute(METADATA_DDL)
    script_sha = hashlib.sha256(f"builtin:{ledger.type}".encode()).hexdigest()
    for spec in result.specs:
        conn.execute(table_ddl(spec))
        marks = ", ".join("?" for _ in spec.columns)
        conn.executemany(f'INSERT INTO "{spec.name}" VALUES ({marks})', checked[spec.name])
    meta = [
        (
            ledger.name,
            1,
            result.record_count,
            script_sha,
            1,
            spec.name,
            json.dumps(dict(spec.columns), separators=(",", ":")),
        )
        for spec in result.specs  # the reducer's table order, as the reference inserts them
    ] or [(ledger.name, 1, result.record_count, script_sha, 1, "", "{}")]
    conn.executemany("INSERT INTO replay_metadata VALUES (?, ?, ?, ?, ?, ?, ?)", meta)


def quarantined_records(projection: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """What a lenient projection left out: the rows of its ``diagnostics`` table
    (``code``, ``file``, ``line``, ``id``, ``detail``), read read-only.

    >>> quarantined_records("projections/facts/ledger.db")   # doctest: +SKIP
    [{'code': 'invalid-sha', 'file': '....jsonl', 'line': 3, 'id': 'ldg-...', 'detail': ...}]
    """
    uri = Path(projection).resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    try:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT * FROM diagnostics").fetchall()
    finally:
        conn.close()
    return [dict(row) for row in rows]
