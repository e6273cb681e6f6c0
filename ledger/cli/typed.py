"""``ledger typed ...``: typed-ledger configuration, projection, persistence, compaction and
queries, each a thin layer over :mod:`ledger.typed`.

CONFIG is a YAML file holding the ``tools.ledger`` value (either form), or a whole
workflow-style document with a top-level ``tools: {ledger: ...}``. Errors in it are
reported as ``FILE:LINE:COLUMN: message``: YAML syntax errors at their mark, and a
configuration error at the key its message names (e.g. ``tools.ledger.findings.type``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml
from rich.markup import escape
from rich.table import Table

from ledger.cli.common import (
    emit_json,
    emit_listing,
    json_option,
    listing_options,
    progress,
    stdout,
)
from ledger.errors import ConfigError, PersistError, QueryError

if TYPE_CHECKING:
    from ledger.typed.config import LedgerConfig
    from ledger.typed.storage import LedgerStore

__all__ = ["load_config", "register", "typed"]

# The typed-ledger engine is imported inside each command (typed, from its leaf modules), so
# `ledger --help` and the provenance commands do not pay for loading it.

_WHERE = re.compile(r"tools\.ledger((?:\.[A-Za-z0-9_-]+)*)")
_PROPERTY = re.compile(r'property "([^"]+)"')
_CONFIG = click.argument("config", type=click.Path(path_type=Path, dir_okay=False))
_STORE_HELP = (
    "The typed-ledger store: a folder (holding ledgers/NAME/ledger/shards), or git+PATH or "
    "git+URL for a repository's ledgers/NAME branches (nothing is checked out)."
)
_STORE = click.option("--store", "store", required=True, metavar="STORE", help=_STORE_HELP)


# Commands that only read a store refuse a missing folder: a typo must not look like an
# empty ledger. `persist` may create it.
def _existing_store(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A folder store must exist (a usage error otherwise, as for any missing path)."""
    if value is not None and not value.startswith("git+"):
        path = Path(value)
        if not path.exists():
            raise click.BadParameter(f"Directory {value!r} does not exist.")
        if not path.is_dir():
            raise click.BadParameter(f"Directory {value!r} is a file.")
    return value


_EXISTING_STORE = click.option(
    "--store",
    "store",
    required=True,
    metavar="STORE",
    help=_STORE_HELP + " Must exist.",
    callback=_existing_store,
)


