"""The Merkle log under the SQL sinks: storage, the write-path step, proofs, checkpoints.

Every event a SQL sink stores is a leaf of one RFC 9162 tree per database (per schema
on PostgreSQL), in commit order, leaf ``i`` being ``SHA-256(0x00 || event JSON bytes
exactly as stored)``. The tree lives in the ``events`` rows and two tables beside them
(revisions ``0002_merkle_log`` and ``0004_tree_in_rows``)::

    events.leaf_index       bigint, unique    the event's leaf index (dense: 0, 1, 2, ...)
    events.nodes            bytea             the hashes of the complete aligned subtrees
                                              the leaf completes, level 0 (the leaf hash)
                                              first, 32 bytes each: node (level, idx) is
                                              at byte 32 * level of the row of leaf
                                              (idx + 1) * 2**level - 1 (its owner,
                                              :func:`~ledger.integrity.merkle.node_owner`)
    tree_head               one row: origin (fixed at creation), size, root
    tree_checkpoints        size -> root, the signed note, creation time (microseconds)

Keeping each node with the leaf that completes it makes a commit one ``INSERT`` of the
rows: no index or table page of the tree's own to write per commit (on PostgreSQL the
head row's ``UPDATE`` in the same statement; on SQLite the head row is a mark written
with every 8th commit, :attr:`TreeReading.head_lags`).

The write path (:class:`TreeAppender`) runs inside the transaction that inserts the
events, under the writers' lock (SQLite's ``BEGIN IMMEDIATE``, a ``SELECT ... FOR
UPDATE`` of the head row on PostgreSQL): it numbers the new rows from the tree's size and
gives each the nodes it completes, so a commit either holds the events and their leaves
(and, where it writes one, the head) or none of them. A batch of the group commit is one
tree update. The appender caches the compact range (the ``popcount(n)`` subtrees
covering the tree): when another writer appended, the range is rebuilt from
``popcount(size)`` stored nodes in one query.

Proofs and roots read O(log n) stored nodes in one query (:class:`TreeReading`): the
``(level, idx)`` keys come from :func:`~ledger.integrity.merkle.inclusion_nodes` and
friends. ``TreeReading`` also hands the rows to :func:`ledger.integrity.verify_ledger`
(the :class:`~ledger.integrity.verify.LeafSource` protocol).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from itertools import accumulate
from typing import Any

import sqlalchemy as sa
from ulid import ULID

from ledger.errors import EventNotFound, IntegrityError, StorageError, ValidationError
from ledger.ids import coerce_event_id
from ledger.integrity.checkpoint import Checkpoint, InclusionProof, TreeHead, parse_checkpoint_body
from ledger.integrity.merkle import (
    HASH_SIZE,
    Frontier,
    NodeHashes,
    consistency_nodes,
    consistency_path,
    inclusion_nodes,
    inclusion_path,
    leaf_hash,
    node_owner,
    root_from_nodes,
    root_nodes,
)
from ledger.integrity.note import NoteSigner, NoteVerifier, add_signature_lines, parse_signatures
from ledger.integrity.verify import LeafRow
from ledger.model.erasure import tombstone_of
from ledger.sinks.rows import COLUMNS, sqlite_read_failed

__all__ = [
    "LEAF_COLUMN",
    "NODES_COLUMN",
    "NUMBERED_COLUMNS",
    "TIME_HI_COLUMN",
    "TIME_HI_POSTGRES",
    "HeadUnreadable",
    "TreeAppender",
    "TreeReading",
    "TreeTables",
    "fetch_nodes",
    "head_values",
    "node_key_chunks",
    "number_rows",
    "owned_nodes",
    "raise_time_high",
    "raised",
    "read_nodes",
    "size_after",
]

log = logging.getLogger(__name__)

_JSON = COLUMNS.index("event_json")
_TIME = COLUMNS.index("time_us")
_LEAF_ROWS = "SELECT seq, event_id, leaf_index, CAST(event_json AS BLOB) FROM events ORDER BY seq"
LEAF_COLUMN = "leaf_index"
NODES_COLUMN = "nodes"
TIME_HI_COLUMN = "time_hi_us"
# the value inserted into time_hi_us for a parameter holding the batch's own running
# maximum: raised to the largest time stored before (the time_us index's last entry)
TIME_HI_POSTGRES = "GREATEST({value}, (SELECT max(time_us) FROM {events}))"
_KEYS_PER_QUERY = 400  # leaf indexes per IN list


class TreeTables:
    """The tree's tables as Core metadata (in ``schema`` when given), and ``events``,
    the name of the table whose rows hold the nodes, quoted for driver-level SQL."""

    __slots__ = ("checkpoints", "events", "head")

    def __init__(self, schema: str | None = None) -> None:
        md = sa.MetaData(schema=schema)
        self.events = f'"{schema}".events' if schema else "events"
        self.head = sa.Table(
            "tree_head",
            md,
            sa.Column("id", sa.Integer(), primary_key=True),
            sa.Column("origin", sa.Text(), nullable=False),
            sa.Column("size", sa.BigInteger(), nullable=False),
            sa.Column("root", sa.LargeBinary(), nullable=False),
        )
        self.checkpoints = sa.Table(
            "tree_checkpoints",
            md,
            sa.Column("size", sa.BigInteger(), primary_key=True),
            sa.Column("root", sa.LargeBinary(), nullable=False),
            sa.Column("note", sa.Text(), nullable=False),
            sa.Column("created_us", sa.BigInteger(), nullable=False),
        )


NUMBERED_COLUMNS = (*COLUMNS, LEAF_COLUMN, TIME_HI_COLUMN, NODES_COLUMN)
"""The columns of the rows :func:`number_rows` makes, in order."""


def raised(rows: list[tuple[Any, ...]], top: object) -> list[tuple[Any, ...]]:
    """Rows of :func:`number_rows` with their ``time_hi_us`` raised to ``top``, the
    largest ``time_us`` stored before them (None in an empty table), for a writer that
    read it inside its write transaction and inserts plain values."""
    if type(top) is not int:
        return rows
    return [r if r[-2] >= top else (*r[:-2], top, r[-1]) for r in rows]


def raise_time_high(conn: sa.Connection, events: str, rows: list[tuple[Any, ...]]) -> list[Any]:
    """:func:`raised` with the largest ``time_us`` stored read on ``conn`` (the
    ``time_us`` index's last entry)."""
    return raised(rows, conn.exec_driver_sql(f"SELECT max(time_us) FROM {events}").scalar())


def node_key_chunks(keys: Sequence[int]) -> Iterator[Sequence[int]]:
    """``keys`` in slices small enough for one ``IN`` list."""
    for start in range(0, len(keys), _KEYS_PER_QUERY):
        yield keys[start : start + _KEYS_PER_QUERY]


def owned_nodes(frontier: Frontier, data: Iterable[bytes]) -> list[bytes]:
    """Append the leaves of ``data`` (event bytes as stored) to ``frontier``; return,
    per leaf, the nodes it completes as its row keeps them (``events.nodes``)."""
    own = frontier.append_owned
    return [own(leaf_hash(d)) for d in data]


def number_rows(frontier: Frontier, rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``rows`` (:data:`~ledger.sinks.rows.COLUMNS` order) appended to ``frontier`` as
    leaves, each followed by its leaf index, the largest ``time_us`` of the rows up to it
    and the nodes it completes (the ``leaf_index``, ``time_hi_us`` and ``nodes``
    columns), ready to insert.

    The ``time_hi_us`` here covers this batch only: the writer raises it to the largest
    time already stored (:func:`raised`, or in the insert statement itself:
    :data:`TIME_HI_POSTGRES`), so the column is the running maximum of the event time
    in commit order."""
    start, own = frontier.size, frontier.append_owned
    if len(rows) == 1:  # one caller's commit: no running maximum to take
        row = rows[0]
        return [(*row, start, row[_TIME], own(leaf_hash(row[_JSON].encode("utf-8"))))]
    highs = accumulate([row[_TIME] for row in rows], max)
    # one pass, no generator between: this runs on every commit's path
    return [
        (*row, start + i, hi, own(leaf_hash(row[_JSON].encode("utf-8"))))
        for (i, row), hi in zip(enumerate(rows), highs, strict=True)
    ]


def nodes_from_rows(
    keys: Sequence[tuple[int, int]], rows: Iterable[tuple[Any, Any]]
) -> dict[tuple[int, int], bytes]:
    """The hashes of nodes ``keys`` out of their owners' ``(leaf_index, nodes)`` rows;
    a node whose owner's row is missing, or too short to hold it, is left out."""
    held = {
        int(index): bytes(blob)
        for index, blob in rows
        if isinstance(index, int) and isinstance(blob, bytes | memoryview | bytearray)
    }  # a value of another type (SQLite keeps whatever an UPDATE gave) is no node
    found: dict[tuple[int, int], bytes] = {}
    for level, idx in keys:
        blob = held.get(node_owner(level, idx))
        if blob is not None and len(blob) >= (level + 1) * HASH_SIZE:
            found[(level, idx)] = blob[level * HASH_SIZE : (level + 1) * HASH_SIZE]
    return found


def read_nodes(
    execute: Callable[[str, tuple[Any, ...]], Iterable[tuple[Any, Any]]],
    events: str,
    dialect: str,
    keys: Sequence[tuple[int, int]],
) -> dict[tuple[int, int], bytes]:
    """The stored hashes of the nodes ``keys``, read from their owners' rows of the table
    ``events`` by the unique ``leaf_index`` index, one query per 400 owners, through
    ``execute(sql, params)`` (driver-level SQL of ``dialect``: nothing compiled per
    proof). A node that is not stored is left out."""
    owners = list(dict.fromkeys(node_owner(level, idx) for level, idx in keys))
    rows: list[tuple[Any, Any]] = []
    for part in node_key_chunks(owners):
        if dialect == "sqlite":
            marks = ", ".join("?" * len(part))
            query = (
                f"SELECT leaf_index, CAST(nodes AS BLOB) FROM {events} "
                f"WHERE leaf_index IN ({marks})"
            )
            rows += execute(query, tuple(part))
        else:
            query = f"SELECT leaf_index, nodes FROM {events} WHERE leaf_index = ANY(%s)"
            rows += execute(query, (list(part),))
    return nodes_from_rows(keys, rows)


def fetch_nodes(
    conn: sa.Connection, tables: TreeTables, keys: Sequence[tuple[int, int]]
) -> dict[tuple[int, int], bytes]:
    """:func:`read_nodes` on a SQLAlchemy connection."""

    def execute(query: str, params: tuple[Any, ...]) -> Iterable[tuple[Any, Any]]:
        return [tuple(r) for r in conn.exec_driver_sql(query, params)]

    return read_nodes(execute, tables.events, conn.dialect.name, keys)


def top_leaf(conn: sa.Connection, tables: TreeTables) -> object:
    """The largest stored leaf index (None in an empty log), by the ``leaf_index``
    index's last entry. Not checked: a value written by hand may be of any type."""
    return conn.exec_driver_sql(f"SELECT max({LEAF_COLUMN}) FROM {tables.events}").scalar()


def size_after(top: object) -> int:
    """The tree size whose last leaf index is ``top`` (None: the empty tree);
    ``IntegrityError`` for a value that is no leaf index (written by hand)."""
    if top is None:
        return 0
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise IntegrityError(
            f"the largest stored leaf index is {top!r}, not a leaf index: the rows were "
            "changed outside the ledger; run `ledger verify` and restore the database from "
            "a backup"
        )
    return top + 1


class HeadUnreadable(IntegrityError):
    """The tree head row holds values of the wrong types (written by hand); ``what``
    says which, in a few words."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"the ledger's tree head holds {what}: it was changed outside the ledger; run "
            "`ledger verify` and restore the database from a backup"
        )
        self.what = what


def head_values(size: object, root: object) -> tuple[int, bytes]:
    """The stored tree head's ``(size, root)`` as an int and bytes;
    :class:`HeadUnreadable` when the row holds values of other types (SQLite keeps
    whatever a hand-written ``UPDATE`` gives), so no reader or writer trips over them."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise HeadUnreadable(f"the size {size!r}, not a leaf count")
    if not isinstance(root, bytes | memoryview | bytearray) or len(root) != HASH_SIZE:
        raise HeadUnreadable(
            f"a root of type {type(root).__name__}, not a {HASH_SIZE}-byte hash"
            if not isinstance(root, bytes | memoryview | bytearray)
            else f"a root of {len(root)} bytes, not a {HASH_SIZE}-byte hash"
        )
    return size, bytes(root)


def _lookup(found: dict[tuple[int, int], bytes]) -> Any:
    def node(level: int, index: int) -> bytes:
        try:
            return found[(level, index)]
        except KeyError:
            raise IntegrityError(
                f"the stored tree has no node at level {level}, index {index}: the row of "
                f"leaf {node_owner(level, index)} was deleted or its nodes changed outside "
                "the ledger; run `ledger verify`"
            ) from None

    return node


class TreeAppender:
    """The write-path step of one sink: number new rows and compute the tree update.

    Not thread-safe by itself: a sink calls it from its single committing thread (the
    group commit's leader) inside the write transaction.
    """

    __slots__ = ("_frontier", "_key")

    def __init__(self) -> None:
        self._frontier: Frontier | None = None
        self._key: tuple[int, bytes | None] | None = None

    def begin(self, size: int, root: bytes, fetch: Any) -> Frontier:
        """The compact range of the committed head ``(size, root)``: the cached one when
        it is that head, else rebuilt from stored nodes (``fetch(keys) -> {key: hash}``)."""
        if self._frontier is not None and self._key == (size, root):
            return self._frontier
        keys = root_nodes(size)
        found = fetch(keys) if keys else {}
        frontier = Frontier.from_nodes(size, _lookup(found))
        if frontier.root() != root:
            raise IntegrityError(
                f"the stored tree head (size {size}) does not match its stored nodes: the "
                "tree tables were changed outside the ledger; nothing was written. Run "
                "`ledger verify` and restore the database from a backup"
            )
        self._frontier, self._key = frontier, None
        return frontier

    def rebuild(self, size: int, fetch: Any) -> Frontier:
        """The compact range of the first ``size`` leaves from their stored covering
        nodes, where the head is where the rows end (the caller checked what it can
        against the head row; ``ledger verify`` compares the nodes with the rows)."""
        keys = root_nodes(size)
        found = fetch(keys) if keys else {}
        self._frontier, self._key = Frontier.from_nodes(size, _lookup(found)), None
        return self._frontier

    def cached(self) -> Frontier | None:
        """The committed head's range when one is cached (the caller must not change it)."""
        return self._frontier if self._key is not None else None

    def root(self) -> bytes:
        """The cached committed root (only after :meth:`cached` returned a range that
        was committed with its root)."""
        assert self._key is not None and self._key[1] is not None
        return self._key[1]

    def forget(self) -> None:
        """Drop the cache (after a failed transaction the frontier may be ahead)."""
        self._frontier, self._key = None, None

    def committed(self, frontier: Frontier, root: bytes | None) -> None:
        """Remember ``frontier`` as the committed head, with its ``root`` (None where
        the writer does not compute it per commit)."""
        self._frontier, self._key = frontier, (frontier.size, root)


def _size_arg(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{what}: expected an integer tree size, got {value!r}")
    return value


class TreeReading:
    """Mixin for the SQL sinks: the log's origin, head, proofs and checkpoints.

    The sink provides ``_reading()`` (a connection for reads), ``_tree_writing()`` (a
    connection inside a write transaction holding the writers' lock, committed when the
    block ends) and ``_trees`` (:class:`TreeTables`), ``_table`` (events).
    """

    _trees: TreeTables
    _table: sa.Table
    _engine: sa.Engine
    keeps_head = True  # a LeafSource that stores its tree head (ledger.integrity.verify)
    # True where the stored head is a mark the log reached, written now and then, and
    # the current head is where the rows end (SQLite: ledger.sinks.sqlite); False where
    # every commit writes the head (PostgreSQL)
    head_lags = False

    def _reading(self) -> AbstractContextManager[sa.Connection]:
        raise NotImplementedError

    def _tree_writing(self) -> AbstractContextManager[sa.Connection]:
        raise NotImplementedError

    # --- the head -------------------------------------------------------------------

    def _stored_head(self, conn: sa.Connection) -> tuple[str, int, bytes]:
        """``(origin, size, root)`` of the head row, as stored."""
        h = self._trees.head
        row = conn.execute(sa.select(h.c.origin, h.c.size, h.c.root).where(h.c.id == 1)).first()
        if row is None:
            raise IntegrityError(
                "the ledger has no tree head (the tree_head row was deleted outside the "
                "ledger); run `ledger verify` and restore the database from a backup"
            )
        size, root = head_values(row[1], row[2])
        if not isinstance(row[0], str) or not row[0]:
            raise HeadUnreadable(f"the origin {row[0]!r}, not a log name")
        return row[0], size, root

    def _head_row(self, conn: sa.Connection) -> tuple[str, int, bytes]:
        """``(origin, size, root)`` of the current head: the stored one, or, where the
        stored head lags (:attr:`head_lags`), where the rows end, checked against it."""
        origin, size, root = self._stored_head(conn)
        if not self.head_lags:
            return origin, size, root
        now = self._head_size(conn, size)
        found = fetch_nodes(conn, self._trees, root_nodes(size) + root_nodes(now))
        if root_from_nodes(size, _lookup(found)) != root:
            raise IntegrityError(
                f"the stored tree nodes (events.nodes) lead to another root for size {size} "
                "than the tree head records: the tree was changed outside the ledger; run "
                "`ledger verify`"
            )
        return origin, now, root_from_nodes(now, _lookup(found))

    def _head_size(self, conn: sa.Connection, stored: int | None = None) -> int:
        """The current head's size: the stored one, or, where it lags, one past the last
        stored leaf index, refused when the rows end before the stored head."""
        if stored is None:
            stored = self._stored_head(conn)[1]
        if not self.head_lags:
            return stored
        now = size_after(top_leaf(conn, self._trees))
        if now < stored:
            raise IntegrityError(
                f"the ledger's tree head records {stored} leaves but its rows end at "
                f"{now}: rows were cut off the end, or an old backup was restored; run "
                "`ledger verify`"
            )
        return now

    def _tree_frontier(self, conn: sa.Connection) -> Frontier:
        """Inside a write transaction (:meth:`_tree_writing`): the compact range of the
        committed tree, rebuilt from the stored nodes and checked against the head."""
        _, size, root = self._head_row(conn)
        return TreeAppender().begin(size, root, lambda keys: fetch_nodes(conn, self._trees, keys))

    def _tree_moved(self, conn: sa.Connection, after: Frontier) -> None:
        """Inside that transaction, after rows numbered from :meth:`_tree_frontier` were
        inserted: store the new head (where it lags, the mark moves to it)."""
        h = self._trees.head
        conn.execute(h.update().where(h.c.id == 1).values(size=after.size, root=after.root()))

    @property
    def origin(self) -> str:
        """The log identity (``agentledger/<ULID>``), fixed when the ledger was created.

        >>> sink.origin                                   # doctest: +SKIP
        'agentledger/01JDX0S1ZQ9T4W8M3V6K2N7B5C'
        """
        with self._reading() as conn:
            return self._head_row(conn)[0]

    def tree_head(self) -> TreeHead:
        """The current size and root of the log (every committed event is in it).

        >>> sink.tree_head().size                         # doctest: +SKIP
        42
        """
        with self._reading() as conn:
            _, size, root = self._head_row(conn)
        return TreeHead(size=size, root=root)

    def leaf_index(self, event_id: ULID | str) -> int:
        """The leaf index of the stored event ``event_id`` (``EventNotFound`` if none)."""
        return self._leaf(event_id)[0]

    def _leaf(self, event_id: ULID | str) -> tuple[int, bytes]:
        key = str(coerce_event_id(event_id))
        t = self._table
        with self._reading() as conn:
            text = _stored_json(t, conn)
            row = conn.execute(sa.select(t.c.leaf_index, text).where(t.c.event_id == key)).first()
        if row is None:
            raise EventNotFound(f"no event with id {key} is stored")
        if row[0] is None:
            raise IntegrityError(
                f"event {key} has no leaf index: its row was inserted outside the ledger"
            )
        return int(row[0]), _as_bytes(row[1])

    # --- proofs ---------------------------------------------------------------------

    def _size_in_range(self, conn: sa.Connection, size: int | None, what: str) -> int:
        current = self._head_size(conn)
        if size is None:
            return current
        size = _size_arg(size, what)
        if not 0 <= size <= current:
            raise ValidationError(f"{what} {size} is not between 0 and the tree size {current}")
        return size

    def inclusion_proof(self, event_id: ULID | str, tree_size: int | None = None) -> InclusionProof:
        """The RFC 9162 inclusion proof of the event in the tree of ``tree_size`` leaves
        (default: the current head), read from at most ``2·log2(n)`` stored nodes.

        The leaf hash is recomputed from the event's stored bytes, so a proof of a
        changed row fails to verify; for an erased event (a tombstone) it is the leaf
        hash the tombstone keeps, which the tree holds (``ledger verify`` checks that an
        erasure record vouches for it).

        >>> proof = sink.inclusion_proof(event.event_id)  # doctest: +SKIP
        >>> proof.verify(sink.tree_head().root)           # doctest: +SKIP
        """
        index, data = self._leaf(event_id)
        with self._reading() as conn:
            size = self._size_in_range(conn, tree_size, "tree_size")
            if index >= size:
                raise ValidationError(
                    f"event {event_id} is leaf {index}, not in a tree of size {size}; "
                    "give a larger tree_size"
                )
            found = fetch_nodes(conn, self._trees, inclusion_nodes(index, size))
        hashes = inclusion_path(index, size, NodeHashes(_lookup(found)))
        stone = tombstone_of(data)
        leaf = stone.leaf_hash if stone is not None else leaf_hash(data)
        return InclusionProof(
            leaf_index=index, tree_size=size, leaf_hash=leaf, hashes=tuple(hashes)
        )

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> tuple[bytes, ...]:
        """The RFC 9162 consistency proof from the tree of ``old_size`` leaves to the tree
        of ``new_size`` (default: the current head).

        >>> proof = sink.consistency_proof(10)            # doctest: +SKIP
        """
        old_size = _size_arg(old_size, "old_size")
        with self._reading() as conn:
            new = self._size_in_range(conn, new_size, "new_size")
            if not 0 <= old_size <= new:
                raise ValidationError(
                    f"old_size {old_size} is not between 0 and the new size {new}"
                )
            found = fetch_nodes(conn, self._trees, consistency_nodes(old_size, new))
        return tuple(consistency_path(old_size, new, NodeHashes(_lookup(found))))

    def tree_root(self, size: int) -> bytes:
        """The root of the first ``size`` leaves, from ``popcount(size)`` stored nodes."""
        with self._reading() as conn:
            size = self._size_in_range(conn, size, "size")
            found = fetch_nodes(conn, self._trees, root_nodes(size))
        return root_from_nodes(size, _lookup(found))

    # --- checkpoints ----------------------------------------------------------------

    def checkpoint(self, signer: NoteSigner) -> Checkpoint:
        """Sign the current tree head as a C2SP checkpoint, store it, and return it.

        Refuses (``IntegrityError``, nothing stored) to sign a head smaller than a stored
        checkpoint, a head of a stored checkpoint's size with another root, or a tree
        whose stored nodes no longer lead to the last checkpoint's root: the ledger never
        signs two histories. Signing the same head again adds the signer's signature to
        the stored note (or returns it as it is when that key already signed).

        >>> cp = sink.checkpoint(Signer.from_key(key_text))   # doctest: +SKIP
        >>> print(cp.text)                                    # doctest: +SKIP
        """
        c = self._trees.checkpoints
        with self._tree_writing() as conn:
            origin, size, root = self._head_row(conn)
            last = conn.execute(
                sa.select(c.c.size, c.c.root, c.c.note).order_by(c.c.size.desc()).limit(1)
            ).first()
            found = fetch_nodes(conn, self._trees, root_nodes(size))
            if root_from_nodes(size, _lookup(found)) != root:
                raise IntegrityError(
                    f"the stored tree head (size {size}) does not match its stored nodes; "
                    "not signed. Run `ledger verify`"
                )
            if self.head_lags:
                self._rows_lead_to(conn, size, root)
            if last is not None:
                last_size, last_root, last_note = _stored_checkpoint(last)
                if last_size > size:
                    raise IntegrityError(
                        f"the tree has {size} leaves but checkpoint {last_size} was signed "
                        "before: the ledger was truncated or restored from an old backup; "
                        "not signed. Run `ledger verify`"
                    )
                if last_size == size:
                    if last_root != root:
                        raise IntegrityError(
                            f"checkpoint {size} was signed with another root: the ledger "
                            "was rewritten; not signed. Run `ledger verify`"
                        )
                    return self._sign_again(conn, origin, size, root, last_note, signer)
                old = fetch_nodes(conn, self._trees, root_nodes(last_size))
                if root_from_nodes(last_size, _lookup(old)) != last_root:
                    raise IntegrityError(
                        f"the stored tree no longer leads to checkpoint {last_size}'s root: "
                        "the ledger was rewritten; not signed. Run `ledger verify`"
                    )
            cp = Checkpoint.sign(origin, TreeHead(size=size, root=root), signer)
            conn.execute(
                c.insert().values(
                    size=size, root=root, note=cp.text, created_us=time.time_ns() // 1000
                )
            )
        return cp

    def _rows_lead_to(self, conn: sa.Connection, size: int, root: bytes) -> None:
        """Where the head lags: the rows above the head row's mark (the newest commits)
        must lead from the mark's range to ``root``, the one their stored nodes give
        (else ``IntegrityError``: nothing is signed); then the mark moves to ``size``.
        The mark's own range was checked against its root by :meth:`_head_row`."""
        _, mark, mark_root = self._stored_head(conn)
        if mark >= size:
            return
        frontier = TreeAppender().begin(
            mark, mark_root, lambda keys: fetch_nodes(conn, self._trees, keys)
        )
        t = self._table
        rows = conn.execute(
            sa.select(t.c.leaf_index, _stored_json(t, conn))
            .where(t.c.leaf_index >= mark)
            .order_by(t.c.leaf_index)
        ).all()
        if [r[0] for r in rows] != list(range(mark, size)):
            raise IntegrityError(
                f"the rows above the tree head's mark ({mark} leaves) are not leaves "
                f"{mark}..{size - 1} in order; not signed. Run `ledger verify`"
            )
        for _, raw in rows:
            data = _as_bytes(raw)
            stone = tombstone_of(data)
            frontier.append(stone.leaf_hash if stone is not None else leaf_hash(data))
        if frontier.root() != root:
            raise IntegrityError(
                f"the newest rows (leaves {mark}..{size - 1}) do not lead to the root their "
                "stored nodes give: rows or nodes were changed outside the ledger; not "
                "signed. Run `ledger verify`"
            )
        h = self._trees.head
        conn.execute(h.update().where(h.c.id == 1, h.c.size < size).values(size=size, root=root))

    def _sign_again(
        self,
        conn: sa.Connection,
        origin: str,
        size: int,
        root: bytes,
        note: str,
        signer: NoteSigner,
    ) -> Checkpoint:
        """The stored checkpoint of this head, with ``signer``'s signature added."""
        _, sigs = parse_signatures(note)
        if any(s.name == signer.name and s.key_id == signer.key_id for s in sigs):
            return _unverified(note)
        line = Checkpoint.sign(origin, TreeHead(size=size, root=root), signer).text
        merged = add_signature_lines(note, parse_signatures(line)[1][0].line)
        c = self._trees.checkpoints
        conn.execute(c.update().where(c.c.size == size).values(note=merged))
        return _unverified(merged)

    def checkpoints(self, verifiers: Iterable[NoteVerifier] | None = None) -> list[Checkpoint]:
        """The checkpoints stored in the ledger, smallest first.

        With ``verifiers`` each is verified (:meth:`Checkpoint.parse`; ``IntegrityError``
        when one fails); without, they are parsed only and ``signers`` is empty: verify
        before trusting (``ledger verify`` does).
        """
        keys = None if verifiers is None else list(verifiers)
        notes = self.checkpoint_notes()
        if keys is None:
            return [_unverified(n) for n in notes]
        return [Checkpoint.parse(n, keys) for n in notes]

    def checkpoint_notes(self) -> list[str]:
        """The stored checkpoint notes as text, smallest size first (not verified)."""
        c = self._trees.checkpoints
        with self._reading() as conn:
            return [str(n) for n in conn.execute(sa.select(c.c.note).order_by(c.c.size)).scalars()]

    # --- the LeafSource protocol (ledger.integrity.verify) ---------------------------

    def stored_head(self) -> tuple[str, TreeHead] | None:
        """``(origin, head)`` as stored, or None when the head row is missing;
        ``ValueError`` (what :func:`~ledger.integrity.verify.verify_ledger` reports as an
        unreadable head) when it holds values of the wrong types."""
        try:
            return self._read_head(self._stored_head, unreadable=True)
        except HeadUnreadable as exc:
            raise ValueError(f"it holds {exc.what}") from None

    def current_head(self) -> tuple[str, TreeHead] | None:
        """``(origin, head)`` now: the stored head, or where it lags, where the rows end
        (checked against it); None when it cannot be read (``ledger verify`` says why)."""
        return self._read_head(self._head_row)

    def _read_head(
        self, read: Callable[[sa.Connection], tuple[str, int, bytes]], *, unreadable: bool = False
    ) -> tuple[str, TreeHead] | None:
        """The head ``read`` gives; None when it cannot be had (with ``unreadable``, a
        head row of the wrong types raises :class:`HeadUnreadable` instead)."""
        try:
            with self._reading() as conn:
                origin, size, root = read(conn)
        except HeadUnreadable:
            if unreadable:
                raise
            return None
        except IntegrityError:
            return None
        return origin, TreeHead(size=size, root=root)

    def count_rows(self) -> int:
        """How many rows ``events`` holds (for a progress bar)."""
        with self._reading() as conn:
            return int(
                conn.execute(sa.select(sa.func.count()).select_from(self._table)).scalar_one()
            )

    def leaf_rows(self) -> Iterator[LeafRow]:
        """Every row's ``(seq, event_id, leaf_index, stored bytes)`` in ``seq`` order,
        streamed in pages of 5,000 (no connection held between pages)."""
        t = self._table
        if self._engine.dialect.name == "sqlite" and not getattr(self, "_closed", False):
            yield from self._sqlite_leaf_rows()
            return
        cursor = -(2**63)  # below every seq, also one SQL set to 0 or below
        while True:
            with self._reading() as conn:
                text = _stored_json(t, conn)
                rows = conn.execute(
                    sa.select(t.c.seq, t.c.event_id, t.c.leaf_index, text)
                    .where(t.c.seq > cursor)
                    .order_by(t.c.seq)
                    .limit(5000)
                ).all()
            for seq, event_id, index, raw in rows:
                yield LeafRow(
                    seq=int(seq),
                    event_id=str(event_id),
                    leaf_index=None if index is None else int(index),
                    data=_as_bytes(raw),
                )
            if len(rows) < 5000:
                return
            cursor = rows[-1][0]

    def run_leaf_rows(self, run_id: str) -> list[LeafRow]:
        """The rows of run ``run_id`` as stored, in ``seq`` order (for bundles)."""
        t = self._table
        with self._reading() as conn:
            text = _stored_json(t, conn)
            rows = conn.execute(
                sa.select(t.c.seq, t.c.event_id, t.c.leaf_index, text)
                .where(t.c.run_id == run_id)
                .order_by(t.c.seq)
            ).all()
        return [
            LeafRow(
                seq=int(seq),
                event_id=str(event_id),
                leaf_index=None if index is None else int(index),
                data=_as_bytes(raw),
            )
            for seq, event_id, index, raw in rows
        ]

    def inclusion_hashes(self, index: int, tree_size: int) -> tuple[bytes, ...]:
        """The inclusion proof of leaf ``index`` in the tree of ``tree_size`` leaves."""
        with self._reading() as conn:
            size = self._size_in_range(conn, tree_size, "tree_size")
            if not 0 <= index < size:
                raise ValidationError(f"leaf {index} is not in a tree of size {size}")
            found = fetch_nodes(conn, self._trees, inclusion_nodes(index, size))
        return tuple(inclusion_path(index, size, NodeHashes(_lookup(found))))

    def _sqlite_chunks(self, query: str) -> Iterator[Sequence[Any]]:
        """``query`` streamed on a connection of its own (a SQLite read transaction: one
        snapshot), in lists of up to 2,000 rows as the driver gives them."""
        raw = self._engine.raw_connection()
        try:
            cursor = raw.cursor()
            cursor.arraysize = 2000
            cursor.execute(query)
            while chunk := cursor.fetchmany():
                yield chunk
        except self._engine.dialect.loaded_dbapi.Error as exc:
            raise StorageError(sqlite_read_failed(getattr(self, "path", ""), exc)) from exc
        finally:
            raw.close()

    def _sqlite_leaf_rows(self) -> Iterator[LeafRow]:
        """Every row's :class:`LeafRow` fields, streamed (see :meth:`_sqlite_chunks`)."""
        for chunk in self._sqlite_chunks(_LEAF_ROWS):
            yield from chunk

    def leaf_batches(self) -> Iterator[Sequence[LeafRow]]:
        """:meth:`leaf_rows` in lists of up to 2,000 rows (verification hashes a list at
        a time); on SQLite straight from the cursor."""
        if self._engine.dialect.name != "sqlite" or getattr(self, "_closed", False):
            batch: list[LeafRow] = []
            for row in self.leaf_rows():
                batch.append(row)
                if len(batch) >= 2000:
                    yield batch
                    batch = []
            if batch:
                yield batch
            return
        yield from self._sqlite_chunks(_LEAF_ROWS)

    def prefixed_leaf_batches(self) -> Iterator[Sequence[tuple[int, bytes]]]:
        """Every row as ``(leaf index, 0x00 + stored bytes)`` in ``seq`` order, in lists
        of up to 2,000, from one snapshot: the leaf hash input, built by the database,
        for :func:`ledger.integrity.verify_ledger`'s lean pass."""
        if getattr(self, "_closed", False):
            return
        if self._engine.dialect.name == "sqlite":
            yield from self._sqlite_chunks(
                "SELECT leaf_index, CAST(X'00' || CAST(event_json AS BLOB) AS BLOB) "
                "FROM events ORDER BY seq"
            )
            return
        query = (
            "SELECT leaf_index, '\\x00'::bytea || convert_to(event_json, 'UTF8') "
            f"FROM {self._trees.events} ORDER BY seq"
        )
        held = getattr(getattr(self, "_held", None), "conn", None)
        if held is not None:  # the snapshot the caller holds (PostgresSink.snapshot)
            streamed = held.execution_options(stream_results=True, yield_per=2000)
            for part in streamed.exec_driver_sql(query).partitions(2000):
                yield [(r[0], bytes(r[1])) for r in part]
            return
        with self._engine.connect() as conn:  # one query, a server-side cursor: one snapshot
            conn = conn.execution_options(stream_results=True, yield_per=2000)
            with conn.begin():
                for part in conn.exec_driver_sql(query).partitions(2000):
                    yield [(r[0], bytes(r[1])) for r in part]

    def stored_leaf_hashes(self) -> Iterator[tuple[int, bytes]]:
        """The stored leaf hashes (level-0 nodes) ``(leaf index, hash)`` in index order,
        paged; a row whose nodes are missing or short is left out."""
        t = self._table
        cursor = -1
        while True:
            with self._reading() as conn:
                rows = conn.execute(
                    sa.select(
                        t.c.leaf_index,
                        sa.func.substr(sa.cast(t.c.nodes, sa.LargeBinary), 1, HASH_SIZE),
                    )
                    .where(t.c.leaf_index > cursor)
                    .order_by(t.c.leaf_index)
                    .limit(5000)
                ).all()
            for idx, h in rows:
                if h is not None and len(h) == HASH_SIZE:
                    yield int(idx), bytes(h)
            if len(rows) < 5000:
                return
            cursor = rows[-1][0]

    def stored_consistency_proof(self, old_size: int, new_size: int) -> tuple[bytes, ...] | None:
        """A consistency proof from the stored nodes, or None when they cannot give one."""
        try:
            with self._reading() as conn:
                found = fetch_nodes(conn, self._trees, consistency_nodes(old_size, new_size))
            return tuple(consistency_path(old_size, new_size, NodeHashes(_lookup(found))))
        except (IntegrityError, ValidationError, StorageError):
            return None


def _stored_checkpoint(row: Sequence[Any]) -> tuple[int, bytes, str]:
    """A ``tree_checkpoints`` row's size, root and note, once its columns are shown to
    agree with the signed note they were taken from (else ``IntegrityError``: the row
    was changed outside the ledger, and what it says cannot be signed against)."""
    size, root, note = row
    try:
        body = parse_checkpoint_body(parse_signatures(str(note))[0])
    except (IntegrityError, ValidationError) as exc:
        raise IntegrityError(
            f"a stored checkpoint's note does not parse ({exc}): the tree_checkpoints table "
            "was changed outside the ledger; not signed. Run `ledger verify`"
        ) from None
    if (size, bytes(root) if isinstance(root, bytes | memoryview) else root) != (
        body.size,
        body.root,
    ):
        raise IntegrityError(
            f"the stored checkpoint of size {size!r} disagrees with its own signed note "
            f"(size {body.size}): the tree_checkpoints table was changed outside the "
            "ledger; not signed. Run `ledger verify`"
        )
    return body.size, body.root, str(note)


def _unverified(note: str) -> Checkpoint:
    """A stored note as a :class:`Checkpoint` without verifying it (``signers`` empty)."""
    body, _ = parse_signatures(note)
    parsed = parse_checkpoint_body(body)
    return Checkpoint(
        origin=parsed.origin,
        size=parsed.size,
        root=parsed.root,
        text=note,
        signers=(),
        extensions=parsed.extensions,
    )


def _stored_json(t: sa.Table, conn: sa.Connection) -> sa.ColumnElement[Any]:
    column = t.c.event_json
    return sa.cast(column, sa.LargeBinary) if conn.dialect.name == "sqlite" else column


def _as_bytes(raw: object) -> bytes:
    if isinstance(raw, bytes):
        return raw
    if isinstance(raw, memoryview | bytearray):
        return bytes(raw)
    return str(raw).encode("utf-8")
