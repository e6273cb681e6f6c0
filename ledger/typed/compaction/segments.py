"""Shard files as compaction sees them: strictly verified segments and built segments.

::

    segments = load_segments(store, "history")         # {segment id: Segment}
    seg_id, content = build_segment(records, COMPACTION_METADATA)

A segment is *valid* only if the whole file verifies (reference §5.3): it ends with a
newline and every line is a canonical record whose sha verifies. A built segment (a
compaction replacement) holds the records deduplicated and sorted by sha; its id is
derived from its content: the SHA-256 of the canonical JSON of ``{"metadata":
canonical(metadata) (a JSON string), "records": [...]}``, shaped as a UUIDv4.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ledger.errors import LedgerError
from ledger.typed.jsontext import canonical_json, sha256_hexdigest
from ledger.typed.records import Record, parse_line
from ledger.typed.storage import LedgerStore

__all__ = ["COMPACTION_METADATA", "Segment", "build_segment", "load_segments", "segment_id"]

log = logging.getLogger(__name__)

COMPACTION_METADATA: Mapping[str, str] = {"compaction": "gh-aw/ledger-compaction-plan/v1"}
SEGMENT_RE = re.compile(
    r"^([0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})\.jsonl$"
)
MAX_READ_BYTES = 100 * 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """One shard file: id (file name without ``.jsonl``), size, digest, verified records.

    ``records`` is empty and ``valid`` False when any part of the file fails to verify.
    """

    id: str
    bytes: int
    sha256: str
    records: tuple[Record, ...]
    valid: bool

    @property
    def shas(self) -> list[str]:
        """The sorted, unique shas of the segment's records."""
        return sorted({record.sha for record in self.records})


def segment_id(digest_hex: str) -> str:
    """A UUIDv4-shaped id from a hex SHA-256 (the reference's shaping, no prefix)."""
    h = digest_hex
    variant = (int(h[16:18], 16) & 0x3F) | 0x80
    return f"{h[0:8]}-{h[8:12]}-4{h[13:16]}-{variant:02x}{h[18:20]}-{h[20:32]}"


def build_segment(records: Iterable[Record], metadata: Mapping[str, Any]) -> tuple[str, bytes]:
    """The content-derived segment id and file bytes for ``records`` (deduped, sha order)."""
    unique = {record.sha: record for record in records}
    ordered = [unique[sha] for sha in sorted(unique)]
    body = {"metadata": canonical_json(metadata), "records": [r.as_dict() for r in ordered]}
    digest = sha256_hexdigest(canonical_json(body))
    content = "".join(record.to_line() + "\n" for record in ordered)
    return segment_id(digest), content.encode("utf-8", "surrogatepass")


def file_digest(data: bytes) -> str:
    """``sha256:`` + hex SHA-256 of raw bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def load_segments(store: LedgerStore, name: str) -> dict[str, Segment]:
    """Every shard file of ledger ``name`` by segment id, strictly verified."""
    segments: dict[str, Segment] = {}
    for entry in sorted(store.entries(name), key=lambda e: e.file):
        match = SEGMENT_RE.fullmatch(entry.file)
        if match is None:
            continue
        if entry.kind != "file" or entry.size > MAX_READ_BYTES:
            segments[match[1]] = Segment(
                id=match[1], bytes=entry.size, sha256="", records=(), valid=False
            )
            continue
        segments[match[1]] = parse_segment(match[1], entry.load())
    return segments


def parse_segment(seg_id: str, data: bytes) -> Segment:
    """Verify one segment's bytes; an invalid segment keeps its size and digest."""
    records = _verified_records(data)
    return Segment(
        id=seg_id,
        bytes=len(data),
        sha256=file_digest(data),
        records=records or (),
        valid=records is not None,
    )


def _verified_records(data: bytes) -> tuple[Record, ...] | None:
    if not data.endswith(b"\n"):
        return None
    try:
        text = data.decode("utf-8")
        return tuple(parse_line(line) for line in text[:-1].split("\n"))
    except (UnicodeDecodeError, LedgerError, ValueError):
        return None
