"""The erasure evidence an evidence bundle of a run with tombstones carries.

>>> with open_reader("sqlite:///ledger.db") as sink:                 # doctest: +SKIP
...     rows = sink.run_leaf_rows("r-12")
...     found = bundle_erasures(sink, rows)     # [ErasureEvidence, ...]
...     make_bundle("r-12", rows, checkpoint, proof_for, found)

For each erasure record that last wrote one of the run's tombstones: the record's own
stored row (its JSON is the proof of the erasure, and its ``tombstones`` digest covers
every tombstone it wrote), and ``(leaf index, SHA-256 of the bytes)`` of every
tombstone it last wrote, found by the record's selection (its run, its date, its event
ids), so that ``ledger verify-bundle`` recomputes the digest offline.

A record some of whose tombstones a later erasure replaced vouches for them by the
digests the replacing tombstones keep of the bytes it wrote (``erased.earlier``). One
replaced before tombstones kept them cannot vouch for its other tombstones offline
(the bytes it wrote are gone, so its digest cannot be recomputed): such a run is
refused with :class:`~ledger.errors.IntegrityError` saying so (``ledger verify`` still
checks it in the database).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from ledger.errors import IntegrityError, LedgerError
from ledger.integrity.bundle import ErasureEvidence
from ledger.integrity.verify import LeafRow
from ledger.model.erasure import tombstone_of
from ledger.retention.rules import parse_date
from ledger.retention.store import Retention, Selection

__all__ = ["bundle_erasures"]

_MARK = b'"erased":{'


def bundle_erasures(sink: Any, rows: Sequence[LeafRow]) -> list[ErasureEvidence]:
    """The evidence of each erasure record that last wrote a tombstone among ``rows``
    (empty when none is a tombstone). ``IntegrityError`` when a record is not in the
    log, or cannot vouch for its tombstones offline (see the module notes)."""
    latest: set[str] = set()
    for row in rows:
        stone = tombstone_of(row.data) if _MARK in row.data else None
        if stone is not None:
            latest.add(stone.records[-1])
    if not latest:
        return []
    retention = Retention(sink)
    out: list[ErasureEvidence] = []
    with retention._reading() as conn:
        for record_id in sorted(latest):
            record = _record_row(retention, conn, record_id)
            selection = _selection(record, record_id)
            out.append(
                ErasureEvidence(
                    record=record,
                    tombstones=tuple(_written(retention, conn, selection, record_id)),
                )
            )
    return out


def _record_row(retention: Retention, conn: Any, record_id: str) -> LeafRow:
    t = retention._events
    sqlite = conn.dialect.name == "sqlite"
    mark = "?" if sqlite else "%s"
    data = "CAST(event_json AS BLOB)" if sqlite else "event_json"
    name = f'"{retention._schema}".events' if retention._schema else t.name
    found = conn.exec_driver_sql(
        f"SELECT seq, event_id, leaf_index, {data} FROM {name} WHERE event_id = {mark}",
        (record_id,),
    ).first()
    if found is None:
        raise IntegrityError(
            f"tombstones name erasure record {record_id}, which is not in the ledger: the "
            "rows were replaced outside the ledger. Run `ledger verify`"
        )
    seq, event_id, index, raw = found
    return LeafRow(
        seq=int(seq),
        event_id=str(event_id),
        leaf_index=None if index is None else int(index),
        data=raw if isinstance(raw, bytes) else str(raw).encode("utf-8"),
    )


def _selection(record: LeafRow, record_id: str) -> Selection:
    """The selection the erasure record states (its ``args.selection``)."""
    try:
        obj = orjson.loads(record.data)
        chosen = obj["args"]["selection"]
        if "run_id" in chosen:
            return Selection.of_run(str(chosen["run_id"]))
        if "before" in chosen:
            return Selection.older_than(parse_date(str(chosen["before"])))
        return Selection.of_events([str(i) for i in chosen["event_ids"]])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, LedgerError) as exc:
        raise IntegrityError(
            f"erasure record {record_id} does not state its selection ({exc}); it is not a "
            "record this ledger wrote. Run `ledger verify`"
        ) from None


def _written(
    retention: Retention, conn: Any, selection: Selection, record_id: str
) -> list[tuple[int, bytes]]:
    """``(leaf index, SHA-256 of the bytes)`` of each tombstone ``record_id`` last wrote,
    read page by page over the record's selection."""
    out: list[tuple[int, bytes]] = []
    for page in retention._pages(conn, selection):
        for _seq, event_id, index, _run, _time, _leaf, raw in page:
            data = raw if isinstance(raw, bytes) else str(raw).encode("utf-8")
            stone = tombstone_of(data) if _MARK in data else None
            if stone is None or record_id not in stone.records:
                continue
            # what this record wrote: the stored bytes, or (replaced by a later erasure)
            # the digest the tombstone keeps of them (erased.earlier)
            written = stone.written_digest(record_id, data)
            if written is None:
                raise IntegrityError(
                    f"erasure record {record_id} cannot vouch for its tombstones offline: "
                    f"a later erasure ({stone.records[-1]}) replaced some of them (event "
                    f"{event_id}) before tombstones kept the digest of the bytes they "
                    "replace, so the bytes it wrote are gone. `ledger verify` checks this "
                    "ledger in the database"
                )
            out.append((int(index), written))
    return out
