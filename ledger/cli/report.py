"""``ledger report``: the compliance report, a thin layer over :func:`build_report`.

``--format table`` (default) prints a summary to the terminal; ``json``, ``csv`` and
``html`` print the document, or write it to ``--output FILE``. ``--strict`` makes the exit
status 3 when the report is not compliant (an action ran without a committed intent, or
a content hash mismatched), for use in scheduled jobs.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ledger.cli.common import (
    db_option,
    human_time,
    narrow_table,
    open_db,
    piped,
    progress,
    stdout,
    window_options,
)
from ledger.model.shown import inert_json, one_line
from ledger.report import ComplianceReport, build_report
from ledger.report.listing import LISTINGS, MAX_LISTED
from ledger.report.model import run_outcome
from ledger.report.render import csv_records
from ledger.timefmt import format_time_us

__all__ = ["print_summary", "register", "report"]

NOT_COMPLIANT = 3
MAX_ROWS = 50  # per detail table on the terminal


def _t(value: datetime | None) -> str:
    return human_time(value) if value is not None else "open"


def _window(r: ComplianceReport) -> str:
    if r.since is None and r.until is None:
        return "all records (no --since or --until)"
    if r.until is None:
        return f"from {_t(r.since)} on"
    if r.since is None:
        return f"everything before {_t(r.until)}"
    start, end = _t(r.since), _t(r.until)
    if start == end:  # a window shorter than a second (a demo run): show it whole
        start, end = format_time_us(r.since), format_time_us(r.until)
    return f"{start} to {end} (until exclusive)"


def _counts_table(r: ComplianceReport) -> Table:
    table = Table(title="Compliance report (times in UTC)", show_header=False)
    table.add_column("what", no_wrap=True)
    table.add_column("value")
    table.add_row("window", _window(r))
    held = f"{_t(r.oldest_record)} to {_t(r.newest_record)}" if r.oldest_record else "none"
    table.add_row("records held", held)
    counts = r.counts  # the listings hold the first 1,000 of each; these are whole
    ended = sum(x.ended for x in r.runs)
    among = "" if len(r.runs) == counts.runs else f" of the first {len(r.runs)} listed"
    table.add_row("runs", f"{counts.runs} ({ended} ended, {len(r.runs) - ended} open{among})")
    table.add_row("events", str(r.events))
    table.add_row("allowed actions", str(r.actions))
    table.add_row("denials", str(counts.denials))
    table.add_row("actions with no result", str(counts.missing_results))
    return table


def print_summary(r: ComplianceReport, console: Console, *, details: bool = True) -> None:
    """The human form of a report: counts, the two verdicts, then the detail tables."""
    console.print(_counts_table(r))
    style = "green" if not r.unsafe_without_intent else "bold red"
    # piped, each statement is one line however long (soft_wrap: rich inserts no line
    # break); on a terminal, or with COLUMNS set, it is folded to the width
    soft = piped()
    console.print(f"[{style}]{escape(r.unsafe_statement())}[/]", soft_wrap=soft)
    hc = r.hash_check
    hstyle = "green" if hc.available and not hc.mismatch_count else "yellow"
    if hc.mismatch_count:
        hstyle = "bold red"
    console.print(f"[{hstyle}]{escape(hc.summary())}[/]", soft_wrap=soft)
    lstyle = "green" if r.log_check is not None and r.log_check.ok else "bold red"
    console.print(
        f"[{lstyle if r.log_check is not None else 'yellow'}]{escape(r.log_statement())}[/]",
        soft_wrap=soft,
    )
    if r.retention is not None:
        for line in r.retention.lines(MAX_ROWS):
            console.print(escape(line), soft_wrap=soft)
    if not details:
        return
    _detail_tables(r, console)


def _detail_tables(r: ComplianceReport, console: Console) -> None:
    if r.runs:
        runs = narrow_table("Runs and their outcomes")
        runs.add_column("run", no_wrap=True, min_width=26)
        runs.add_column("started", min_width=10)
        for name in ("actions", "denials", "errors"):
            runs.add_column(name, justify="right", no_wrap=True)
        runs.add_column("outcome", min_width=5)
        for x in r.runs[:MAX_ROWS]:
            runs.add_row(
                _cell(x.run_id),
                _t(x.first_time),
                str(x.actions),
                str(x.denials),
                str(x.errors),
                _cell(run_outcome(x)),
            )
        console.print(runs)
        _say_more(console, r, "runs", "runs", min(len(r.runs), MAX_ROWS))
    if r.tools:
        tools = narrow_table("Actions per tool")
        for name in ("tool", "allowed", "denied", "succeeded", "failed", "safe reads"):
            tools.add_column(name, justify="left" if name == "tool" else "right")
        for t in r.tools:
            tools.add_row(
                _cell(t.tool or "(none)"),
                str(t.actions),
                str(t.denials),
                str(t.succeeded),
                str(t.failed),
                str(t.safe_reads),
            )
        console.print(tools)
    sections: list[tuple[str, str, list[tuple[str, ...]]]] = [
        (
            "Denials",
            "denials",
            [(_t(d.time), d.run_id, d.call_id, d.tool, d.reason) for d in r.denials],
        ),
        (
            "Actions with no recorded result",
            "missing_results",
            [(_t(f.time), f.run_id, f.call_id, f.tool, f.detail) for f in r.missing_results],
        ),
        (
            "Ran without a committed intent",
            "unsafe_without_intent",
            [(_t(f.time), f.run_id, f.call_id, f.tool, f.detail) for f in r.unsafe_without_intent],
        ),
    ]
    for title, name, rows in sections:
        if rows:
            console.print(_rows_table(title, rows))
        _say_more(console, r, name, title.lower(), min(len(rows), MAX_ROWS))
    mismatches: list[tuple[str, ...]] = [
        ("", m.run_id, m.event_id, "", m.detail) for m in r.hash_check.mismatches
    ]
    if mismatches:
        console.print(_rows_table("Content-hash mismatches", mismatches))
    hidden = r.hash_check.mismatch_count - min(len(mismatches), MAX_ROWS)
    if hidden > 0:
        console.print(f"… and {hidden} more content-hash mismatches (`ledger verify` lists them)")


def _say_more(console: Console, r: ComplianceReport, name: str, what: str, shown: int) -> None:
    """The line under a table that shows only its first ``shown`` items: how many more
    the window holds, and where they are listed (the other formats list the first
    ``--listed`` items, :data:`~ledger.report.listing.MAX_LISTED` by default; the command,
    the same report with every item listed, lists every one)."""
    total = int(r.counts.to_dict()[name])
    if total <= shown:
        return
    listed = len(getattr(r, name))
    command = r.listing()["full"].get(name)
    where = (
        f"`{command}` lists them all (its `{LISTINGS[name]}`)"
        if command
        else "--format json, csv or html lists them all"
    )
    if command and listed > shown:
        where = f"--format json, csv or html lists the first {listed}; {where}"
    console.print(_cell(f"… and {total - shown} more {what} ({where})"))


def _cell(value: str) -> str:
    """Recorded text for a table cell or a line: one line (a line break or another
    character that does not print shown escaped, so no recorded text forges a line of
    the report or reaches the terminal as a control sequence) and no rich markup."""
    return escape(one_line(value))


def _rows_table(title: str, rows: list[tuple[str, ...]]) -> Table:
    table = narrow_table(title)
    table.add_column("time", min_width=10)
    table.add_column("run", overflow="fold")
    table.add_column("call / event", overflow="fold")
    table.add_column("tool", overflow="fold")
    table.add_column("reason / detail", ratio=1, overflow="fold")
    for row in rows[:MAX_ROWS]:
        table.add_row(*(_cell(v) for v in row))
    return table


@click.command(short_help="Compliance report: table, json, csv or html.")
@db_option
@window_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "csv", "html"]),
    default="table",
    show_default=True,
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report to this file instead of standard output.",
)
@click.option("--strict", is_flag=True, help=f"Exit with status {NOT_COMPLIANT} if not compliant.")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--nl", "as_nl", is_flag=True, help="The CSV rows as newline-delimited JSON.")
@click.option("--csv", "as_csv", is_flag=True, help="Same as --format csv.")
@click.option(
    "--listed",
    type=click.IntRange(min=0),
    default=MAX_LISTED,
    show_default=True,
    metavar="N",
    help="How many items each listing (runs, denials, missing results, ...) holds, the "
    "first in time order; its count is always whole. Memory grows with N.",
)
def report(
    db: str,
    since: Any,
    until: Any,
    fmt: str,
    output: Path | None,
    strict: bool,
    as_json: bool,
    as_nl: bool,
    as_csv: bool,
    listed: int,
) -> None:
    """Compliance report: runs, actions per tool, denials, approved actions and who
    approved them, actions and denials per agent and principal, missing results, actions
    without a committed intent, records held, and a content-hash check."""
    picked = [f for f, on in (("json", as_json), ("nl", as_nl), ("csv", as_csv)) if on]
    if len(picked) > 1 or (picked and fmt != "table"):
        raise click.UsageError("give one output form: --format, --json, --nl or --csv")
    fmt = picked[0] if picked else fmt
    with open_db(db) as reader, progress("reading events") as update:
        r = build_report(
            reader, since=since, until=until, progress=update, ledger=db, listed=listed
        )
    if fmt == "table" and output is None:
        print_summary(r, stdout())
    elif fmt == "table":
        assert output is not None
        with output.open("w", encoding="utf-8") as handle:
            print_summary(r, Console(file=handle, width=160))
    elif output is not None:
        output.write_text(_render(r, fmt), encoding="utf-8")
        click.echo(f"wrote {fmt} report to {output}", err=True)
    else:
        click.echo(_render(r, fmt), nl=False)
    if strict and not r.compliant:
        raise SystemExit(NOT_COMPLIANT)


def _render(r: ComplianceReport, fmt: str) -> str:
    """The report as ``json``, ``csv`` or ``html`` text."""
    if fmt == "csv":
        return r.to_csv()
    if fmt == "nl":  # the CSV's rows, their recorded text exact (JSON escapes it)
        rows = csv_records(r)
        return "".join(inert_json(json.dumps(row, ensure_ascii=False)) + "\n" for row in rows)
    if fmt == "html":
        return r.to_html()
    return inert_json(json.dumps(r.to_dict(), indent=2, ensure_ascii=False)) + "\n"


def register(group: click.Group) -> None:
    """Add ``report`` to ``group``."""
    group.add_command(report)
