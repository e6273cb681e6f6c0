"""The ``ledger`` command (also ``python -m ledger``).

::

    ledger demo                       # a scripted agent run into ./ledger.db, then its chain
    ledger runs                       # one row per run
    ledger chain RUN_ID               # request, available, actions, anomalies
    ledger why RUN_ID CALL_ID         # one action explained backward
    ledger events --run RUN_ID --kind action
    ledger drift RUN_ID               # are the refs still intact?
    ledger report --since 2026-01-01 --format html -o report.html
    ledger typed check ledger.yaml
    ledger db check sqlite:///ledger.db
    ledger ui --db sqlite:///ledger.db  # a read-only web viewer on 127.0.0.1

Every command is a thin layer over a library call; see ``docs/cli.md``. Errors (a wrong
URL, a missing file, a locked database, a bad config) print one line on standard error
and exit with status 1 (2 for a usage error); ``--debug`` (or ``LEDGER_DEBUG=1``) shows
the traceback instead.
"""

from __future__ import annotations

import importlib.metadata
import io
import logging
import os
import re
import sys
from collections.abc import Sequence

import click

from ledger.cli import db as cli_db
from ledger.cli import demo as cli_demo
from ledger.cli import export as cli_export
from ledger.cli import forensics as cli_forensics
from ledger.cli import integrity as cli_integrity
from ledger.cli import mcp as cli_mcp
from ledger.cli import report as cli_report
from ledger.cli import retention as cli_retention
from ledger.cli import typed as cli_typed
from ledger.cli import ui as cli_ui
from ledger.model.shown import one_line

__all__ = ["cli", "main"]

EXIT_ERROR = 1
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `cat` in the same place


def _version() -> str:
    """The installed distribution's version ("unknown" when run from a bare checkout)."""
    try:
        return importlib.metadata.version("agentledger")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass


class _HeldWarnings(logging.Handler):
    """Holds log records while a command runs: shown after it succeeds, dropped when it
    fails, so that a failure is one line on stderr (``--debug`` shows everything live)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(logging.Formatter("ledger: %(levelname)s: %(message)s"))
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def flush_held(self) -> None:
        for record in self.records:
            click.echo(" ".join(self.format(record).split()), err=True)
        self.records.clear()


def _hold_warnings() -> _HeldWarnings:
    """Route warnings into a holder (not when debugging: then they go out as they come)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _HeldWarnings):
            root.removeHandler(handler)
    held = _HeldWarnings()
    root.addHandler(held)
    root.setLevel(logging.WARNING)
    return held


class LedgerGroup(click.Group):
    """The root group: any error below it becomes one line on stderr and exit status 1."""

    def invoke(self, ctx: click.Context) -> object:
        debugging = bool(ctx.params.get("debug")) or _debugging()
        held = None if debugging else _hold_warnings()
        try:
            # click 8.2 keeps the subcommand's name in _protected_args (its property warns)
            protected = getattr(ctx, "_protected_args", None)
            if protected is None:  # click 8.1
                protected = ctx.protected_args
            refuse_repeated_options(ctx, self, [*protected, *ctx.args])
            value = super().invoke(ctx)
        except click.ClickException as exc:
            if isinstance(exc, click.UsageError):  # click's own form: usage, hint, error
                if held is not None:
                    held.flush_held()
                shown = _tidy(exc.format_message())  # it may quote a run id, a call id
                if shown == exc.format_message():
                    raise
                raise click.UsageError(shown, ctx=exc.ctx) from None
            # a command's own failure (a missing extra...): the one line every error is
            click.echo(f"ledger: error: {_tidy(exc.format_message())}", err=True)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.exceptions.Abort):
            if held is not None:
                held.flush_held()
            raise
        except BrokenPipeError:  # `ledger events --json | head`: stop quietly, as cat does
            _silence_stdout()
            ctx.exit(EXIT_BROKEN_PIPE)
        except SystemExit:
            if held is not None:
                held.flush_held()
            raise
        except Exception as exc:
            if ctx.params.get("debug") or _debugging():
                raise
            click.echo(f"ledger: error: {error_line(exc)}", err=True)
            ctx.exit(EXIT_ERROR)
        finally:
            if held is not None:
                logging.getLogger().removeHandler(held)
        if held is not None:
            held.flush_held()
        return value


