"""Shard files in a folder: reading a ledger back with diagnostics, appending atomically.

A ledger named ``N`` lives in ``<root>/ledgers/N/ledger/shards/<uuid4>.jsonl`` (the tree of
the reference's ``ledgers/N`` branch), one canonical record per line::

    store = ShardStore(root)
    written = store.append("findings", [{"operation": "insert", "value": {...}}])
    rec = store.read("findings")            # Reconstruction
    rec.records, rec.diagnostics, rec.heads

Reading follows the reference's reconstruction (:mod:`ledger.typed.reconstruct`). Files
whose name starts with ``.`` are ignored. A symbolic link (or a non-folder) where the
store expects a folder (``ledgers``, ``ledgers/N``, ``ledger``, ``shards``,
``compaction``) is refused with :class:`~ledger.typed.layout.StoreError` naming it; a
store never follows a link out of itself. A symlinked shard file is never read (an
``invalid-envelope`` diagnostic, as the reference reports it).

Every write (an append, a persisted artifact over several ledgers, a compaction) is one
all-or-nothing transaction (:mod:`ledger.typed.filetxn`): a process killed at any step
leaves the store as before or with the whole write, and the next reader or writer
finishes or rolls back what it left. A ledger's folders are created only by the write
that gives it its first records, so :meth:`ShardStore.names` lists only ledgers that
hold records.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from ledger.errors import LedgerError, RecordError
from ledger.typed import filetxn
from ledger.typed.config import LedgerConfig, check_ledger_name
from ledger.typed.jsontext import format_timestamp, new_record_id
from ledger.typed.layout import (
    SHARDS_DIR,
    STATE_PATH,
    EntryKind,
    LedgerChange,
    ShardEntry,
    StoreError,
)
from ledger.typed.reconstruct import (
    MAX_SHARDS,
    Reconstruction,
    reconstruct,
)
from ledger.typed.records import MAX_PARENTS, Record, parse_line
from ledger.typed.shard_writer import new_shards
from ledger.typed.storage import Plan

__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "MAX_SHARDS",
    "ShardStore",
    "build_records",
    "payload_list",
    "writable_heads",
]

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 100 * 1024
MAX_STATE_BYTES = 64 * 1024
T = TypeVar("T")


def payload_list(payloads: Iterable[Any], ids: Sequence[str] | None) -> list[Any]:
    """``payloads`` as a list, refusing a single payload passed where a list belongs."""
    if isinstance(payloads, Mapping | str | bytes) or not isinstance(payloads, Iterable):
        raise RecordError(
            "append takes a list of payloads (one record each); wrap a single payload "
            "in a list: append(name, [payload])"
        )
    listed = list(payloads)
    if ids is not None and len(ids) != len(listed):
        raise RecordError(f"append got {len(listed)} payloads but {len(ids)} ids")
    return listed


def build_records(
    heads: Sequence[str],
    payloads: Sequence[Any],
    *,
    timestamp: datetime | str | None,
    ids: Sequence[str] | None,
    type: str,
) -> list[Record]:
    """One record per payload: the first one's parents are ``heads``, each later one's
    parent is the one before (the reference writer's linear chain)."""
    moment = format_timestamp(timestamp) if payloads else ""
    records: list[Record] = []
    parents: Sequence[str] = heads
    for index, payload in enumerate(payloads):
        rid = ids[index] if ids is not None else new_record_id()
        record = Record.new(id=rid, timestamp=moment, parents=parents, payload=payload, type=type)
        records.append(record)
        parents = (record.sha,)
    return records


def writable_heads(current: Reconstruction) -> tuple[str, ...]:
    """The heads a new record links to; ``RecordError`` when the ledger has diagnostics
    (it must be repaired first) or more than 64 heads."""
    name = current.name
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


class ShardStore:
    """The shard files of every ledger under the folder ``root``.

    ``config`` (optional) supplies each ledger's ``max_segment_kb``: files larger than it
    are refused on read, and appends roll to a new shard before exceeding it. Without a
    config reads accept any size and appends roll at 100 KiB (the reference default).
    """

    def __init__(self, root: str | os.PathLike[str], config: LedgerConfig | None = None) -> None:
        self.root = Path(root)
        self.config = config

    def __repr__(self) -> str:
        return f"ShardStore({str(self.root)!r})"

    # --- paths ---------------------------------------------------------------------------

    def shard_dir(self, name: str) -> Path:
        """``<root>/ledgers/<name>/ledger/shards`` (the name is checked first; a symbolic
        link at any level raises :class:`StoreError`)."""
        check_ledger_name(name)
        return filetxn.checked_dir(self.root, "ledgers", name, *SHARDS_DIR.split("/"))

    def _state_path(self, name: str) -> Path:
        check_ledger_name(name)
        folder = filetxn.checked_dir(self.root, "ledgers", name, *STATE_PATH.split("/")[:-1])
        return folder / "state.json"

    # --- locking -------------------------------------------------------------------------

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's exclusive lock, after finishing any interrupted transaction."""
        with filetxn.store_lock(self.root, create=True):
            if filetxn.pending(self.root):
                filetxn.recover(self.root)
            yield

    @contextmanager
    def _reading(self) -> Iterator[None]:
        if filetxn.pending(self.root):
            try:
                with self.locked():
                    yield
                return
            except PermissionError:
                raise StoreError(
                    f"{self.root / filetxn.PENDING_DIR}: an interrupted write waits to be "
                    "finished, and this process may not write to the store; run any "
                    "command with write access once (e.g. `ledger typed persist`)"
                ) from None
        with filetxn.store_lock(self.root, shared=True):
            yield

    # --- reading -------------------------------------------------------------------------

    def names(self) -> list[str]:
        """The names of the ledgers that hold at least one shard file, sorted."""
        with self._reading():
            base = filetxn.checked_dir(self.root, "ledgers")
            if not base.is_dir():
                return []
            found = []
            for entry in base.iterdir():
                try:
                    check_ledger_name(entry.name)
                except LedgerError:
                    continue  # not a ledger's folder (e.g. a stray or temporary file)
                if entry.is_symlink():
                    filetxn.checked_dir(self.root, "ledgers", entry.name)  # raises, naming it
                if entry.is_dir() and any(
                    e.file.endswith(".jsonl") for e in self.entries(entry.name)
                ):
                    found.append(entry.name)
            return sorted(found)

    def entries(self, name: str) -> list[ShardEntry]:
        """The shard files of ledger ``name`` (names starting with ``.`` are skipped)."""
        directory = self.shard_dir(name)
        if not directory.is_dir():
            return []
        found = []
        for path in directory.iterdir():
            if path.name.startswith("."):
                continue
            info = path.lstat()
            kind: EntryKind = "other"
            if stat.S_ISLNK(info.st_mode):
                kind = "symlink"
            elif stat.S_ISREG(info.st_mode):
                kind = "file"
            found.append(
                ShardEntry(file=path.name, kind=kind, size=info.st_size, load=path.read_bytes)
            )
        return found

    def read_state(self, name: str) -> bytes | None:
        """The bytes of the ledger's compaction state file; ``None`` when absent (or not a
        regular file of at most 64 KiB, which the reference ignores too)."""
        path = self._state_path(name)
        try:
            info = path.lstat()
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(info.st_mode):
            raise StoreError(
                f"{path} is a symbolic link; a typed-ledger store never follows links "
                "(replace it with the state file itself, or remove it)"
            )
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_STATE_BYTES:
            return None
        return path.read_bytes()

    def segment_bytes(self, name: str, override_kb: int | None = None) -> int:
        """The size at which appends to ``name`` roll to a new shard file."""
        return self._segment_bytes(name, override_kb, DEFAULT_SEGMENT_BYTES) or 0

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
        max_bytes = self._segment_bytes(name, max_segment_kb, None)
        with self._reading():
            return reconstruct(name, self.entries(name), max_bytes)

    # --- writing -------------------------------------------------------------------------

    def run_transaction(self, plan: Plan[T]) -> T:
        """Run ``plan`` under the store's lock and apply its changes all or nothing."""
        with self.locked():
            changes, result = plan()
            filetxn.apply_transaction(self.root, changes)
            return result

    def commit(self, changes: Mapping[str, LedgerChange]) -> None:
        """Apply ``changes`` (per ledger) as one all-or-nothing transaction."""
        with self.locked():
            filetxn.apply_transaction(self.root, changes)

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
        check_ledger_name(name)
        listed = payload_list(payloads, ids)
        if not listed:
            return []

        def plan() -> tuple[dict[str, LedgerChange], list[Record]]:
            heads = writable_heads(self.read(name))
            records = build_records(heads, listed, timestamp=timestamp, ids=ids, type=type)
            change, located = new_shards(records, self.segment_bytes(name, max_segment_kb))
            return {name: change}, located

        return self.run_transaction(plan)

    def append_records(
        self, name: str, records: Sequence[Record], *, max_segment_kb: int | None = None
    ) -> list[Record]:
        """Write fully formed records (ids and parents chosen by the caller) as new shards.

        Each record is re-checked (envelope, ``sha``, canonical line); parents are not
        required to exist (a dangling parent shows up as ``missing-parent`` on read).
        Returns the records with their ``shard`` and ``offset``.
        """
        check_ledger_name(name)
        checked = [parse_line(record.to_line()) for record in records]
        if not checked:
            return []
        change, located = new_shards(checked, self.segment_bytes(name, max_segment_kb))
        self.commit({name: change})
        log.debug("appended %d record(s) to ledger %s", len(checked), name)
        return located
