"""The retention tables as the service reads and writes them are exactly what revision
0003_retention builds (Alembic's ``compare_metadata``), on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from ledger.retention.tables import RetentionTables
from tests.retention.conftest import Ledger, needs_retention_schema

pytestmark = needs_retention_schema

NAMES = {"retention_policy", "legal_holds", "erasures"}


def test_retention_tables_equal_the_migration(ledger_db: Ledger) -> None:
    ledger_db.open()
    url = ledger_db.sql_url
    args = {"options": f"-csearch_path={ledger_db.schema}"} if ledger_db.schema else {}
    engine = sa.create_engine(url, connect_args=args, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})

            def include(obj: object, name: str | None, kind: str, *_: object) -> bool:
                return kind != "table" or name in NAMES

            context.opts["include_object"] = include
            diff = list(compare_metadata(context, RetentionTables().policy.metadata))
    finally:
        engine.dispose()
    assert diff == []