def _open(store: str, config: LedgerConfig, *, must_exist: bool) -> LedgerStore:
    from ledger.typed.opening import open_store

    return open_store(store, config, must_exist=must_exist)


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _child(node: yaml.Node, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return k, v
    return None


def _locate(root: yaml.Node | None, prefix: tuple[str, ...], message: str) -> tuple[int, int]:
    """The line and column of the deepest key of ``tools.ledger.a.b`` named in
    ``message`` (under ``prefix`` in the document); the document start when none."""
    if root is None:
        return 1, 1
    node, at = root, _mark(root)
    for key in prefix:
        found = _child(node, key)
        if found is None:
            return at
        at, node = _mark(found[0]), found[1]
    m = _WHERE.search(message)
    if m is None:
        return at
    keys = [p for p in m.group(1).split(".") if p]
    named = _PROPERTY.search(message)  # 'has unsupported property "colour"': point at it
    keys += [named.group(1)] if named else []
    for key in keys:
        found = _child(node, key)
        if found is None:
            break
        at, node = _mark(found[0]), found[1]
    return at


def load_config(path: Path) -> LedgerConfig:
    """Read and parse a typed-ledger config file with line-precise errors."""
    from ledger.typed.config import parse_config
    from ledger.typed.strictjson import load_yaml_strict

    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, not a config file")
    if not path.is_file():
        raise ConfigError(f"No such file or directory: {path} (the typed-ledger config)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = load_yaml_strict(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise ConfigError(f"{path}:{line}:{col}: not valid YAML: {exc.problem}") from None
    prefix: tuple[str, ...] = ()
    tools = data.get("tools") if isinstance(data, dict) else None
    if isinstance(tools, dict) and "ledger" in tools:
        data, prefix = tools["ledger"], ("tools", "ledger")
    try:
        return parse_config(data, base_dir=path.parent)
    except ConfigError as exc:
        line, col = _locate(root, prefix, str(exc))
        raise ConfigError(f"{path}:{line}:{col}: {exc}") from None


@click.group(short_help="Typed ledgers: check, project, persist, compact, query, sql.")
def typed() -> None:
    """Typed ledgers: check, project, persist, compact, query, sql (every subcommand
    takes --help)."""


@typed.command()
@_CONFIG
@click.option(
    "--store",
    "store",
    metavar="STORE",
    help="Also read every ledger of this store (a folder, or git+PATH_OR_URL).",
    callback=_existing_store,
)
@json_option
def check(config: Path, store: str | None, as_json: bool) -> None:
    """Validate CONFIG; errors name the file, line and column.

    Reports the schema keywords the reference engine does not enforce on replay, and with
    --store each ledger's record count, diagnostics and warnings (exit 1 when a ledger
    has diagnostics: it would not replay)."""
    from ledger.typed.checking import check_ledgers

    parsed = load_config(config)
    findings = check_ledgers(
        parsed, None if store is None else _open(store, parsed, must_exist=True)
    )
    by_name = {f.name: f for f in findings}
    rows = [
        {
            "name": d.name,
            "type": d.type or "raw",
            "key": d.key,
            "schema": d.schema is not None,
            "max_record_kb": d.max_record_kb,
            "max_segment_kb": d.max_segment_kb,
            "compaction": d.compaction.enabled,
            "reference_ignores": list(by_name[d.name].ignored_keywords),
        }
        | (
            {}
            if store is None
            else {
                "records": by_name[d.name].records,
                "diagnostics": [str(x) for x in by_name[d.name].diagnostics or ()],
                "warnings": [str(x) for x in by_name[d.name].warnings or ()],
            }
        )
        for d in parsed.ledgers
    ]
    failed = [f.name for f in findings if not f.ok]
    if as_json:
        emit_json({"valid": not failed, "ledgers": rows})
    else:
        _print_check(config, rows, store is not None)
    if failed:
        raise SystemExit(1)


def _print_check(config: Path, rows: list[dict[str, Any]], with_store: bool) -> None:
    console = stdout()
    console.print(f"{escape(str(config))}: valid, {len(rows)} ledger(s)", soft_wrap=True)
    table = Table()
    names = ["name", "type", "key", "schema", "max record kB", "max segment kB", "compaction"]
    for name in names + (["records"] if with_store else []):
        table.add_column(name)
    for r in rows:
        cells = [r[k] for k in list(r)[:7]] + ([r["records"]] if with_store else [])
        table.add_row(*(escape(_cell(v)) for v in cells))
    console.print(table)
    for r in rows:
        if r["reference_ignores"]:
            console.print(
                f"note: {escape(r['name'])}: the reference engine does not enforce "
                f"{escape(', '.join(r['reference_ignores']))} when it replays; histories it "
                "wrote may break them (this library enforces them on what it writes)",
                soft_wrap=True,
            )
        for w in r.get("warnings", ()):
            console.print(f"warning: {escape(r['name'])}: {escape(w)}", soft_wrap=True)
        for d in r.get("diagnostics", ()):
            console.print(f"error: {escape(r['name'])}: {escape(d)}", soft_wrap=True)


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "-" if value is None else str(value)


@typed.command(short_help="Replay every ledger into read-only SQLite projections.")
@_CONFIG
@_EXISTING_STORE
@click.option("--out", required=True, type=click.Path(path_type=Path, file_okay=False))
@click.option("--lenient", is_flag=True, help="Quarantine bad records instead of failing.")
@json_option
def project(config: Path, store: str, out: Path, lenient: bool, as_json: bool) -> None:
    """Replay every ledger into read-only SQLite projections under --out."""
    from ledger.typed.projection import build_projection, quarantined_records

    parsed = load_config(config)
    shards = _open(store, parsed, must_exist=True)
    with progress(f"projecting {len(parsed.ledgers)} ledger(s)") as update:
        paths = build_projection(parsed, shards, out, strict=not lenient)
        update(len(paths))
    quarantined = {name: quarantined_records(p) for name, p in paths.items()} if lenient else {}
    _print_paths(paths, as_json, quarantined, lenient)


def _print_paths(
    paths: dict[str, Path],
    as_json: bool,
    quarantined: dict[str, list[dict[str, Any]]],
    lenient: bool = False,
) -> None:
    if as_json:
        out: dict[str, Any] = {name: str(p) for name, p in paths.items()}
        if lenient:
            out = {"projections": out, "quarantined": quarantined}
        emit_json(out)
        return
    table = Table(title=f"{len(paths)} projection(s)")
    table.add_column("ledger")
    table.add_column("database")
    for name, p in paths.items():
        table.add_row(escape(name), escape(str(p)))
    stdout().print(table)
    held = [(name, q) for name, items in quarantined.items() for q in items]
    if held:
        listing = Table(title=f"{len(held)} record(s) quarantined (--lenient), not projected")
        for column in ("ledger", "code", "file", "line", "id", "detail"):
            listing.add_column(column, overflow="fold")
        for name, q in held:
            listing.add_row(
                escape(name), escape(str(q["code"])), escape(str(q["file"] or "")),
                str(q["line"] or ""), escape(str(q["id"] or "")), escape(str(q["detail"])),
            )  # fmt: skip
        stdout().print(listing)
    elif quarantined:
        click.echo("nothing quarantined: every record was projected")


@typed.command(short_help="Validate and append a transaction ARTIFACT to the store.")
@_CONFIG
@_STORE
@click.argument("artifact", type=click.Path(path_type=Path, dir_okay=False))
@listing_options
def persist(config: Path, store: str, artifact: Path, form: str) -> None:
    """Validate and append a transaction ARTIFACT (JSON) to the store; prints the result
    (ids, counts and statuses, never the values): the whole result as JSON (the default,
    and --json), or one row per transaction with --nl or --csv."""
    from ledger.typed.persist import persist as persist_artifact
    from ledger.typed.transactions import read_artifact

    parsed = load_config(config)
    if not artifact.is_file() and not artifact.is_symlink():  # say which file is missing
        raise PersistError(f"No such file or directory: {artifact} (the transaction artifact)")
    try:
        data = read_artifact(artifact)
    except PersistError as exc:
        raise PersistError(f"{artifact}: {exc}") from None
    shards = _open(store, parsed, must_exist=False)
    with progress("persisting") as update:
        result = persist_artifact(parsed, shards, data)
        update(1)
    if form in ("nl", "csv"):
        rows = (
            {"ledger": name, **entry}
            for name, outcome in result.get("ledgers", {}).items()
            for entry in outcome.get("transactions", [])
        )
        emit_listing(rows, form, PERSIST_COLUMNS)
        return
    emit_json(result)


PERSIST_COLUMNS = ("ledger", "id", "transaction_id", "operation", "validated", "status", "error")
QUERY_COLUMNS = ("id", "type", "timestamp", "parents", "payload", "sha", "shard", "offset")


@typed.command()
@_CONFIG
@_EXISTING_STORE
@click.option("--ledger", "name", required=True, help="The ledger to compact.")
@click.option("--dry-run", is_flag=True, help="Plan and validate, write nothing.")
@json_option
def compact(config: Path, store: str, name: str, dry_run: bool, as_json: bool) -> None:
    """Merge small shard files of one ledger into a segment, losslessly."""
    from ledger.typed.compaction.apply import apply_compaction, plan_compaction

    parsed = load_config(config)
    shards = _open(store, parsed, must_exist=True)
    with progress(f"compacting {name}") as update:
        plan = plan_compaction(parsed, shards, name)
        outcome = None if plan is None else apply_compaction(parsed, shards, plan, dry_run=dry_run)
        update(1)
    if outcome is None:
        result: dict[str, Any] = {"status": "nothing_to_do", "plan_id": None}
    else:
        result = {
            "status": outcome.status,
            "plan_id": outcome.plan_id,
            "reason": outcome.reason,
            "applied": outcome.applied,
            "added": list(outcome.added),
            "removed": list(outcome.removed),
        }
    if as_json:
        emit_json(result)
    else:
        click.echo(
            f"{name}: {result['status']}"
            + (f" ({result['reason']})" if result.get("reason") else "")
        )
    if outcome is not None and outcome.status not in ("ready", "already_applied"):
        raise SystemExit(1)


@typed.command(short_help="Records of one ledger matching --where, as JSON.")
@_CONFIG
@_EXISTING_STORE
@click.option("--ledger", "name", required=True, help="The ledger to query.")
@click.option("--where", help='Predicates as JSON: {"payload.severity": {"eq": "high"}}.')
@click.option("--limit", type=click.IntRange(1, 500), default=100, show_default=True)
@click.option("--after", metavar="CURSOR", help="Continue after this cursor (sha256:...).")
@listing_options
def query(
    config: Path,
    store: str,
    name: str,
    where: str | None,
    limit: int,
    after: str | None,
    form: str,
) -> None:
    """Records of one ledger matching --where, as JSON (records and next_cursor; the
    default, and --json), or one record a line with --nl, or --csv (the next cursor goes
    to standard error)."""
    from ledger.typed.query import query_records
    from ledger.typed.strictjson import DuplicateKeyError, loads_strict

    parsed = load_config(config)
    parsed[name]  # an unknown ledger is an error, not an empty page
    try:
        predicates = loads_strict(where) if where else None
    except DuplicateKeyError as exc:
        raise QueryError(f"--where is refused: {exc}") from None
    except ValueError as exc:
        raise QueryError(f"--where is not JSON: {exc}") from None
    shards = _open(store, parsed, must_exist=True)
    page = query_records(shards, name, where=predicates, limit=limit, after=after)
    if form in ("nl", "csv"):
        emit_listing((r.as_dict() for r in page.records), form, QUERY_COLUMNS)
        if page.next_cursor:
            click.echo(f"more: --after {page.next_cursor}", err=True)
        return
    emit_json({"records": [r.as_dict() for r in page.records], "next_cursor": page.next_cursor})


@typed.command(short_help="One read-only SELECT over a projection; rows as JSON.")
@click.argument("projection", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.argument("sql")
@click.option("--param", "params", multiple=True, help="A positional ? parameter (repeatable).")
@click.option("--limit", type=click.IntRange(1, 100000), default=1000, show_default=True)
@click.option(
    "--max-bytes",
    type=click.IntRange(1, 1 << 30),
    default=16 * 1024 * 1024,
    show_default=True,
    help="Refuse a result larger than this many bytes (any one value: at most 1 MiB).",
)
def sql(projection: Path, sql: str, params: tuple[str, ...], limit: int, max_bytes: int) -> None:
    """Run one read-only SELECT over a PROJECTION database; rows as JSON."""
    from ledger.typed.query import query_sql

    emit_json(query_sql(projection, sql, params=params, limit=limit, max_bytes=max_bytes))


def register(group: click.Group) -> None:
    """Add the ``typed`` group to ``group``."""
    group.add_command(typed)
