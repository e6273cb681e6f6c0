"""The events table and its indexes.

Revision ID: 0001_events
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_events"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema = op.get_context().version_table_schema
    op.create_table(
        "events",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("event_id", sa.String(26), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("call_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("verdict", sa.Text(), nullable=True),
        sa.Column("time_us", sa.BigInteger(), nullable=False),
        sa.Column("has_err", sa.Boolean(), nullable=False),
        sa.Column("event_json", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.Text(), nullable=True),
        sa.UniqueConstraint("event_id", name="uq_events_event_id"),
        schema=schema,
    )
    op.create_index("ix_events_run_seq", "events", ["run_id", "seq"], schema=schema)
    op.create_index("ix_events_time", "events", ["time_us"], schema=schema)
    op.create_index("ix_events_tool_time", "events", ["tool", "time_us"], schema=schema)
    op.create_index("ix_events_kind_time", "events", ["kind", "time_us"], schema=schema)


def downgrade() -> None:
    schema = op.get_context().version_table_schema
    op.drop_table("events", schema=schema)
