"""Shard files on disk: reading a ledger back with diagnostics, appending atomically.

A ledger named ``N`` lives in ``<root>/ledgers/N/ledger/shards/<uuid4>.jsonl`` (the tree of
the reference's ``ledgers/N`` branch), one canonical record per line::

    store = ShardStore(root)
    written = store.append("findings", [{"operation": "insert", "value": {...}}])
    rec = store.read("findings")            # Reconstruction
    rec.records, rec.diagnostics, rec.heads

Reading follows the reference's reconstruction: shard files sorted by name (at most
1024), lines checked in order (``truncated-record``, ``invalid-json``,
``unsupported-version``, ``invalid-envelope``, ``invalid-sha``), records deduplicated by
``sha``, ``duplicate-id`` for a record repeated inside one shard file (a writer bug; the
reference dedupes silently), ``duplicate-id-conflict`` when an id names two different
records, then ``missing-parent`` and ``cycle`` from the replay order. Files whose name
starts with ``.`` are ignored: they are this store's unfinished temporary files.

Appending writes each shard to a temporary file in the same directory, fsyncs it, renames
it into place and fsyncs the directory. When an append needs several shards (rolled at the
segment size) they are renamed **last shard first**: a crash in between leaves later
shards whose parent chain is missing (a ``missing-parent`` diagnostic, so replay fails
closed), never a silently short ledger.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from ledger.errors import RecordError
from ledger.fsync import fsync_path
from ledger.typed.config import LedgerConfig, check_ledger_name
from ledger.typed.order import order_records
from ledger.typed.records import (
    MAX_PARENTS,
    InvalidRecordLine,
    Record,
    format_timestamp,
    new_record_id,
    parse_line,
)
from ledger.typed.shard_writer import split_segments, write_temp_shard

__all__ = ["MAX_SHARDS", "Diagnostic", "Reconstruction", "ShardFile", "ShardStore"]

log = logging.getLogger(__name__)

MAX_SHARDS: Final = 1024
SHARD_NAME_RE: Final = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.jsonl"
)
DEFAULT_SEGMENT_BYTES: Final = 100 * 1024


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem found while reading a ledger; ``line`` is 1-based.

    ``Diagnostic(code, file, line, id, detail)``, positionally or by keyword.
    """

    code: str
    file: str | None = None
    line: int | None = None
    id: str | None = None
    detail: str | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.file and self.line else (self.file or "")
        who = f" record {self.id}" if self.id else ""
        return f"{self.code} at {where or 'ledger'}{who}: {self.detail or ''}".rstrip(": ")


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardFile:
    """A shard file that was read: its name and size in bytes."""

    file: str
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconstruction:
    """A ledger read back from its shards.

    ``records`` are in replay order (each knows its ``shard`` and ``offset``);
    ``diagnostics`` is empty for an intact ledger; ``heads`` are the sorted shas no
    record names as a parent; ``shards`` lists the files read.
    """

    name: str
    records: tuple[Record, ...]
    diagnostics: tuple[Diagnostic, ...]
    heads: tuple[str, ...]
    shards: tuple[ShardFile, ...]

    @property
    def ok(self) -> bool:
        """True when the ledger has no diagnostics (replay may proceed)."""
        return not self.diagnostics


class _Reader:
    """Collects records and diagnostics across the shard files of one ledger."""

    def __init__(self) -> None:
        self.records: dict[str, Record] = {}
        self.ids: dict[str, str] = {}
        self.diagnostics: list[Diagnostic] = []
        self.shards: list[ShardFile] = []

    def diag(
        self, code: str, file: str | None, line: int | None, rid: str | None, detail: str
    ) -> None:
        self.diagnostics.append(Diagnostic(code=code, file=file, line=line, id=rid, detail=detail))

    def read_file(self, path: Path, max_bytes: int | None) -> None:
        name = path.name
        problem = _file_problem(path, max_bytes)
        if problem is not None:
            self.diag("invalid-envelope", name, None, None, problem)
            return
        data = path.read_bytes()
        try:
            data.decode()
        except UnicodeDecodeError:
            self.diag("invalid-envelope", name, None, None, "shard file is not valid UTF-8")
            return
        self.shards.append(ShardFile(file=name, size=len(data)))
        self._read_lines(name, data)

    def _read_lines(self, name: str, data: bytes) -> None:
        seen_here: set[str] = set()
        pos, line_no = 0, 0
        while pos < len(data):
            line_no += 1
            end = data.find(b"\n", pos)
            if end == -1:
                self.diag(
                    "truncated-record",
                    name,
                    line_no,
                    None,
                    "the last line has no trailing newline; it was ignored",
                )
                return
            self._read_line(name, line_no, pos, data[pos:end].decode(), seen_here)
            pos = end + 1

    def _read_line(self, name: str, line_no: int, offset: int, text: str, seen: set[str]) -> None:
        try:
            record = parse_line(text, name, offset, line_no)
        except InvalidRecordLine as exc:
            self.diag(exc.code, name, line_no, exc.record_id, exc.detail)
            return
        if record.sha in seen:
            self.diag(
                "duplicate-id",
                name,
                line_no,
                record.id,
                f"record {record.sha} appears twice in this shard",
            )
            return
        seen.add(record.sha)
        if record.sha in self.records:
            return  # the same record in another shard (e.g. during compaction)
        other = self.ids.get(record.id)
        if other is not None:
            self.diag(
                "duplicate-id-conflict",
                name,
                line_no,
                record.id,
                f"id {record.id} names both {other} and {record.sha}",
            )
        else:
            self.ids[record.id] = record.sha
        self.records[record.sha] = record


