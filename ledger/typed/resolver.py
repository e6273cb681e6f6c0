"""The bridge from typed ledgers to provenance: cite a record, verify the citation later.

::

    ref = record_ref(record)                 # Ref(source="ledger", id=record.id, hash=record.sha)
    resolver = LedgerResolver(store, config)
    [check.state for check in verify_refs([ref], resolver)]      # [RefState.INTACT]

A ref's ``id`` is a record's envelope id. For every ledger type except notes the
deterministic id of the persistence result is ``payload.id`` rather than the envelope id;
the resolver accepts either, so a ref built from a persistence result resolves too
(the envelope id wins when both would match). Records are immutable, so a record's hash
only "drifts" if history was rewritten outside the library: a record whose line is
there but no longer verifies (its content does not hash to its sha) resolves to the
store's diagnostic, which matches no captured hash, so it reads as *drifted*; a record
that is gone resolves as ``None`` (missing).

The index of ids is built on first use and rebuilt when an id is not found and the
ledgers' shard files changed since (shards are immutable, so a new file name is the only
sign of new records), so records appended after the resolver was made are still found
and a run of unknown ids costs one directory listing each, not a re-read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterable

from ledger.model.values import Ref, RefSource
from ledger.typed.config import LedgerConfig
from ledger.typed.records import Record
from ledger.typed.storage import LedgerStore

__all__ = ["LedgerResolver", "record_ref"]

log = logging.getLogger(__name__)


def record_ref(record: Record) -> Ref:
    """A provenance ``Ref`` citing ``record``: source ledger, its id and its sha."""
    return Ref(source=RefSource.LEDGER, id=record.id, hash=record.sha)


class LedgerResolver:
    """Resolves ``Ref(source="ledger", ...)`` against a :class:`ShardStore` for ``verify_refs``.

    ``config_or_names`` is a ``LedgerConfig`` or the names of the ledgers to search;
    omitted, the store's own config is used, or else every ledger present on disk.
    """

    sources: Collection[RefSource] = frozenset({RefSource.LEDGER})

    def __init__(
        self,
        store: LedgerStore,
        config_or_names: LedgerConfig | Iterable[str] | str | None = None,
    ) -> None:
        self._store = store
        if config_or_names is None and store.config is not None:
            config_or_names = store.config
        self._fixed = None if config_or_names is None else _names_of(config_or_names)
        self._index: dict[str, str] | None = None
        self._seen: tuple[tuple[str, ...], ...] = ()
        self._lock = threading.Lock()

    def current_hash(self, source: RefSource | str, id: str) -> str | None:
        """The sha of the record with envelope id (or ``payload.id``) ``id``, else None."""
        if str(source) != RefSource.LEDGER.value or not isinstance(id, str) or not id:
            return None
        with self._lock:
            if self._index is None:
                self._index = self._build()
            found = self._index.get(id)
            if found is None and self._layout() != self._seen:
                self._index = self._build()  # new shards since the index was built
                found = self._index.get(id)
        return found

    def refresh(self) -> None:
        """Forget the index; the next lookup re-reads every ledger (a git store takes a
        new snapshot of its branches first)."""
        with self._lock:
            self._index = None
            take_snapshot = getattr(self._store, "refresh", None)
            if callable(take_snapshot):
                take_snapshot()

    @property
    def _names(self) -> tuple[str, ...]:
        return self._fixed if self._fixed is not None else tuple(self._store.names())

    def _layout(self) -> tuple[tuple[str, ...], ...]:
        """The shard file names of every ledger: they change whenever records are added."""
        layout = []
        for name in self._names:
            files = sorted(entry.file for entry in self._store.entries(name))
            layout.append((name, *files))
        return tuple(layout)

    def _build(self) -> dict[str, str]:
        self._seen = self._layout()
        by_payload: dict[str, str] = {}
        by_envelope: dict[str, str] = {}
        damaged: dict[str, str] = {}
        for name in self._names:
            read = self._store.read(name)
            for record in read.records:
                by_envelope.setdefault(record.id, record.sha)
                ident = record.payload.get("id") if isinstance(record.payload, dict) else None
                if isinstance(ident, str):
                    by_payload.setdefault(ident, record.sha)
            for d in read.diagnostics:  # a record that is there but does not verify
                if d.id and d.code.startswith("invalid"):
                    damaged.setdefault(d.id, f"{d.code}: {d.detail}")
        log.debug("ledger resolver indexed %d records", len(by_envelope))
        return damaged | by_payload | by_envelope


def _names_of(config_or_names: LedgerConfig | Iterable[str] | str) -> tuple[str, ...]:
    if isinstance(config_or_names, LedgerConfig):
        return config_or_names.names
    if isinstance(config_or_names, str):
        return (config_or_names,)
    return tuple(str(name) for name in config_or_names)
