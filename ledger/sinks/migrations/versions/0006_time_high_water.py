"""The running maximum of the event time, per row: where a query since a time starts.

Revision ID: 0006_time_high_water
Revises: 0005_payload_keys
Create Date: 2026-12-01

Adds ``events.time_hi_us``: the largest ``time_us`` of the row and of every row before
it in commit order (``seq``). Event times are stated by the writer and need not rise
with the commit order, so a query for the events since a time cannot tell from the
primary key where its matches begin, and PostgreSQL walked the table from its start
(5.9 s for the first page at 10^7 events). The running maximum rises with ``seq``, so
the first row whose ``time_hi_us`` reaches the time is found by a binary search over
the leaf indexes, and no row before it can match. The writers fill it in as they
insert (``ledger.sinks.tree.number_rows``); this revision fills it in for the rows
stored before it, in one ``UPDATE`` over a window function.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_time_high_water"
down_revision = "0005_payload_keys"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema = op.get_context().version_table_schema
    op.add_column("events", sa.Column("time_hi_us", sa.BigInteger(), nullable=True), schema=schema)
    name = f'"{schema}".events' if schema else "events"
    op.execute(
        f"UPDATE {name} AS e SET time_hi_us = w.hi FROM (SELECT seq, max(time_us) OVER "
        f"(ORDER BY seq ROWS UNBOUNDED PRECEDING) AS hi FROM {name}) AS w WHERE e.seq = w.seq"
    )


def downgrade() -> None:
    schema = op.get_context().version_table_schema
    op.drop_column("events", "time_hi_us", schema=schema)