def _file_problem(path: Path, max_bytes: int | None) -> str | None:
    stat = path.lstat()
    if path.is_symlink():
        return "shard is a symbolic link; only regular files are read"
    if not path.is_file():
        return "shard is not a regular file"
    if SHARD_NAME_RE.fullmatch(path.name) is None:
        return "shard file name must be <uuid4>.jsonl"
    if max_bytes is not None and stat.st_size > max_bytes:
        return f"shard is {stat.st_size} bytes, larger than the segment limit of {max_bytes}"
    return None


class ShardStore:
    """The shard files of every ledger under ``root``.

    ``config`` (optional) supplies each ledger's ``max_segment_kb``: files larger than it
    are refused on read, and appends roll to a new shard before exceeding it. Without a
    config reads accept any size and appends roll at 100 KiB (the reference default).
    """

    def __init__(self, root: str | os.PathLike[str], config: LedgerConfig | None = None) -> None:
        self.root = Path(root)
        self.config = config

    def __repr__(self) -> str:
        return f"ShardStore({str(self.root)!r})"

    def shard_dir(self, name: str) -> Path:
        """``<root>/ledgers/<name>/ledger/shards`` (the name is checked first)."""
        check_ledger_name(name)
        return self.root / "ledgers" / name / "ledger" / "shards"

    def names(self) -> list[str]:
        """The names of the ledgers present on disk, sorted."""
        base = self.root / "ledgers"
        if not base.is_dir():
            return []
        return sorted(p.name for p in base.iterdir() if (p / "ledger" / "shards").is_dir())

    def _segment_bytes(self, name: str, override: int | None, default: int | None) -> int | None:
        if override is not None:
            return override * 1024
        if self.config is not None and name in self.config:
            return self.config[name].max_segment_bytes
        return default

    def read(self, name: str, *, max_segment_kb: int | None = None) -> Reconstruction:
        """Reconstruct ledger ``name``; a missing ledger is empty.

        >>> import tempfile
        >>> from ledger.typed.config import parse_config
        >>> config = parse_config({"findings": {"type": "table", "key": "id"}})
        >>> store = ShardStore(tempfile.mkdtemp(), config)
        >>> _ = store.append("findings", [{"operation": "insert", "value": {"id": "a"}}])
        >>> rec = store.read("findings")
        >>> rec.ok, len(rec.records), len(rec.heads)
        (True, 1, 1)
        """
        directory = self.shard_dir(name)
        reader = _Reader()
        max_bytes = self._segment_bytes(name, max_segment_kb, None)
        entries = (
            sorted(p for p in directory.iterdir() if not p.name.startswith("."))
            if directory.is_dir()
            else []
        )
        if len(entries) > MAX_SHARDS:
            reader.diag(
                "invalid-envelope",
                None,
                None,
                None,
                f"Only the first {MAX_SHARDS} ledger shards were inspected",
            )
        for path in entries[:MAX_SHARDS]:
            reader.read_file(path, max_bytes)
        return _finish(name, reader)

    def append(
        self,
        name: str,
        payloads: Iterable[Any],
        *,
        timestamp: datetime | str | None = None,
        ids: Sequence[str] | None = None,
        type: str = "ledger_append",
        max_segment_kb: int | None = None,
    ) -> list[Record]:
        """Append one record per payload, as the reference's writer does; return them.

        ``payloads`` are the records' payload values (for a typed ledger, operation
        objects such as ``{"operation": "append", "value": 1}``). Every record gets the
        ``type`` (default ``ledger_append``), the same ``timestamp`` (default: now, UTC,
        milliseconds) and an envelope id from ``ids`` or a random ``ldg-<uuid4>``. The
        first record's parents are the current heads; each later one's parent is the
        one before. Raises :class:`RecordError` when the ledger has diagnostics (it
        must be repaired first) or more than 64 heads.
        """
        if isinstance(payloads, Mapping | str | bytes) or not isinstance(payloads, Iterable):
            raise RecordError(
                "append takes a list of payloads (one record each); wrap a single payload "
                f"in a list: append({name!r}, [payload])"
            )
        payloads = list(payloads)
        if ids is not None and len(ids) != len(payloads):
            raise RecordError(f"append got {len(payloads)} payloads but {len(ids)} ids")
        if not payloads:
            return []
        heads = self._writable_heads(name)
        moment = format_timestamp(timestamp)
        records: list[Record] = []
        parents: Sequence[str] = heads
        for index, payload in enumerate(payloads):
            rid = ids[index] if ids is not None else new_record_id()
            record = Record.new(
                id=rid, timestamp=moment, parents=parents, payload=payload, type=type
            )
            records.append(record)
            parents = (record.sha,)
        return self._write(name, records, max_segment_kb)

    def append_records(
        self, name: str, records: Sequence[Record], *, max_segment_kb: int | None = None
    ) -> list[Record]:
        """Write fully formed records (ids and parents chosen by the caller) as new shards.

        Each record is re-checked (envelope, ``sha``, canonical line); parents are not
        required to exist (a dangling parent shows up as ``missing-parent`` on read).
        Returns the records with their ``shard`` and ``offset``.
        """
        checked = [parse_line(record.to_line()) for record in records]
        if not checked:
            return []
        return self._write(name, checked, max_segment_kb)

    def _writable_heads(self, name: str) -> tuple[str, ...]:
        current = self.read(name)
        if current.diagnostics:
            raise RecordError(
                f"Invalid canonical ledger history in ledger {name!r}: "
                f"{current.diagnostics[0]} ({len(current.diagnostics)} problem(s)); "
                "repair the shard files before appending",
            )
        if len(current.heads) > MAX_PARENTS:
            raise RecordError(
                f"Too many ledger DAG heads in ledger {name!r} ({len(current.heads)} > 64); "
                "merge them with smaller appends or compaction first",
            )
        return current.heads

    def _write(
        self, name: str, records: Sequence[Record], max_segment_kb: int | None
    ) -> list[Record]:
        limit = self._segment_bytes(name, max_segment_kb, DEFAULT_SEGMENT_BYTES)
        assert limit is not None
        directory = self.shard_dir(name)
        directory.mkdir(parents=True, exist_ok=True)
        shards = split_segments(records, limit)
        located: list[Record] = []
        staged: list[tuple[Path, Path]] = []
        try:
            for group in shards:
                file_name = f"{uuid.uuid4()}.jsonl"
                temp = directory / f".{file_name}.tmp"
                located.extend(write_temp_shard(temp, file_name, group))
                staged.append((temp, directory / file_name))
            for temp, final in reversed(staged):
                os.replace(temp, final)
            fsync_path(directory)
        finally:
            for temp, _ in staged:
                temp.unlink(missing_ok=True)
        log.debug(
            "appended %d record(s) to ledger %s in %d shard(s)", len(records), name, len(shards)
        )
        return located


def _finish(name: str, reader: _Reader) -> Reconstruction:
    ordering = order_records(reader.records.values())
    diagnostics = list(reader.diagnostics)
    for record, absent in ordering.missing:
        diagnostics.append(
            Diagnostic(
                code="missing-parent",
                file=record.shard,
                line=record.line_no,
                id=record.id,
                detail=f"record {record.sha} names absent parent(s) {', '.join(absent)}",
            )
        )
    for record in ordering.cycle:
        diagnostics.append(
            Diagnostic(
                code="cycle",
                file=record.shard,
                line=record.line_no,
                id=record.id,
                detail=f"record {record.sha} is on or behind a parent cycle and was not replayed",
            )
        )
    return Reconstruction(
        name=name,
        records=ordering.records,
        diagnostics=tuple(diagnostics),
        heads=ordering.heads,
        shards=tuple(reader.shards),
    )
