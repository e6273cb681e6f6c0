"""The tool index in commit order: a tool's events found in the order they are read.

Revision ID: 0007_tool_seq_index
Revises: 0006_time_high_water
Create Date: 2026-12-02

Replaces ``ix_events_tool_time`` (``tool, time_us``) with ``ix_events_tool_seq``
(``tool, seq``). Readers return events in commit order (``seq``), so a query for one
tool's events (``events(tool=..., since=...)``, ``ledger events --tool``) walks this
index from where its page starts and stops after a page of matches, instead of either
sorting every match of the tool by ``seq`` (seconds at 10^7 events) or walking the
primary key past every other tool's rows (tens of milliseconds at 10^6). No query of
the ledger reads ``tool`` together with a time range without ``seq`` order; the ones
that read tools by name (the retention records) are served by either index.
"""

from __future__ import annotations

from alembic import op

revision = "0007_tool_seq_index"
down_revision = "0006_time_high_water"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema = op.get_context().version_table_schema
    op.create_index("ix_events_tool_seq", "events", ["tool", "seq"], schema=schema)
    op.drop_index("ix_events_tool_time", table_name="events", schema=schema)


def downgrade() -> None:
    schema = op.get_context().version_table_schema
    op.create_index("ix_events_tool_time", "events", ["tool", "time_us"], schema=schema)
    op.drop_index("ix_events_tool_seq", table_name="events", schema=schema)
