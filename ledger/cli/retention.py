"""Retention, legal holds and erasure on the command line.

::

    ledger retention set --db URL --keep 400d --floor 180d [--reason "records policy v3"]
    ledger retention show --db URL
    ledger hold add --db URL --run RUN_ID --reason "litigation 2026-044"
    ledger hold add --db URL --since 2026-01-01 --until 2026-04-01 --reason "audit"
    ledger hold list --db URL
    ledger hold release HOLD_ID --db URL [--reason "case closed"]
    ledger erase --db URL --run RUN_ID --reason "GDPR Art. 17 request 42" [--dry-run]
    ledger erase --db URL --before 2025-01-01 --reason "expired" [--field args --field result]
    ledger db vacuum --db URL

Each command is a thin layer over :class:`ledger.retention.Retention` (and
:func:`ledger.retention.vacuum.vacuum`). A refused request (inside the floor, under a
hold, an unknown run, a malformed date, an empty reason) prints one line and exits 1
with nothing changed; a usage error exits 2.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from ledger.cli.common import (
    check_window,
    command_now,
    db_option,
    emit_json,
    emit_json_listing,
    human_time,
    json_line,
    json_option,
    parse_event_id,
    parse_when,
    stdout,
    url_or_db,
)
from ledger.errors import LedgerError, RetentionError, ValidationError
from ledger.model.shown import one_line

__all__ = ["register"]


def _key_text(value: str) -> str:
    """A key given as its text or as the path of a file holding it."""
    path = Path(value)
    if "+" in value and not path.exists():
        return value.strip()
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise click.BadParameter(f"{value}: cannot read the key file ({exc.strerror})") from None


@contextmanager
def _retention(url: str, *, write: bool) -> Iterator[Any]:
    from ledger.retention import Retention
    from ledger.sinks.opening import lock_timeout, open_reader, open_sink
    from ledger.sinks.url import parse_url

    parsed = parse_url(url)
    if parsed.scheme not in ("sqlite", "postgresql"):
        raise ValidationError(
            f"{parsed.shown}: retention works on a SQL ledger (sqlite:///FILE or "
            "postgresql://...); a JSONL file cannot be erased in place"
        )
    if parsed.scheme == "sqlite" and parsed.path is not None and not parsed.path.is_file():
        # a mistyped path must not become a fresh ledger holding a policy, a hold, an
        # erasure record or a vacuum report of nothing
        missing = "is a directory" if parsed.path.is_dir() else "does not exist"
        raise ValidationError(
            f"no ledger at {parsed.path}: the file {missing}; give the URL of an "
            "existing ledger (`ledger db upgrade URL` creates an empty one)"
        )
    if write:
        _require_ledger(parsed)
    sink: Any = open_sink(url, lock_wait=lock_timeout()) if write else open_reader(url)
    try:
        yield Retention(sink)
    finally:
        sink.close()


def _require_ledger(parsed: Any) -> None:
    """Refuse a database (a SQLite file, a PostgreSQL schema) that holds no ledger: a
    mistyped ``ledger_schema``, or a SQLite file of something else, must not become a
    fresh, empty ledger (the writer would create its tables there). One at an older
    revision is refused too, naming ``ledger db upgrade``: a dry run, or a change the
    floor or a hold refuses, must leave the database as it was, and a writer opening it
    would migrate it first."""
    import sqlalchemy as sa

    from ledger.sinks.schema import require_readable, schema_state
    from ledger.sinks.sqlite import require_sqlite_file

    if parsed.scheme == "sqlite" and parsed.path is not None:
        require_sqlite_file(parsed.path, empty_ok=True)  # nor another file a ledger's tables
    dsn = (  # the file's name as it is ("?" or "%41" in it are not URL syntax)
        sa.engine.URL.create("sqlite", database=str(parsed.path))
        if parsed.scheme == "sqlite"
        else parsed.dsn
    )
    engine = sa.create_engine(dsn, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            revision, state = schema_state(conn, parsed.schema)
    finally:
        engine.dispose()
    place = f"schema {parsed.schema!r}" if parsed.schema else "it"
    require_readable(revision, state, parsed.shown, place)


def _date(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """A date or an RFC 3339 time; for a hold's ``--since`` and ``--until`` also an age
    (``7d``: seven days ago), as every command's window takes them."""
    from ledger.retention import parse_date

    if value is None:
        return None
    try:
        return parse_date(value, what=f"--{param.name}")
    except ValidationError as exc:
        if param.name in ("since", "until"):
            if re.fullmatch(r"\s*\d+\s*m\s*", value, flags=re.IGNORECASE):
                # a hold must not cover six minutes where six months was meant
                raise click.BadParameter(
                    f"{value!r}: 'm' is ambiguous for a legal hold (minutes or months?); "
                    "give hours or days (e.g. 4h, 180d) or a date (2026-01-31)"
                ) from None
            # an age (read against the command's one "now"); its usage error names the
            # forms a hold takes (not minutes: see above)
            try:
                return parse_when(value, now=command_now(ctx))
            except click.BadParameter:
                raise click.BadParameter(
                    f"{value!r}: give an RFC 3339 time (2026-01-02T03:04:05Z), a date "
                    "(2026-01-02) or an age in hours, days or weeks (24h, 7d, 2w)"
                ) from None
        raise click.BadParameter(str(exc).removeprefix(f"--{param.name}: ")) from None


