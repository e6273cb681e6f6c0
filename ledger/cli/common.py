"""Shared pieces of the ``ledger`` command: options, output, time parsing.

Every command that reads or writes provenance takes ``--db URL`` (environment variable
``LEDGER_DB``; default ``sqlite:///ledger.db``, the file ``./ledger.db``; a bare file path
is a SQLite file, or a JSONL one when it ends in ``.jsonl``). Every listing takes
``--json`` (one JSON array), ``--nl`` (newline-delimited JSON, one object a line, as
sqlite-utils writes it) or ``--csv``, with stable field names and times in one RFC 3339
form with microseconds; human output goes through rich, which drops colour and animation
when the output is not a terminal. Run and call ids may be given by a unique prefix.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast

import click
from rich import box
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ledger.errors import CallNotFound, RunNotFound, ValidationError
from ledger.ids import coerce_event_id
from ledger.model.shown import csv_cell, inert_json
from ledger.sinks import Reader, open_reader
from ledger.timefmt import check_window as check_bounds
from ledger.timefmt import format_time_us, parse_time, round_up_finer

__all__ = [
    "DEFAULT_DB",
    "check_window",
    "db_option",
    "emit_json",
    "emit_listing",
    "human_time",
    "json_option",
    "listing_options",
    "narrow_table",
    "open_db",
    "parse_when",
    "progress",
    "resolve_call",
    "resolve_run",
    "short_hash",
    "stdout",
    "window_options",
]

DEFAULT_DB = "sqlite:///ledger.db"
_PIPE_WIDTH = 160
F = TypeVar("F", bound=Callable[..., Any])

_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$", re.ASCII)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def piped() -> bool:
    """True when standard output is no terminal and ``COLUMNS`` is not set: output is
    read by a program, whose lines must not be folded at a width."""
    return not sys.stdout.isatty() and not os.environ.get("COLUMNS")


def stdout() -> Console:
    """A rich console on standard output: plain text, 160 columns wide, when
    :func:`piped` (else the terminal's width, or ``COLUMNS``)."""
    return Console(highlight=False, width=_PIPE_WIDTH if piped() else None)


def stderr() -> Console:
    """A rich console on standard error, for progress and notes."""
    return Console(stderr=True, highlight=False)


def db_option(f: F) -> F:
    """The ``--db URL`` option."""
    return click.option(
        "--db",
        "db",
        default=DEFAULT_DB,
        show_default=True,
        envvar="LEDGER_DB",
        metavar="URL",
        help="Ledger: sqlite:///FILE, postgresql://USER@HOST/DB or jsonl:///FILE.",
    )(f)


def url_or_db(f: Callable[..., Any]) -> Callable[..., Any]:
    """A ledger named either way: the ``URL`` argument or the ``--db URL`` option (the
    commands that take one differ, so each takes both); the command gets ``url``, by
    default ``--db``'s (``$LEDGER_DB``, else ``sqlite:///ledger.db``)."""
    return _url_or_db(f, required=False)


def url_or_db_required(f: Callable[..., Any]) -> Callable[..., Any]:
    """:func:`url_or_db` with no default: for a command that creates a database
    (``db upgrade``), which must not make ``./ledger.db`` unasked."""
    return _url_or_db(f, required=True)


def _url_or_db(f: Callable[..., Any], *, required: bool) -> Callable[..., Any]:
    @functools.wraps(f)
    def wrapper(*args: Any, url: str | None, db: str, **kwargs: Any) -> Any:
        given = click.get_current_context().get_parameter_source("db")
        if url is not None and given is click.core.ParameterSource.COMMANDLINE and url != db:
            raise click.UsageError(f"two ledgers given: URL {url!r} and --db {db!r}; give one")
        if required and url is None and given is click.core.ParameterSource.DEFAULT:
            raise click.UsageError("which ledger? give its URL (or --db URL)")
        return f(*args, url=db if url is None else url, **kwargs)  # the argument over $LEDGER_DB

    return db_option(click.argument("url", required=False, metavar="[URL]")(wrapper))


def json_option(f: F) -> F:
    """The ``--json`` flag."""
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(f)


def parse_when(text: str | None, *, now: datetime | None = None) -> datetime | None:
    """A time given on the command line: RFC 3339 (``2026-01-02T03:04:05Z``), a date
    (``2026-01-02``, midnight UTC) or an age (``30m``, ``24h``, ``7d``, ``2w`` ago). A
    time finer than a microsecond is rounded up to the next one, as
    :func:`ledger.retention.parse_date` rounds it."""
    if text is None:
        return None
    text = text.strip()
    if not text:
        raise click.BadParameter(
            "empty time: give an RFC 3339 time (2026-01-02T03:04:05Z), a date (2026-01-02) "
            "or an age (30m, 24h, 7d, 2w), or leave the option out for an open window"
        )
    m = _RELATIVE.match(text)
    if m:
        try:
            return (now or datetime.now(UTC)) - timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
        except OverflowError:
            raise click.BadParameter(
                f"{text!r} reaches back before the year 1; give a shorter age or a date"
            ) from None
    if re.fullmatch(r"\d{4}-\d\d-\d\d", text, re.ASCII):
        try:
            return datetime.fromisoformat(text).replace(tzinfo=UTC)
        except ValueError:
            pass
    try:
        moment = parse_time(text, field="time")
    except ValidationError:
        raise click.BadParameter(
            f"{text!r}: give an RFC 3339 time (2026-01-02T03:04:05Z), a date (2026-01-02) "
            "or an age (30m, 24h, 7d, 2w)"
        ) from None
    # events are stored to the microsecond: a finer time is a bound between two stored
    # times, rounded up (as a hold's and an erasure's are), so that an event is at or
    # after it (--since) or before it (--until) exactly when it is so of the time given
    try:
        return round_up_finer(moment, text)
    except ValidationError:
        raise click.BadParameter(f"{text!r} is out of range") from None


def parse_event_id(value: str | None, option: str) -> str | None:
    """An id the ledger made (an event's, a hold's) given on the command line, read in
    any case; a malformed one is a usage error (exit 2), as a malformed date is."""
    if value is None:
        return None
    try:
        return str(coerce_event_id(value, field=option))
    except ValidationError as exc:
        raise click.BadParameter(
            str(exc).removeprefix(f"{option}: "), param_hint=f"'{option}'"
        ) from None


def command_now(ctx: click.Context) -> datetime:
    """The one "now" of a command, against which every age it is given is read (so
    ``--since 1d --until 1d`` is the empty window it says)."""
    now: datetime = ctx.find_root().meta.setdefault("ledger.now", datetime.now(UTC))
    return now


def _when(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    return parse_when(value, now=command_now(ctx))


def check_window(since: datetime | None, until: datetime | None) -> None:
    """A usage error (exit 2) when ``--since`` is not before ``--until``
    (:func:`ledger.timefmt.check_window`)."""
    try:
        check_bounds(since, until)
    except ValidationError as exc:
        said = str(exc).replace("since ", "--since ", 1).replace("until ", "--until ", 1)
        raise click.UsageError(said, ctx=click.get_current_context(silent=True)) from None


def window_options(f: F) -> F:
    """``--since`` (inclusive) and ``--until`` (exclusive); a reversed or empty window
    is refused before the command runs."""

    @functools.wraps(f)
    def checked(*args: Any, **kwargs: Any) -> Any:
        check_window(kwargs.get("since"), kwargs.get("until"))
        return f(*args, **kwargs)

    wrapped = click.option(
        "--until", callback=_when, metavar="TIME", help="End of the window (exclusive)."
    )(cast(F, checked))
    return click.option(
        "--since",
        callback=_when,
        metavar="TIME",
        help="Start of the window (inclusive): 2026-01-02, an RFC 3339 time, or 7d/24h ago.",
    )(wrapped)


@contextmanager
def open_db(url: str) -> Iterator[Reader]:
    """Open the ledger at ``url`` for reading and close it afterwards."""
    reader = open_reader(url)
    try:
        yield reader
    finally:
        reader.close()


def human_time(value: datetime | None) -> str:
    """A time for people: ``2026-11-30 14:44:44`` (UTC, to the second; ``-`` for none).

    The space lets a narrow table wrap date and time onto two lines; ``--json`` keeps
    the full RFC 3339 form with microseconds."""
    if value is None:
        return "-"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def narrow_table(title: str | None = None) -> Table:
    """A table that stays readable at 80 columns: a rule under the header and no
    vertical borders, so the columns get the width (ids fold, times wrap, never "…")."""
    return Table(
        title=title,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
        title_justify="left",
    )


def short_hash(value: str | None) -> str:
    """``sha256:e9cd29db755c…`` (12 hex digits) for human output; ``--json`` has it all."""
    if not value:
        return ""
    algo, sep, digest = value.partition(":")
    if not sep or len(digest) <= 12:
        return value
    return f"{algo}:{digest[:12]}…"


def _default(value: object) -> Any:
    if isinstance(value, datetime):
        return format_time_us(value)
    return str(value)


def emit_json(value: object) -> None:
    """Print ``value`` as indented JSON (times in RFC 3339, UTC)."""
    click.echo(inert_json(json.dumps(value, indent=2, ensure_ascii=False, default=_default)))


def json_line(value: object) -> str:
    """``value`` as one line of JSON (times as :func:`emit_json` writes them), for
    :func:`emit_json_listing`."""
    return json.dumps(value, ensure_ascii=False, default=_default)


def emit_json_listing(value: dict[str, Any], name: str, items: Iterable[str]) -> None:
    """Print ``{**value, name: [...]}`` as :func:`emit_json` does, the list's items
    given as :func:`json_line` texts and written as they come (read back from a file,
    say), so memory does not grow with them."""
    head = json.dumps({**value, name: None}, indent=2, ensure_ascii=False, default=_default)
    before, after = head.rsplit(f"{json.dumps(name)}: null", 1)
    before, after = inert_json(before), inert_json(after)
    click.echo(f"{before}{json.dumps(name)}: [", nl=False)
    count = 0
    for item in items:
        text = inert_json(json.dumps(json.loads(item), indent=2, ensure_ascii=False))
        # indented line by line at "\n" only (a string may hold U+2028 and the like,
        # where str.splitlines, and so textwrap, would break it)
        shown = "\n".join("    " + line for line in text.split("\n"))
        click.echo(("," if count else "") + "\n" + shown, nl=False)
        count += 1
    click.echo(("\n  ]" if count else "]") + after)


def interactive() -> bool:
    """True when standard error is a terminal (progress bars are shown only then)."""
    return sys.stderr.isatty()


@contextmanager
def progress(description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
    """A progress bar on a terminal, nothing when piped; yields ``update(completed)``."""
    if not interactive():
        yield lambda _done: None
        return
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=stderr(), transient=True) as bar:
        task = bar.add_task(description, total=total)

        def update(done: int) -> None:
            bar.update(task, completed=done)

        yield update


# --- listings: --json, --nl, --csv ----------------------------------------------------


def listing_options(f: F) -> F:
    """``--json`` / ``--nl`` / ``--csv`` for a listing; the command gets ``form``:
    ``"table"`` (the default, for people), ``"json"``, ``"nl"`` or ``"csv"``."""

    @functools.wraps(f)
    def chosen(*args: Any, **kwargs: Any) -> Any:
        picked = [name for name in ("json", "nl", "csv") if kwargs.pop(f"as_{name}")]
        if len(picked) > 1:
            raise click.UsageError(
                "give one of --json, --nl and --csv", ctx=click.get_current_context(silent=True)
            )
        kwargs["form"] = picked[0] if picked else "table"
        return f(*args, **kwargs)

    wrapped = click.option("--csv", "as_csv", is_flag=True, help="Print CSV (one row a line).")(
        cast(F, chosen)
    )
    wrapped = click.option(
        "--nl", "as_nl", is_flag=True, help="Print newline-delimited JSON (one object a line)."
    )(wrapped)
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON array.")(wrapped)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return format_time_us(value)
    if isinstance(value, dict | list | tuple):
        return inert_json(json.dumps(value, ensure_ascii=False, default=_default))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return csv_cell(str(value))


def emit_listing(
    rows: Iterable[Mapping[str, Any]], form: str, columns: Sequence[str], *, header: bool = True
) -> int:
    """Print ``rows`` as a JSON array, NDJSON or CSV (``columns`` is the CSV header and
    order, printed unless ``header=False``; nested values are JSON in their cell),
    streaming; return how many there were. A JSON array is closed even when reading
    fails midway, so standard output stays parseable (the command still exits 1)."""
    count = 0
    if form == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        if header:
            writer.writerow(columns)
            click.echo(buffer.getvalue(), nl=False)
        for row in rows:
            buffer.seek(0)
            buffer.truncate()
            writer.writerow([_cell(row.get(c)) for c in columns])
            click.echo(buffer.getvalue(), nl=False)
            count += 1
        return count
    if form == "nl":
        for row in rows:
            click.echo(inert_json(json.dumps(row, ensure_ascii=False, default=_default)))
            count += 1
        return count
    click.echo("[", nl=False)
    try:
        for row in rows:
            text = inert_json(json.dumps(row, indent=2, ensure_ascii=False, default=_default))
            click.echo(("\n" if not count else ",\n") + "  " + text.replace("\n", "\n  "), nl=False)
            count += 1
    finally:  # a read that fails midway still leaves a JSON array (the error: stderr, exit 1)
        click.echo("\n]" if count else "]")
    return count


# --- ids by unique prefix --------------------------------------------------------------


def resolve_run(reader: Reader, given: str) -> str:
    """The run id ``given`` names: itself when the ledger holds it, else the one run id
    it is a unique prefix of. ``RunNotFound`` when none, a usage error when several."""
    if next(iter(reader.events(run_id=given, limit=1)), None) is not None:
        return given
    if not given:
        raise RunNotFound("no events outside any run are stored (see `ledger runs`)")
    found = [r.run_id for r in reader.runs() if r.run_id.startswith(given)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise RunNotFound(f"no run id is or starts with {given!r} (see `ledger runs`)")
    shown = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "")
    raise click.UsageError(f"run id prefix {given!r} is ambiguous: {shown}")


def resolve_call(call_ids: Iterable[str], given: str, run_id: str) -> str:
    """The call id ``given`` names among ``call_ids`` (itself, or the one it is a unique
    prefix of); ``CallNotFound`` when none, a usage error when several."""
    ids = list(dict.fromkeys(c for c in call_ids if c))
    if given in ids:
        return given
    found = [c for c in ids if given and c.startswith(given)]
    if len(found) == 1:
        return found[0]
    if not found:
        known = ", ".join(repr(c) for c in ids) or "none"
        raise CallNotFound(
            f"call id {given!r} has no action in run {run_id!r} (call ids present: {known})"
        )
    raise click.UsageError(f"call id prefix {given!r} is ambiguous: {', '.join(found)}")
