"""Reading a ledger back from its shard files (reference §5.1), whatever stores them.

:func:`reconstruct` takes a ledger's :class:`~ledger.typed.layout.ShardEntry` list (from a
folder or a git tree) and follows the reference's reconstruction: shard files sorted by
name (at most 1024), lines checked in order (``truncated-record``, ``invalid-json``,
``unsupported-version``, ``invalid-envelope``, ``invalid-sha``), records deduplicated by
``sha``, ``duplicate-id-conflict`` when an id names two different records, then
``missing-parent`` and ``cycle`` from the replay order.

Faithful on read: a record repeated inside one shard file is deduplicated silently, as
the reference does; since that is a writer bug it is kept as a ``duplicate-id``
*warning* (``Reconstruction.warnings``), which never blocks replay. A UTF-8 byte-order
mark at the start of a shard file is skipped, as the reference's decoder does (this
library never writes one). Only names ending in ``.jsonl`` are shard files; other
entries of the folder (such as the reference writer's ``<uuid>.pending`` staging files)
are not read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from ledger.typed.layout import SHARD_NAME_RE, ShardEntry
from ledger.typed.order import order_records
from ledger.typed.records import InvalidRecordLine, Record, parse_line

__all__ = ["MAX_SHARDS", "Diagnostic", "Reconstruction", "ShardFile", "reconstruct"]

MAX_SHARDS: Final = 1024
_BOM: Final = b"\xef\xbb\xbf"


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
    ``diagnostics`` is empty for an intact ledger; ``warnings`` are findings the
    reference accepts silently (they never block replay); ``heads`` are the sorted shas
    no record names as a parent; ``shards`` lists the files read.
    """

    name: str
    records: tuple[Record, ...]
    diagnostics: tuple[Diagnostic, ...]
    heads: tuple[str, ...]
    shards: tuple[ShardFile, ...]
    warnings: tuple[Diagnostic, ...] = ()

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
        self.warnings: list[Diagnostic] = []
        self.shards: list[ShardFile] = []

    def diag(
        self, code: str, file: str | None, line: int | None, rid: str | None, detail: str
    ) -> None:
        self.diagnostics.append(Diagnostic(code=code, file=file, line=line, id=rid, detail=detail))

    def read_entry(self, entry: ShardEntry, max_bytes: int | None) -> None:
        name = entry.file
        problem = _entry_problem(entry, max_bytes)
        if problem is not None:
            self.diag("invalid-envelope", name, None, None, problem)
            return
        data = entry.load()
        try:
            data.decode()
        except UnicodeDecodeError:
            self.diag("invalid-envelope", name, None, None, "shard file is not valid UTF-8")
            return
        self.shards.append(ShardFile(file=name, size=len(data)))
        self._read_lines(name, data)

    def _read_lines(self, name: str, data: bytes) -> None:
        seen_here: set[str] = set()
        # TextDecoder drops a leading byte-order mark from the text, while the offsets
        # stay those of the raw bytes: the first line starts at offset 0 either way.
        pos = len(_BOM) if data.startswith(_BOM) else 0
        line_no = 0
        while pos < len(data):
            line_no += 1
            start = 0 if line_no == 1 else pos
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
            self._read_line(name, line_no, start, data[pos:end].decode(), seen_here)
            pos = end + 1

    def _read_line(self, name: str, line_no: int, offset: int, text: str, seen: set[str]) -> None:
        try:
            record = parse_line(text, name, offset, line_no)
        except InvalidRecordLine as exc:
            self.diag(exc.code, name, line_no, exc.record_id, exc.detail)
            return
        if record.sha in seen:
            self.warnings.append(
                Diagnostic(
                    code="duplicate-id",
                    file=name,
                    line=line_no,
                    id=record.id,
                    detail=f"record {record.sha} appears twice in this shard (deduplicated)",
                )
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


def _entry_problem(entry: ShardEntry, max_bytes: int | None) -> str | None:
    if entry.kind == "symlink":
        return "shard is a symbolic link; only regular files are read"
    if entry.kind != "file":
        return "shard is not a regular file"
    if SHARD_NAME_RE.fullmatch(entry.file) is None:
        return "shard file name must be <uuid4>.jsonl"
    if max_bytes is not None and entry.size > max_bytes:
        return f"shard is {entry.size} bytes, larger than the segment limit of {max_bytes}"
    return None


def reconstruct(name: str, entries: Iterable[ShardEntry], max_bytes: int | None) -> Reconstruction:
    """Reconstruct ledger ``name`` from its shard entries (any order; sorted here)."""
    reader = _Reader()
    # only *.jsonl names are shard files (the reference's own staging files and anything
    # else in the folder are not read)
    ordered = sorted((e for e in entries if e.file.endswith(".jsonl")), key=lambda e: e.file)
    if len(ordered) > MAX_SHARDS:
        reader.diag(
            "invalid-envelope",
            None,
            None,
            None,
            f"Only the first {MAX_SHARDS} ledger shards were inspected",
        )
    for entry in ordered[:MAX_SHARDS]:
        reader.read_entry(entry, max_bytes)
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
        warnings=tuple(reader.warnings),
    )