def _once(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> str | None:
    """An option that may be given once: a second value is a usage error, not one of the
    two silently dropped (``--run r0 --run r1`` would act on r1 alone)."""
    if len(value) > 1:
        raise click.BadParameter(
            f"given {len(value)} times ({', '.join(map(repr, value))}); give it once "
            "(one command per run)"
        )
    if value and not value[0]:  # (the library refuses it too: a run id is never empty)
        raise click.BadParameter("the run id is empty; give a run id as `ledger runs` shows it")
    return value[0] if value else None


_reason = click.option("--reason", required=True, help="Why (required, recorded in the log).")
_why = click.option(
    "--reason", default=None, metavar="TEXT",
    help="Why (recorded in the log; default: '(no reason given)').",
)  # fmt: skip
_by = click.option(
    "--by", default=None, metavar="NAME",
    help="Who is acting (default: $LEDGER_OPERATOR, else the login name).",
)  # fmt: skip


# --- ledger retention ------------------------------------------------------------------


@click.group(short_help="The retention policy: keep, floor (set, show).")
def retention() -> None:
    """The retention policy stored in the ledger: events older than KEEP may be erased;
    nothing younger than the FLOOR can be erased or pruned."""


@retention.command("set", short_help="Set keep and floor (raising the floor is free).")
@db_option
@click.option("--keep", required=True, metavar="DURATION", help="e.g. 400d, 52w, 2y.")
@click.option("--floor", default=None, metavar="DURATION", help="e.g. 180d (default: unchanged).")
@click.option(
    "--policy-key", "policy_keys", multiple=True, metavar="VKEY",
    help="A verifier key (text or file) allowed to sign lowering the floor (repeatable). "
    "The keys given replace the policy's keys (give every key to keep); none given: "
    "unchanged.",
)  # fmt: skip
@click.option("--key", "signer_key", default=None, metavar="FILE",
              help="Signer key that signs this change (needed to lower the floor).")  # fmt: skip
@_why
@_by
@json_option
def retention_set(
    db: str,
    keep: str,
    floor: str | None,
    policy_keys: tuple[str, ...],
    signer_key: str | None,
    reason: str | None,
    by: str | None,
    as_json: bool,
) -> None:
    """Set the retention policy; the change is recorded (and, to lower the floor,
    signed by a policy key)."""
    from ledger.integrity.note import Signer
    from ledger.timefmt import parse_duration

    spans = {}
    for name, text in (("keep", keep), ("floor", floor)):  # malformed: a usage error
        if text is not None:
            try:
                spans[name] = parse_duration(text, what=f"--{name}")
            except ValidationError as exc:
                message = str(exc).removeprefix(f"--{name}: ")
                raise click.BadParameter(message, param_hint=f"'--{name}'") from None
    if "floor" in spans and spans["floor"] > spans["keep"]:  # two values that contradict
        raise click.UsageError(  # each other, as a reversed hold window: a usage error
            f"--floor {floor} is longer than --keep {keep}: the floor is the least a record "
            "is kept, so it cannot exceed keep; raise --keep or lower --floor"
        )
    signer = None
    if signer_key is not None:
        text = _key_text(signer_key)
        if not text.startswith("PRIVATE+KEY+"):
            raise click.BadParameter(
                "that is not a signer key: --key takes the signer key file `ledger keygen "
                "--out FILE` wrote (a verifier key, what keygen printed, goes to --policy-key)",
                param_hint="'--key'",
            )
        try:
            signer = Signer.from_key(text)
        except LedgerError as exc:  # malformed, or its key id does not match
            raise click.BadParameter(str(exc), param_hint="'--key'") from None
    keys = [_key_text(k) for k in policy_keys] or None
    if any(k.startswith("PRIVATE+KEY+") for k in keys or ()):
        raise click.BadParameter(
            "that is a signer (private) key; give its verifier key (what `ledger keygen` "
            "printed), and keep the signer key for --key",
            param_hint="'--policy-key'",
        )
    with _retention(db, write=True) as r:
        before = r.policy()
        state = r.set_policy(
            keep=spans["keep"], floor=spans.get("floor"), keys=keys, signer=signer, reason=reason,
            by=by,
        )  # fmt: skip
    if before is None and floor is None:  # said on stderr, whatever the output form
        click.echo(
            "ledger: warning: no --floor given, so the floor is 0: any event older than "
            "the moment of erasure may be erased; set one with --floor 180d (raising it "
            "is free, lowering it needs a signed change)",
            err=True,
        )
    if as_json:
        emit_json(state.to_dict())
        return
    p = state.policy.to_dict()
    same = before is not None and before.version == state.version
    click.echo(
        f"retention policy v{state.version}: keep {p['keep']}, floor {p['floor']}"
        + (" (unchanged: nothing recorded)" if same else "")
    )


@retention.command("show", short_help="The policy in force and its history.")
@db_option
@json_option
def retention_show(db: str, as_json: bool) -> None:
    """The retention policy in force, its history, the holds standing."""
    with _retention(db, write=False) as r:
        history = r.policies()
        holds = r.holds()
        changed = r.tables_changed(scan=False)  # `ledger verify` scans the rows
    if as_json:
        emit_json(
            {
                "policy": history[-1].to_dict() if history else None,
                "history": [s.to_dict() for s in history],
                "holds": [h.to_dict() for h in holds],
                "tables_changed": changed,
            }
        )
        _fail_if_changed(changed)
        return
    if not history:
        click.echo("no retention policy set (nothing may be erased until one is)")
        _fail_if_changed(changed)
        return
    out = stdout()
    current = history[-1]
    p = current.policy.to_dict()
    out.print(f"keep {p['keep']}, floor {p['floor']} (version {current.version})", soft_wrap=True)
    for s in history:
        d = s.policy.to_dict()
        signed = f", signed by {s.signed_by}" if s.signed_by else ""
        out.print(
            one_line(
                f"  v{s.version} {human_time(s.set_at)} by {s.set_by}: keep {d['keep']}, "
                f"floor {d['floor']}{signed}: {s.reason}"
            ),
            soft_wrap=True,
            markup=False,
        )
    out.print(f"legal holds standing: {len(holds)}")
    _fail_if_changed(changed)


def _fail_if_changed(changed: str) -> None:
    """Say on stderr that the retention tables shown disagree with the log (``changed``:
    how, from :meth:`~ledger.retention.Retention.tables_changed`), and exit 1."""
    if changed:
        click.echo(
            one_line(
                "ledger: error: the retention tables disagree with the retention records in "
                f"the log, so what is shown is not the log's ({changed}); erasures are "
                "refused until the database is restored from a backup"
            ),
            err=True,
        )
        raise SystemExit(1)


# --- ledger hold ---------------------------------------------------------------------


@click.group(short_help="Legal holds: add, release, list.")
def hold() -> None:
    """Legal holds: while one stands, no event it covers can be erased."""


@hold.command("add", short_help="Hold a run, or a time range.")
@db_option
@click.option("--run", "run_id", multiple=True, callback=_once, metavar="RUN_ID",
              help="Hold this run.")  # fmt: skip
@click.option("--since", callback=_date, metavar="DATE", help="Hold events from this time.")
@click.option("--until", callback=_date, metavar="DATE", help="Hold events before this time.")
@_reason
@_by
@json_option
def hold_add(
    db: str,
    run_id: str | None,
    since: Any,
    until: Any,
    reason: str,
    by: str | None,
    as_json: bool,
) -> None:
    """Place a legal hold on a run (--run) or a time range (--since/--until)."""
    if (run_id is None) == (since is None and until is None):
        raise click.UsageError(
            "hold either a run (--run RUN_ID) or a time range (--since and/or --until), "
            "one of the two"
        )
    check_window(since, until)
    with _retention(db, write=True) as r:
        h = r.add_hold(run_id=run_id, since=since, until=until, reason=reason, by=by)
    if as_json:
        emit_json(h.to_dict())
        return
    click.echo(one_line(f"hold {h.hold_id} on {h.describe()}"))


@hold.command("release", short_help="Release a hold by its id.")
@click.argument("hold_id")
@db_option
@_why
@_by
@json_option
def hold_release(hold_id: str, db: str, reason: str | None, by: str | None, as_json: bool) -> None:
    """Release the legal hold HOLD_ID (recorded in the log)."""
    hold_id = parse_event_id(hold_id, "HOLD_ID") or hold_id
    with _retention(db, write=True) as r:
        h = r.release_hold(hold_id, reason=reason, by=by)
    if as_json:
        emit_json(h.to_dict())
        return
    click.echo(f"released hold {h.hold_id} ({h.describe()})")


@hold.command("list", short_help="The holds standing (--all: released ones too).")
@db_option
@click.option("--all", "show_all", is_flag=True, help="Include released holds.")
@json_option
def hold_list(db: str, show_all: bool, as_json: bool) -> None:
    """List legal holds."""
    with _retention(db, write=False) as r:
        holds = r.holds(released=show_all)
        changed = r.tables_changed(scan=False)  # `ledger verify` scans the rows
    if as_json:
        emit_json([h.to_dict() for h in holds])
        _fail_if_changed(changed)
        return
    if not holds:
        click.echo("no legal holds" + ("" if show_all else " standing"))
    for h in holds:
        state = "active" if h.active else f"released {human_time(h.released)}"
        click.echo(
            one_line(
                f"{h.hold_id}  {h.describe()}  {state}  by {h.created_by} "
                f"{human_time(h.created)}: {h.reason}"
            )
        )
    _fail_if_changed(changed)


# --- ledger erase ----------------------------------------------------------------------


@click.command(short_help="Erase events (tombstones keep the log verifiable).")
@db_option
@click.option("--run", "run_id", multiple=True, callback=_once, metavar="RUN_ID",
              help="Erase this run.")  # fmt: skip
@click.option("--before", callback=_date, metavar="DATE", help="Erase events before DATE.")
@click.option("--expired", is_flag=True, help="Erase events older than the policy's keep.")
@click.option(
    "--event", "event_ids", multiple=True, metavar="ID",
    help="Erase this event (repeatable; more ids may follow it: --event ID ID ...).",
)  # fmt: skip
@click.option(
    "--field", "fields", multiple=True, metavar="NAME",
    help="Erase only this field (repeatable, e.g. --field args --field result; the two "
    "together take the preview, the gate's clip of them, along).",
)  # fmt: skip
@_reason
@_by
@click.option("--dry-run", is_flag=True, help="List what would be erased; change nothing.")
@json_option
@click.argument("more_ids", nargs=-1, metavar="[ID]...")
def erase(
    db: str,
    run_id: str | None,
    before: Any,
    expired: bool,
    event_ids: tuple[str, ...],
    more_ids: tuple[str, ...],
    fields: tuple[str, ...],
    reason: str,
    by: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Erase the selected events: each one's stored bytes become a tombstone that keeps
    its leaf hash, id, run, kind and time, and an erasure record is appended to the log.
    Refused, with nothing changed, inside the floor or under a hold."""
    from ledger.model.erasure import ALL_FIELDS
    from ledger.retention import Selected, Selection, require_reason
    from ledger.timefmt import format_time, utc_now

    require_reason(reason, "--reason")  # one line, exit 1, as every refused request
    if more_ids and not event_ids:
        raise click.UsageError(
            f"unexpected argument {more_ids[0]!r}: event ids follow --event "
            "(--event ID ID ...); a run is --run RUN_ID"
        )
    event_ids = (*event_ids, *more_ids)
    chosen = sum((run_id is not None, before is not None, bool(event_ids), expired))
    if chosen != 1:
        raise click.UsageError(
            "select exactly one of --run RUN_ID, --before DATE, --expired or --event ID"
        )
    if event_ids:  # a malformed id is a usage error, as a malformed date is
        try:
            chosen_ids = Selection.of_events(list(event_ids))
        except ValidationError as exc:
            raise click.BadParameter(
                str(exc).removeprefix("--event: "), param_hint="'--event'"
            ) from None

    def each(s: Selected) -> None:
        if as_json:
            listing.write(json_line(s.to_dict()) + "\n")
        elif dry_run:
            mark = " (already erased)" if s.already else ""
            listing.write(
                one_line(
                    f"{s.event_id}  {s.run_id or '-'}  {s.kind}  {s.tool or '-'}  "
                    f"{format_time(s.time)}{mark}"
                )
                + "\n"
            )

    # what a dry run (or --json) lists is printed once the erasure was judged whole: a
    # refusal part-way (a row changed outside the ledger, say) lists nothing. Kept in a
    # file past 1 MiB, so a listing of millions of rows stays flat in memory.
    with (
        tempfile.SpooledTemporaryFile(max_size=1 << 20, mode="w+", encoding="utf-8") as listing,
        _retention(db, write=True) as r,
    ):
        if expired:
            state = r.policy()
            if state is None:
                raise RetentionError(  # a refused request, as every erasure without one
                    "--expired: no retention policy is set, so nothing is expired: set one "
                    "with `ledger retention set --keep 400d --floor 180d`; nothing was changed"
                )
            before = state.policy.expired_before(utc_now())
        if run_id is not None:
            selection = Selection.of_run(run_id)
        elif before is not None:
            selection = Selection.older_than(before)
        else:
            selection = chosen_ids
        outcome = r.erase(
            selection,
            reason=reason,
            by=by,
            fields=fields or ALL_FIELDS,
            dry_run=dry_run,
            each=each if as_json or dry_run else None,
        )
        listing.seek(0)
        if as_json:
            emit_json_listing(outcome.to_dict(), "events", listing)
            return
        for line in listing:
            click.echo(line, nl=False)
    what = one_line(selection.describe())
    if outcome.shredded:
        click.echo(
            f"{'dry run: would destroy' if dry_run else 'destroyed'} the data key of {what}: "
            "its args, results and previews are unreadable wherever a copy of them is"
        )
    if dry_run:
        click.echo(
            f"dry run: would erase {outcome.erased} event(s) of {what}"
            + (f" ({outcome.already} already erased)" if outcome.already else "")
            + "; nothing was changed"
        )
    elif outcome.erased == 0:
        click.echo(f"nothing to erase in {what} ({outcome.already} already erased)")
    else:
        click.echo(
            f"erased {outcome.erased} event(s) of {what}"
            + (f" ({outcome.already} already erased)" if outcome.already else "")
            + f"; erasure record {outcome.record_id}"
        )


# --- ledger db vacuum ------------------------------------------------------------------


@click.command("vacuum", short_help="Reclaim the space of erased rows (VACUUM).")
@url_or_db
@click.option(
    "--full", is_flag=True,
    help="PostgreSQL: VACUUM FULL, which rewrites the tables so no old copy of an erased "
    "row is left in them (writers wait meanwhile). SQLite's VACUUM always does.",
)  # fmt: skip
@json_option
def db_vacuum(url: str, full: bool, as_json: bool) -> None:
    """SQLite VACUUM / PostgreSQL VACUUM: reclaims the space erased rows left. Deletes no
    row, so nothing the floor or a hold protects is touched. SQLite's VACUUM rewrites
    the file, leaving no old copy of an erased row in it; on PostgreSQL, plain VACUUM
    only marks that space free: --full rewrites the tables."""
    from ledger.report.database import database_url
    from ledger.retention.vacuum import vacuum
    from ledger.sinks.opening import lock_timeout, open_sink

    database_url(url)  # a `db` command: the URL forms it takes, as db check says them
    with _retention(url, write=True):
        pass  # the ledger exists and its schema is current
    sink: Any = open_sink(url, lock_wait=lock_timeout())
    try:
        outcome = vacuum(sink, full=full)
    finally:
        sink.close()
    if as_json:
        emit_json(outcome.to_dict())
        return
    freed = f"{outcome.freed_bytes} freed" if outcome.freed_bytes else "none freed"
    click.echo(
        f"vacuum: {outcome.size_before} -> {outcome.size_after} bytes ({freed}), "
        f"{outcome.rows} rows kept"
    )


# --- ledger payload-key ----------------------------------------------------------------


@click.command("payload-key", short_help="Make a payload key file (crypto-shredding).")
@click.option(
    "--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
    help="The key file to create (mode 0600; never overwritten).",
)  # fmt: skip
def payload_key(out: Path) -> None:
    """Make a new 256-bit payload key in OUT (mode 0600). A ledger created with it
    (LEDGER_PAYLOAD_KEY=OUT, or payload_key=FileKeyWrapper(OUT)) stores every run's args
    and result encrypted under a data key of the run, wrapped by this key; erasing a run
    destroys its data key. Keep the file where the database is not: without it no
    payload can be read."""
    from ledger.sinks.shred import FileKeyWrapper

    made = FileKeyWrapper.create(out)
    click.echo(f"payload key {made.key_id} written to {out}")


def register(group: click.Group) -> None:
    """Add ``retention``, ``hold``, ``erase``, ``payload-key`` and ``db vacuum`` to
    ``group``."""
    group.add_command(retention)
    group.add_command(hold)
    group.add_command(erase)
    group.add_command(payload_key)
    db_group = group.commands.get("db")
    if isinstance(db_group, click.Group):
        db_group.add_command(db_vacuum)
