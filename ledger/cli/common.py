"""Shared pieces of the ``ledger`` command: options, output, time parsing.

Every command that reads or writes provenance takes ``--db URL`` (environment variable
``LEDGER_DB``; default ``sqlite:///ledger.db``, the file ``./ledger.db``). ``--json``
prints machine output with stable field names; human output goes through rich, which
drops colour and animation when the output is not a terminal.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast

import click
from rich import box
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ledger.errors import ValidationError
from ledger.sinks import Reader, open_reader
from ledger.timefmt import format_time, parse_time

__all__ = [
    "DEFAULT_DB",
    "check_window",
    "db_option",
    "emit_json",
    "human_time",
    "json_option",
    "narrow_table",
    "open_db",
    "parse_when",
    "progress",
    "short_hash",
    "stdout",
    "window_options",
]

DEFAULT_DB = "sqlite:///ledger.db"
_PIPE_WIDTH = 160
F = TypeVar("F", bound=Callable[..., Any])

_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def stdout() -> Console:
    """A rich console on standard output: plain text, 160 columns wide, when piped (or
    ``COLUMNS`` wide when set)."""
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else _PIPE_WIDTH
    return Console(highlight=False, width=width)


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


def json_option(f: F) -> F:
    """The ``--json`` flag."""
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(f)


def parse_when(text: str | None, *, now: datetime | None = None) -> datetime | None:
    """A time given on the command line: RFC 3339 (``2026-01-02T03:04:05Z``), a date
    (``2026-01-02``, midnight UTC) or an age (``30m``, ``24h``, ``7d``, ``2w`` ago)."""
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
    if re.fullmatch(r"\d{4}-\d\d-\d\d", text):
        try:
            return datetime.fromisoformat(text).replace(tzinfo=UTC)
        except ValueError:
            pass
    try:
        return parse_time(text, field="time")
    except ValidationError:
        raise click.BadParameter(
            f"{text!r}: give an RFC 3339 time (2026-01-02T03:04:05Z), a date (2026-01-02) "
            "or an age (30m, 24h, 7d, 2w)"
        ) from None


def _when(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    # one "now" per command, so `--since 1d --until 1d` is the empty window it says
    now = ctx.find_root().meta.setdefault("ledger.now", datetime.now(UTC))
    return parse_when(value, now=now)


def check_window(since: datetime | None, until: datetime | None) -> None:
    """A usage error (exit 2) when ``--since`` is not before ``--until``: such a window
    holds nothing, and an empty report must not pass for a compliant one."""
    if since is not None and until is not None and since >= until:
        raise click.UsageError(
            f"empty time window: --since {format_time(since)} is not before --until "
            f"{format_time(until)} (since is inclusive, until exclusive)",
            ctx=click.get_current_context(silent=True),
        )


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
        return format_time(value)
    return str(value)


def emit_json(value: object) -> None:
    """Print ``value`` as indented JSON (times in RFC 3339, UTC)."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=_default))


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
