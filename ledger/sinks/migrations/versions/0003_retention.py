"""Retention: the policy's versions, legal holds and the erasures' index.

Revision ID: 0003_retention
Revises: 0002_merkle_log
Create Date: 2026-12-01

Adds ``retention_policy``, ``legal_holds`` and ``erasures`` (see
``ledger/retention/tables.py``). Nothing existing changes: an erased event stays a row of
``events`` (its bytes a tombstone) and keeps its leaf in the tree.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_retention"
down_revision = "0002_merkle_log"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema = op.get_context().version_table_schema
    op.create_table(
        "retention_policy",
        sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("keep_s", sa.BigInteger(), nullable=False),
        sa.Column("floor_s", sa.BigInteger(), nullable=False),
        sa.Column("keys", sa.Text(), nullable=False),
        sa.Column("record_id", sa.String(26), nullable=False),
        sa.Column("set_us", sa.BigInteger(), nullable=False),
        sa.Column("set_by", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("signature", sa.Text(), nullable=True),
        schema=schema,
    )
    op.create_table(
        "legal_holds",
        sa.Column("hold_id", sa.String(26), primary_key=True),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("since_us", sa.BigInteger(), nullable=True),
        sa.Column("until_us", sa.BigInteger(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_us", sa.BigInteger(), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("record_id", sa.String(26), nullable=False),
        sa.Column("released_us", sa.BigInteger(), nullable=True),
        sa.Column("released_by", sa.Text(), nullable=True),
        sa.Column("release_reason", sa.Text(), nullable=True),
        sa.Column("release_record", sa.String(26), nullable=True),
        schema=schema,
    )
    op.create_table(
        "erasures",
        sa.Column("record_id", sa.String(26), primary_key=True),
        sa.Column("at_us", sa.BigInteger(), nullable=False),
        sa.Column("by", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("selection", sa.Text(), nullable=False),
        sa.Column("fields", sa.Text(), nullable=False),
        sa.Column("rows_erased", sa.BigInteger(), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        schema=schema,
    )
    op.create_index("ix_erasures_at", "erasures", ["at_us"], schema=schema)


def downgrade() -> None:
    schema = op.get_context().version_table_schema
    op.drop_table("erasures", schema=schema)
    op.drop_table("legal_holds", schema=schema)
    op.drop_table("retention_policy", schema=schema)
