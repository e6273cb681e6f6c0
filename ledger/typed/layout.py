"""The tree of one ledger (the reference's ``ledgers/<name>`` branch) and changes to it.

A ledger's tree holds ``ledger/shards/<uuid4>.jsonl`` (records) and optionally
``ledger/compaction/state.json``. Every store (:class:`~ledger.typed.store.ShardStore`
on a folder, :class:`~ledger.typed.gitstore.GitShardStore` on git branches) lists a
ledger's shard files as :class:`ShardEntry` values and applies a transaction as one
:class:`LedgerChange` per ledger, all or nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from ledger.errors import TypedLedgerError
from ledger.typed.records import Record

__all__ = [
    "SHARDS_DIR",
    "SHARD_NAME_RE",
    "STATE_PATH",
    "EntryKind",
    "LedgerChange",
    "ShardEntry",
    "StoreError",
    "render_shard",
]

SHARDS_DIR: Final = "ledger/shards"
STATE_PATH: Final = "ledger/compaction/state.json"
SHARD_NAME_RE: Final = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.jsonl"
)

EntryKind = Literal["file", "symlink", "other"]


class StoreError(TypedLedgerError):
    """A store that cannot be read or written safely (a link out of it, a damaged tree,
    a transaction that could not be completed); the message names the path."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardEntry:
    """One entry of a ledger's ``ledger/shards`` folder: its name, kind and size; ``load``
    returns its bytes (only called for a regular file)."""

    file: str
    kind: EntryKind
    size: int
    load: Callable[[], bytes]


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerChange:
    """What one ledger gains and loses in one store transaction.

    ``add`` maps new shard file names to their bytes, ``remove`` names shard files to
    delete, ``state`` is the new ``ledger/compaction/state.json`` (``None``: unchanged);
    ``records`` counts the new records (for the commit message of a git store) and
    ``message`` overrides that message.
    """

    add: Mapping[str, bytes] = field(default_factory=dict)
    remove: Sequence[str] = ()
    state: bytes | None = None
    records: int = 0
    message: str | None = None

    @property
    def empty(self) -> bool:
        """True when the change writes nothing."""
        return not self.add and not self.remove and self.state is None


def render_shard(file_name: str, records: Sequence[Record]) -> tuple[bytes, list[Record]]:
    """The bytes of a shard file holding ``records`` (one canonical line each, LF-ended,
    never a byte-order mark) and the records located in it."""
    located: list[Record] = []
    offset = 0
    chunks: list[bytes] = []
    for line_no, record in enumerate(records, start=1):
        data = (record.to_line() + "\n").encode("utf-8", "surrogatepass")
        chunks.append(data)
        located.append(record.located(file_name, offset, line_no))
        offset += len(data)
    return b"".join(chunks), located
