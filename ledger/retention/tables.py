"""The retention tables (revision ``0003_retention``) as SQLAlchemy Core metadata.

::

    retention_policy   version -> keep, floor (seconds), policy keys (JSON list), the
                       record (event id of its ``ledger.retention.set`` action), when, by
                       whom, why, and the signature of a change that lowered the floor
    legal_holds        hold id -> run or time range, reason, record, who/when; released
                       (when, by whom, why, record) once released
    erasures           record id -> when, by whom, why, the selection, the fields, the
                       number of rows, their digest, the policy version it ran under

The tables are an index for quick checks; every change is also an event in the log
itself (:mod:`ledger.retention.records`), so the history is tamper-evident.
"""

from __future__ import annotations

import functools

import sqlalchemy as sa

__all__ = ["RetentionTables", "retention_tables"]


class RetentionTables:
    """The three tables, in ``schema`` when given."""

    __slots__ = ("erasures", "holds", "policy")

    def __init__(self, schema: str | None = None) -> None:
        md = sa.MetaData(schema=schema)
        self.policy = sa.Table(
            "retention_policy",
            md,
            sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
            sa.Column("keep_s", sa.BigInteger(), nullable=False),
            sa.Column("floor_s", sa.BigInteger(), nullable=False),
            sa.Column("keys", sa.Text(), nullable=False),
            sa.Column("record_id", sa.String(26), nullable=False),
            sa.Column("set_us", sa.BigInteger(), nullable=False),
            sa.Column("set_by", sa.Text(), nullable=False),
            sa.Column("reason", sa.Text(), nullable=False),
            sa.Column("signature", sa.Text(), nullable=True),
        )
        self.holds = sa.Table(
            "legal_holds",
            md,
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
        )
        self.erasures = sa.Table(
            "erasures",
            md,
            sa.Column("record_id", sa.String(26), primary_key=True),
            sa.Column("at_us", sa.BigInteger(), nullable=False),
            sa.Column("by", sa.Text(), nullable=False),
            sa.Column("reason", sa.Text(), nullable=False),
            sa.Column("selection", sa.Text(), nullable=False),
            sa.Column("fields", sa.Text(), nullable=False),
            sa.Column("rows_erased", sa.BigInteger(), nullable=False),
            sa.Column("digest", sa.String(64), nullable=False),
            sa.Column("policy_version", sa.Integer(), nullable=False),
            sa.Index("ix_erasures_at", "at_us"),
        )


@functools.cache
def retention_tables(schema: str | None = None) -> RetentionTables:
    """The tables of ``schema``, made once per process: SQLAlchemy caches a compiled
    statement per table object, so tables made afresh for every ``Retention`` would
    compile every statement again (about a millisecond each)."""
    return RetentionTables(schema)
