"""Alembic environment for the SQL sinks' schema (shipped inside the package).

The sinks run it on open through :func:`ledger.sinks.migrate.ensure_schema`, passing the
connection (and the PostgreSQL schema, if any) in ``config.attributes``. From a shell::

    alembic -c ledger/sinks/migrations/alembic.ini -x url=sqlite:///ledger.db upgrade head

Schema changes go only through new revisions in ``versions/``; each revision reads the
target schema from ``op.get_context().version_table_schema``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

VERSION_TABLE = "ledger_schema_version"


def _run(connection: Connection, schema: str | None) -> None:
    context.configure(
        connection=connection,
        target_metadata=None,
        version_table=VERSION_TABLE,
        version_table_schema=schema,
    )
    with context.begin_transaction():
        context.run_migrations()


def _main() -> None:
    config = context.config
    schema = config.attributes.get("schema")
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection, schema)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        raise SystemExit("give the database: alembic -x url=sqlite:///ledger.db upgrade head")
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        _run(conn, schema)
    engine.dispose()


_main()
