"""``ledger demo``: the scripted agent through the gate, then its chain and a summary.

Where things live (decided here; see ``docs/cli.md``): the provenance events go to
``--db`` (default ``sqlite:///ledger.db``); everything else goes to a demo home, by
default the folder ``ledger-demo/`` next to the database file (``./ledger-demo`` for a
PostgreSQL URL), reused by every later run::

    ledger-demo/agent/                the agent's files: notes.txt, notes.tidy.txt
    ledger-demo/ledger.yaml           the typed-ledger config (a ``knowledge`` notes ledger)
    ledger-demo/store/                the typed-ledger store (shard files)
    ledger-demo/transactions/RUN.json each run's transaction artifact
    ledger-demo/projection/           the read-only SQLite projections, rebuilt each time

Steps: :func:`ledger.demo.run_scripted_agent` (request, retrieved memory, a safe read, a
denied dangerous command, an approved write); then the run's typed-ledger note is queued
with the agent-side ``ledger_note_add`` tool, written as the run's transaction artifact,
persisted by the trusted step and projected; finally the run's chain and a compliance
summary of the run are shown. Running it again adds a second run and a second note.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from ledger.cli.common import DEFAULT_DB, db_option, emit_json, json_option, open_db, stdout
from ledger.errors import LedgerError, StorageError
from ledger.sinks.opening import lock_timeout
from ledger.sinks.url import parse_url

__all__ = ["DemoTyped", "default_home", "demo", "prepare_typed", "record_note", "register"]

DEMO_CONFIG = """\
# The demo's typed ledger: evidence-backed notes the agent proposes about its work.
knowledge:
  type: notes
