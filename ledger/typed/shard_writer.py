"""Turning new records into shard files: segment splitting and file naming.

Used by every store: the records of one append become one shard file (or a few, rolled
at the segment size), each named ``<uuid4>.jsonl``, as a :class:`LedgerChange`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from ledger.errors import RecordError
from ledger.typed.layout import LedgerChange, render_shard
from ledger.typed.records import Record

__all__ = ["new_shards", "split_segments"]


def split_segments(records: Sequence[Record], limit: int) -> list[list[Record]]:
    """Group records into shards of at most ``limit`` bytes (lines plus newlines)."""
    shards: list[list[Record]] = [[]]
    size = 0
    for record in records:
        length = len(record.to_line().encode("utf-8", "surrogatepass")) + 1
        if length > limit:
            raise RecordError(
                f"record {record.id} is {length} bytes, larger than the segment limit of "
                f"{limit} bytes; make the payload smaller",
            )
        if size + length > limit and shards[-1]:
            shards.append([])
            size = 0
        shards[-1].append(record)
        size += length
    return shards


def new_shards(records: Sequence[Record], limit: int) -> tuple[LedgerChange, list[Record]]:
    """The change adding ``records`` as new shard files, and the records located in them."""
    add: dict[str, bytes] = {}
    located: list[Record] = []
    if records:
        for group in split_segments(records, limit):
            file_name = f"{uuid.uuid4()}.jsonl"
            data, placed = render_shard(file_name, group)
            add[file_name] = data
            located.extend(placed)
    return LedgerChange(add=add, records=len(records)), located