def refuse_repeated_options(ctx: click.Context, group: click.Group, args: list[str]) -> None:
    """A usage error when the command ``args`` name (below ``group``) is given an option
    that takes one value more than once: click keeps the last and drops the others, so
    ``ledger erase --db A --db B`` would act on B and ``--reason a --reason b`` would
    record b without a word. Flags, counts and options that take several values
    (``multiple``) may repeat. Arguments click cannot parse are left to its own parse,
    which says what is wrong with them."""
    if any(arg in ("-h", "--help") for arg in args):
        return  # help is shown whatever else the line holds
    command: click.Command = group
    parent = ctx
    while isinstance(command, click.Group) and args:
        name, found, args = command.resolve_command(parent, args)
        if found is None or name is None:
            return
        command = found
        parent = click.Context(command, info_name=name, parent=parent, resilient_parsing=True)
        try:
            _opts, rest, order = command.make_parser(parent).parse_args(args=list(args))
        except click.UsageError:
            return
        seen: dict[str, int] = {}
        for param in order:
            if (
                isinstance(param, click.Option)
                and not (param.multiple or param.count or param.is_flag)
                and param.name is not None
            ):
                seen[param.name] = seen.get(param.name, 0) + 1
                if seen[param.name] == 2:
                    shown = max(param.opts, key=len)
                    raise click.UsageError(
                        f"{shown} was given more than once; give it once (the command "
                        "would act on the last value alone)",
                        ctx=parent,
                    )
        args = rest


@click.group(
    cls=LedgerGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logging.")
@click.version_option(version=_version(), prog_name="ledger")
def cli(debug: bool) -> None:
    """The agent provenance ledger: what an agent did, why, and what it was stopped from
    doing."""
    if debug or _debugging():
        logging.basicConfig(
            level=logging.DEBUG, format="ledger: %(levelname)s: %(name)s: %(message)s"
        )


cli_demo.register(cli)
cli_forensics.register(cli)
cli_report.register(cli)
cli_typed.register(cli)
cli_db.register(cli)
cli_mcp.register(cli)
cli_integrity.register(cli)
cli_export.register(cli)
cli_ui.register(cli)
cli_retention.register(cli)


def _debugging() -> bool:
    return os.environ.get("LEDGER_DEBUG", "") not in ("", "0")


def error_line(exc: BaseException) -> str:
    """One line that says what went wrong, for any error the command can meet (with
    the notes added to it, such as what a failed copy left behind)."""
    notes = [_tidy(str(n)) for n in getattr(exc, "__notes__", ()) if str(n).strip()]
    line = _error_text(exc)
    return "; ".join([line, *notes])


def _error_text(exc: BaseException) -> str:
    try:
        import sqlalchemy.exc as sa_exc
    except ImportError:  # pragma: no cover - a dependency
        sa_exc = None  # type: ignore[assignment]
    if sa_exc is not None and isinstance(exc, sa_exc.DBAPIError):
        detail = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        return f"database error: {_tidy(detail)}"
    if sa_exc is not None and isinstance(exc, sa_exc.SQLAlchemyError):
        return f"database error: {_tidy(str(exc).splitlines()[0])}"
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    if isinstance(exc, UnicodeEncodeError):  # an argument of bytes that are not UTF-8
        return (
            f"{exc.object[exc.start : exc.end]!r} in {exc.object[:60]!r} is not UTF-8 text "
            "(an argument of bytes that are not UTF-8?); give it as UTF-8"
        )
    from ledger.errors import LedgerError

    text = _tidy(str(exc)) or type(exc).__name__
    if isinstance(exc, LedgerError):
        return text
    return f"internal error ({type(exc).__name__}): {text} (rerun with --debug for details)"


_BLANKS = re.compile(r"[ \t\n\r\f\v]+")
_SA_BACKGROUND = re.compile(r"\s*\(Background on this error at: [^)]*\)")
# "(psycopg.OperationalError) ": a driver's exception class, never "(notes.txt)"
_SA_PREFIX = re.compile(r"\((?:[A-Za-z_]\w*\.)+[A-Z]\w*(?:Error|Exception|Warning)\)\s*")


def _tidy(text: str) -> str:
    """One line without SQLAlchemy's "(Background on this error at: …)" link and
    "(psycopg.OperationalError)" class prefix: its line breaks and runs of blanks made
    one space, and any other character that would break the line, drive the terminal or
    reorder it shown escaped (:func:`~ledger.model.shown.one_line`: an error may quote
    recorded text, a hold's reason say)."""
    text = _SA_PREFIX.sub("", _SA_BACKGROUND.sub("", text))
    return one_line(_BLANKS.sub(" ", text).strip())


def main(args: Sequence[str] | None = None) -> None:
    """Entry point of the ``ledger`` console script and ``python -m ledger``."""
    cli.main(args=args, prog_name="ledger")