"""


def default_home(db: str) -> Path:
    """``ledger-demo/`` next to the database file (the current directory for a server)."""
    path = parse_url(db).path
    return (path.parent if path is not None else Path()) / "ledger-demo"


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoTyped:
    """The typed-ledger half of one demo run."""

    artifact: Path
    persisted: dict[str, Any]
    projection: Path
    notes: int


def prepare_typed(home: Path) -> Any:
    """Everything the typed-ledger step needs, checked before the run is recorded: the
    config (written when missing) with its ``knowledge`` notes ledger, the typed-ledger
    functions, a sample note the queue accepts, and a store that still projects. Returns
    the parsed config; raises ``LedgerError`` (so a refused demo records nothing)."""
    import tempfile

    from ledger.cli.typed import load_config
    from ledger.typed import IntentQueue, ShardStore, build_projection

    for folder in ("agent", "store", "transactions", "projection"):
        if (home / folder).exists() and not (home / folder).is_dir():
            raise StorageError(
                f"{home / folder} is not a folder, and the demo writes there "
                "(move it away, or choose another --dir)"
            )
    config_path = home / "ledger.yaml"
    if not config_path.exists():
        config_path.write_text(DEMO_CONFIG, encoding="utf-8")
    config = load_config(config_path)
    kinds = {d.name: d.type for d in config.ledgers}
    if kinds.get("knowledge") != "notes":
        raise LedgerError(
            f"{config_path} has no `knowledge` notes ledger, which the demo writes to "
            "(delete the file to have the demo write it again, or choose another --dir)"
        )
    answer = IntentQueue(config).submit("ledger_note_add", _note("0" * 26, True))
    if not answer.get("success"):
        raise LedgerError(
            f"{config_path}: its `knowledge` ledger refuses the demo's note "
            f"({answer.get('error')}); delete the file to have the demo write it again"
        )
    store = ShardStore(home / "store", config)
    with tempfile.TemporaryDirectory(prefix="ledger-demo-check-") as scratch:
        try:
            build_projection(config, store, scratch)
        except LedgerError as exc:
            raise LedgerError(
                f"the demo's typed-ledger store {home / 'store'} does not replay: {exc} "
                "(`ledger typed project --lenient` shows what it skips; move the store "
                "away, or choose another --dir)"
            ) from None
    return config


def _note(run_id: str, written: bool) -> dict[str, Any]:
    outcome = "wrote notes.tidy.txt" if written else "was refused the write"
    return {
        "subject": "notes.txt",
        "note": f"run {run_id} {outcome} after the operator's decision",
        "reason": "recorded by `ledger demo` from the run's chain",
        "citations": [{"type": "repository", "path": "agent/notes.txt"}],
    }


def record_note(home: Path, run_id: str, written: Path | None, config: Any = None) -> DemoTyped:
    """Queue the run's note, write its artifact, persist it and rebuild the projection
    (``config`` from :func:`prepare_typed`, which runs here when it is not given)."""
    from ledger.typed import (
        IntentQueue,
        ShardStore,
        build_projection,
        persist,
        query_sql,
        read_artifact,
        write_artifact,
    )

    if config is None:
        config = prepare_typed(home)
    queue = IntentQueue(config)
    answer = queue.submit("ledger_note_add", _note(run_id, written is not None))
    if not answer.get("success"):
        raise LedgerError(f"the demo note was refused: {answer.get('error')}")
    (home / "transactions").mkdir(exist_ok=True)
    artifact = home / "transactions" / f"{run_id}.json"
    write_artifact(artifact, queue.artifact(f"demo-{run_id}"))
    store = ShardStore(home / "store", config)
    result = persist(config, store, read_artifact(artifact))
    paths = build_projection(config, store, home / "projection")
    rows = query_sql(paths["knowledge"], "SELECT count(*) AS n FROM notes")
    return DemoTyped(
        artifact=artifact, persisted=result, projection=paths["knowledge"], notes=rows[0]["n"]
    )


@click.command(short_help="Run the scripted agent, then show its chain and a summary.")
@db_option
@click.option(
    "--dir",
    "home",
    type=click.Path(path_type=Path, file_okay=False),
    help="Demo home for work files and the typed ledger [default: ledger-demo/ next to the db].",
)
@click.option("--deny-write", is_flag=True, help="Have the operator refuse the write.")
@json_option
def demo(db: str, home: Path | None, deny_write: bool, as_json: bool) -> None:
    """Run the scripted agent through the gate into --db, then show its chain and a short
    compliance summary. Safe to repeat: each run adds a new run."""
    from ledger.demo import run_scripted_agent

    home = home if home is not None else default_home(db)
    home.mkdir(parents=True, exist_ok=True)
    _check_home_writable(home)
    config = prepare_typed(home)  # a config or store the demo cannot use: refused now
    with _open_for_writing(db) as sink:
        result = run_scripted_agent(sink, home / "agent", approve=not deny_write)
    typed = record_note(home, result.run_id, result.written, config)
    _show(db, result, typed, home, as_json)


def _check_home_writable(home: Path) -> None:
    """Refuse, before the run is recorded, a demo home the demo could not finish writing
    (a read-only folder or file left from an earlier run)."""
    for path in [home, *sorted(home.rglob("*"))]:
        if path.is_symlink() or os.access(path, os.W_OK):
            continue
        raise StorageError(
            f"cannot write to {path}: it is read-only, and the demo writes there again "
            "(fix its permissions, or choose another --dir)"
        )


def _open_for_writing(db: str) -> Any:
    """The sink the demo writes to. A SQLite file must be writable (checked first, so a
    read-only ledger is one clear error, not a run that records nothing) and a locked one
    is waited for ``LEDGER_LOCK_TIMEOUT`` seconds. A JSONL file is no durable sink, so
    the gate refuses the run's non-safe write there (the output says so)."""
    from ledger.sinks import SQLiteSink, open_sink

    parsed = parse_url(db)
    if parsed.path is None:
        return _with_payload_key(open_sink(db))
    path = parsed.path
    if path.is_dir():
        raise StorageError(f"{path} is a directory, not a ledger file (pass --db)")
    folder = path.parent if str(path.parent) else Path()
    if not folder.is_dir():
        raise StorageError(f"cannot create {path}: the folder {folder} does not exist")
    if path.exists() and not os.access(path, os.W_OK):
        raise StorageError(f"cannot write to {path}: the file is read-only (choose another --db)")
    if (parsed.scheme == "sqlite" or not path.exists()) and not os.access(folder, os.W_OK):
        raise StorageError(
            f"cannot write to {path}: the folder {folder} is read-only (choose another --db)"
        )
    if parsed.scheme == "jsonl":
        return open_sink(db)
    wait = lock_timeout()
    if path.exists():
        _probe_write_lock(path, wait)
    return _with_payload_key(SQLiteSink(path, busy_timeout=min(wait, 5.0), lock_wait=wait))


