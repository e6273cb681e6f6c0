"""The tree's nodes move into the rows of the leaves that complete them.

Revision ID: 0004_tree_in_rows
Revises: 0003_retention
Create Date: 2026-12-01

Adds ``events.nodes``: the hashes of the complete aligned subtrees leaf ``i`` completes,
level 0 (the leaf hash) first, 32 bytes each (node ``(level, idx)`` belongs to leaf
``(idx + 1) * 2**level - 1``; see :func:`ledger.integrity.merkle.node_owner`). The nodes
of ``tree_nodes`` are copied there as stored (not recomputed: an erased row's leaf hash
survives only there), then ``tree_nodes`` is dropped. A commit then writes one table
instead of two. The downgrade puts the nodes back into ``tree_nodes``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from ledger.integrity.merkle import HASH_SIZE, node_owner

revision = "0004_tree_in_rows"
down_revision = "0003_retention"
branch_labels = None
depends_on = None

_PAGE = 5000


def _tables(schema: str | None) -> tuple[sa.Table, sa.Table]:
    md = sa.MetaData(schema=schema)
    events = sa.Table(
        "events",
        md,
        sa.Column("leaf_index", sa.BigInteger()),
        sa.Column("nodes", sa.LargeBinary()),
    )
    nodes = sa.Table(
        "tree_nodes",
        md,
        sa.Column("level", sa.SmallInteger()),
        sa.Column("idx", sa.BigInteger()),
        sa.Column("hash", sa.LargeBinary()),
    )
    return events, nodes


def upgrade() -> None:
    schema = op.get_context().version_table_schema
    op.add_column("events", sa.Column("nodes", sa.LargeBinary(), nullable=True), schema=schema)
    conn = op.get_bind()
    events, nodes = _tables(schema)
    top = conn.execute(sa.select(sa.func.max(events.c.leaf_index))).scalar()
    size = 0 if top is None else int(top) + 1
    for first in range(0, size, _PAGE):
        last = min(first + _PAGE, size) - 1
        owned: dict[int, list[bytes | None]] = {}
        for level in range(size.bit_length()):
            low = -(-(first + 1) // (1 << level)) - 1  # the first idx owned in the page
            high = ((last + 1) >> level) - 1
            if high < low:
                continue
            rows = conn.execute(
                sa.select(nodes.c.idx, nodes.c.hash).where(
                    nodes.c.level == level, nodes.c.idx.between(low, high)
                )
            )
            for idx, h in rows:
                slots = owned.setdefault(node_owner(level, int(idx)), [])
                slots.extend([None] * (level + 1 - len(slots)))
                slots[level] = bytes(h)
        params: list[dict[str, Any]] = []
        for leaf, slots in owned.items():
            blob = bytearray()
            for h in slots:  # lowest level first; stop at a gap (nodes deleted by hand)
                if h is None or len(h) != HASH_SIZE:
                    break
                blob += h
            if blob:
                params.append({"i": leaf, "n": bytes(blob)})
        if params:
            conn.execute(
                events.update()
                .where(events.c.leaf_index == sa.bindparam("i"))
                .values(nodes=sa.bindparam("n")),
                params,
            )
    op.drop_table("tree_nodes", schema=schema)


def downgrade() -> None:
    schema = op.get_context().version_table_schema
    op.create_table(
        "tree_nodes",
        sa.Column("level", sa.SmallInteger(), nullable=False),
        sa.Column("idx", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("level", "idx", name="pk_tree_nodes"),
        schema=schema,
        sqlite_with_rowid=False,
    )
    conn = op.get_bind()
    events, nodes = _tables(schema)
    cursor = -1
    while True:
        rows = conn.execute(
            sa.select(events.c.leaf_index, events.c.nodes)
            .where(events.c.leaf_index > cursor)
            .order_by(events.c.leaf_index)
            .limit(_PAGE)
        ).all()
        if not rows:
            break
        created: list[dict[str, Any]] = []
        for leaf, blob in rows:
            data = bytes(blob or b"")
            for level in range(len(data) // HASH_SIZE):
                created.append(
                    {
                        "level": level,
                        "idx": ((int(leaf) + 1) >> level) - 1,
                        "hash": data[level * HASH_SIZE : (level + 1) * HASH_SIZE],
                    }
                )
        if created:
            conn.execute(nodes.insert(), created)
        cursor = int(rows[-1][0])
    op.drop_column("events", "nodes", schema=schema)
