"""The tamper-evident log: leaf indexes, stored tree nodes, the tree head, checkpoints.

Revision ID: 0002_merkle_log
Revises: 0001_events
Create Date: 2026-12-01

Adds ``events.leaf_index`` (unique), ``tree_nodes`` (every complete aligned subtree of
the RFC 9162 tree, keyed by ``(level, idx)``), ``tree_head`` (one row: the log's origin,
fixed here, and the current size and root) and ``tree_checkpoints`` (the signed
checkpoints the ledger issued). An existing database is upgraded in place: its rows
become the first leaves, in ``seq`` order, each leaf the SHA-256 of ``0x00`` and the
event JSON bytes exactly as stored.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from ulid import ULID

from ledger.integrity.merkle import Frontier, leaf_hash

revision = "0002_merkle_log"
down_revision = "0001_events"
branch_labels = None
depends_on = None

_PAGE = 5000


def upgrade() -> None:
    schema = op.get_context().version_table_schema
    op.add_column("events", sa.Column("leaf_index", sa.BigInteger(), nullable=True), schema=schema)
    op.create_table(
        "tree_nodes",
        sa.Column("level", sa.SmallInteger(), nullable=False),
        sa.Column("idx", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("level", "idx", name="pk_tree_nodes"),
        schema=schema,
        sqlite_with_rowid=False,  # one B-tree, keyed by (level, idx)
    )
    op.create_table(
        "tree_head",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("origin", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("root", sa.LargeBinary(), nullable=False),
        sa.CheckConstraint("id = 1", name="ck_tree_head_one_row"),
        schema=schema,
    )
    op.create_table(
        "tree_checkpoints",
        sa.Column("size", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("root", sa.LargeBinary(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("created_us", sa.BigInteger(), nullable=False),
        schema=schema,
    )
    _backfill(op.get_bind(), schema)
    op.create_index("ux_events_leaf_index", "events", ["leaf_index"], unique=True, schema=schema)


def _backfill(conn: sa.Connection, schema: str | None) -> None:
    """Number the existing rows in ``seq`` order and store their tree."""
    md = sa.MetaData(schema=schema)
    events = sa.Table(
        "events",
        md,
        sa.Column("seq", sa.BigInteger()),
        sa.Column("event_json", sa.Text()),
        sa.Column("leaf_index", sa.BigInteger()),
    )
    nodes = sa.Table(
        "tree_nodes",
        md,
        sa.Column("level", sa.SmallInteger()),
        sa.Column("idx", sa.BigInteger()),
        sa.Column("hash", sa.LargeBinary()),
    )
    head = sa.Table(
        "tree_head",
        md,
        sa.Column("id", sa.Integer()),
        sa.Column("origin", sa.Text()),
        sa.Column("size", sa.BigInteger()),
        sa.Column("root", sa.LargeBinary()),
    )
    sqlite = conn.dialect.name == "sqlite"
    text = sa.cast(events.c.event_json, sa.LargeBinary) if sqlite else events.c.event_json
    frontier = Frontier()
    cursor: int | None = None
    while True:
        query = sa.select(events.c.seq, text).order_by(events.c.seq).limit(_PAGE)
        if cursor is not None:
            query = query.where(events.c.seq > cursor)
        rows = conn.execute(query).all()
        if not rows:
            break
        numbered: list[dict[str, Any]] = []
        created: list[dict[str, Any]] = []
        for seq, raw in rows:
            data = raw if isinstance(raw, bytes) else str(raw).encode("utf-8")
            numbered.append({"s": seq, "i": frontier.size})
            created.extend(
                {"level": level, "idx": idx, "hash": h}
                for level, idx, h in frontier.append(leaf_hash(data))
            )
        conn.execute(
            events.update()
            .where(events.c.seq == sa.bindparam("s"))
            .values(leaf_index=sa.bindparam("i")),
            numbered,
        )
        conn.execute(nodes.insert(), created)
        cursor = int(rows[-1][0])
    conn.execute(
        head.insert(),
        {
            "id": 1,
            "origin": f"agentledger/{ULID()}",
            "size": frontier.size,
            "root": frontier.root(),
        },
    )


def downgrade() -> None:
    schema = op.get_context().version_table_schema
    op.drop_index("ux_events_leaf_index", table_name="events", schema=schema)
    op.drop_table("tree_checkpoints", schema=schema)
    op.drop_table("tree_head", schema=schema)
    op.drop_table("tree_nodes", schema=schema)
    op.drop_column("events", "leaf_index", schema=schema)
