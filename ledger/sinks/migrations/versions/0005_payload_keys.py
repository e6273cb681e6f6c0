"""Crypto-shredding: the ledger's payload mode and the per-run data keys.

Revision ID: 0005_payload_keys
Revises: 0004_tree_in_rows
Create Date: 2026-12-01

Adds ``payload_mode`` (one row when the ledger stores ``args`` and ``result`` encrypted:
the scheme, the wrapping key's id, when; none for a ledger that stores them in clear) and
``run_keys`` (one row per run: its data key wrapped by the operator's key, until an
erasure destroys it). See ``ledger/sinks/shred.py``. Nothing existing changes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_payload_keys"
down_revision = "0004_tree_in_rows"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema = op.get_context().version_table_schema
    op.create_table(
        "payload_mode",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("scheme", sa.Text(), nullable=False),
        sa.Column("key_id", sa.Text(), nullable=False),
        sa.Column("created_us", sa.BigInteger(), nullable=False),
        schema=schema,
    )
    op.create_table(
        "run_keys",
        sa.Column("run_id", sa.Text(), primary_key=True),
        sa.Column("wrapped", sa.LargeBinary(), nullable=True),
        sa.Column("key_id", sa.Text(), nullable=False),
        sa.Column("created_us", sa.BigInteger(), nullable=False),
        sa.Column("destroyed_us", sa.BigInteger(), nullable=True),
        sa.Column("destroyed_by", sa.Text(), nullable=True),
        sa.Column("record_id", sa.String(26), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        schema=schema,
    )


def downgrade() -> None:
    schema = op.get_context().version_table_schema
    op.drop_table("run_keys", schema=schema)
    op.drop_table("payload_mode", schema=schema)