def _with_payload_key(sink: Any) -> Any:
    """``sink``, once a crypto-shredding ledger is known to have its payload key: without
    it the run would be refused event by event (one clear error instead)."""
    payloads = getattr(sink, "_payloads", None)
    if payloads is not None:
        try:
            payloads.require_key()
        except BaseException:
            sink.close()
            raise
    return sink


def _probe_write_lock(path: Path, wait: float) -> None:
    """Take and release SQLite's write lock, so a database another process holds is one
    clear error before the run starts, not a run whose records are lost one by one."""
    import sqlite3

    try:
        conn = sqlite3.connect(path, timeout=wait, isolation_level=None)
    except sqlite3.Error as exc:
        raise StorageError(f"cannot open the SQLite ledger {path}: {exc}") from None
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise StorageError(
                f"the SQLite ledger {path} is locked by another process (waited {wait:g} s; "
                "set LEDGER_LOCK_TIMEOUT to wait longer)"
            ) from None
        raise StorageError(f"cannot write to the SQLite ledger {path}: {exc}") from None
    except sqlite3.DatabaseError as exc:
        raise StorageError(f"cannot open the SQLite ledger {path}: {exc}") from None
    finally:
        conn.close()


def _show(db: str, result: Any, typed: DemoTyped, home: Path, as_json: bool) -> None:
    from ledger.cli.forensics import chain_tree
    from ledger.cli.report import print_summary
    from ledger.report.build import build_report

    with open_db(db) as reader:
        chain = reader.chain(result.run_id)
        times = [e.time for e in chain.events]
        if not times:
            raise StorageError(f"the demo run {result.run_id} left no events in {db}")
        report = build_report(
            reader, since=min(times), until=max(times) + timedelta(microseconds=1)
        )
    if as_json:
        emit_json(
            {
                "run_id": result.run_id,
                "write_call_id": result.write_call_id,
                "home": str(home),
                "chain": chain.to_dict(),
                "report": report.to_dict(),
                "typed": {
                    "artifact": str(typed.artifact),
                    "persisted": typed.persisted,
                    "projection": str(typed.projection),
                    "notes": typed.notes,
                },
            }
        )
        return
    console = stdout()
    console.print(chain_tree(chain))
    console.print(
        f"typed ledger: note persisted ({typed.artifact.name}), {typed.notes} note(s) in "
        f"{typed.projection}"
    )
    print_summary(report, console, details=False)
    if parse_url(db).scheme == "jsonl":
        console.print(
            "[yellow]note: a JSONL file is not a durable sink, so the gate refused the "
            "non-safe write (no durable record, no action); use sqlite:/// or "
            "postgresql:// for the full demo[/]"
        )
    flag = "" if db == DEFAULT_DB else f" --db {shlex.quote(db)}"
    console.print("\nNext:", soft_wrap=True)
    for line in (
        f"ledger why{flag} {result.run_id} {result.write_call_id}",
        f"ledger runs{flag}",
        f"ledger report{flag} --format html -o report.html",
    ):
        console.print(f"  {escape(line)}", soft_wrap=True, highlight=False)


def register(group: click.Group) -> None:
    """Add ``demo`` to ``group``."""
    group.add_command(demo)
