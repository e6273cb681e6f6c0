"""Writing shard files: segment splitting and fsynced temporary files.

Used by :class:`ledger.typed.store.ShardStore`; a shard is written to a temporary file in
its final directory, fsynced, then renamed into place by the store.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ledger.errors import RecordError
from ledger.typed.records import Record

__all__ = ["split_segments", "write_temp_shard"]


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


def write_temp_shard(temp: Path, file_name: str, records: Sequence[Record]) -> list[Record]:
    """Write and fsync ``temp``; return the records located in ``file_name``."""
    located: list[Record] = []
    offset = 0
    chunks: list[bytes] = []
    for line_no, record in enumerate(records, start=1):
        data = (record.to_line() + "\n").encode("utf-8", "surrogatepass")
        chunks.append(data)
        located.append(record.located(file_name, offset, line_no))
        offset += len(data)
    with open(temp, "xb") as handle:
        handle.write(b"".join(chunks))
        handle.flush()
        os.fsync(handle.fileno())
    return located
