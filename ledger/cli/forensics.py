"""Forensics commands: ``runs``, ``chain``, ``why``, ``events``, ``drift``.

Each is a thin layer over a reader call (``Reader.runs``, ``Reader.chain``,
``Chain.why``, ``Reader.events``, ``verify_refs``); ``--json`` prints the machine form.
``ledger events --json`` prints one JSON array of events in the reference's JSON;
``--nl`` prints them as JSON Lines (one event a line).
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import click
from rich.cells import cell_len
from rich.markup import escape
from rich.tree import Tree

from ledger.adapters.mcp.definitions import DefinitionResolver
from ledger.chain import Chain
from ledger.chain.explain import clip, gate_text
from ledger.chain.parts import UNINTENDED
from ledger.chain.views import (
    available_count,
    erased_reads,
    event_dict,
    outcome_text,
    ref_text,
)
from ledger.cli.common import (
    db_option,
    emit_json,
    emit_listing,
    human_time,
    json_option,
    listing_options,
    narrow_table,
    open_db,
    parse_event_id,
    resolve_call,
    resolve_run,
    short_hash,
    stdout,
    window_options,
)
from ledger.drift import RefCheck, Resolver, chain_refs, content_hash, verify_refs
from ledger.errors import RunNotFound
from ledger.model.erasure import erased_text, request_shown
from ledger.model.event import Event
from ledger.model.shown import one_line
from ledger.model.values import Kind, RefSource, Verdict
from ledger.report.model import run_dict
from ledger.sinks import Reader
from ledger.timefmt import format_time

__all__ = ["chain_tree", "register"]

_STATE_STYLE = {"intact": "green", "drifted": "red", "missing": "red", "erased": "cyan",
                "unverifiable": "yellow"}  # fmt: skip
REASON_CLIP = 400  # a reason in the tree is cut only past this (`ledger why` shows it all)
_OUTCOME_STYLE = {
    "succeeded": "green", "failed": "red", "denied": "red", "no_result": "yellow",
    "erased": "cyan",
}  # fmt: skip


def _span(first: datetime, last: datetime) -> str:
    """``2026-11-30 14:44:44 → 14:45:02`` (the date again only when it changed)."""
    start, end = human_time(first), human_time(last)
    if end[:10] == start[:10]:
        end = end[11:]
    return f"{start} → {end}"


RUN_COLUMNS = ("run_id", "first_time", "last_time", "events", "actions", "denials",
               "errors", "ended")  # fmt: skip


@click.command(short_help="One row per run: time span, actions, denials, errors.")
@db_option
@window_options
@click.option("--limit", type=click.IntRange(min=0), help="At most this many runs.")
@click.option("--newest", is_flag=True, help="Newest runs first (with --limit: the latest).")
@listing_options
def runs(db: str, since: Any, until: Any, limit: int | None, newest: bool, form: str) -> None:
    """One row per run: time span, actions, denials, errors, whether it ended."""
    with open_db(db) as reader:
        found = list(reader.runs(since=since, until=until, limit=limit, newest=newest))
    if form != "table":
        emit_listing((run_dict(s) for s in found), form, RUN_COLUMNS)
        return
    table = narrow_table(f"{len(found)} run(s), times in UTC")
    table.add_column("run", no_wrap=True, min_width=26)
    table.add_column("time span", min_width=10)
    for name in ("events", "actions", "denials", "errors", "ended"):
        table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
    for s in found:
        table.add_row(
            _text(s.run_id),
            _span(s.first_time, s.last_time),
            str(s.events),
            str(s.actions),
            f"[red]{s.denials}[/]" if s.denials else "0",
            f"[red]{s.errors}[/]" if s.errors else "0",
            "yes" if s.ended else "[yellow]no[/]",
        )
    stdout().print(table)


def _text(value: str) -> str:
    """Recorded text for the terminal: one line (a line break or another character that
    does not print shown escaped, so no recorded text forges a line or reaches the
    terminal as a control sequence), with no rich markup."""
    return escape(one_line(value))


def chain_tree(chain: Chain) -> Tree:
    """The rich tree of one chain: request, available, actions, anomalies (the same
    content as :meth:`Chain.render`, in colour)."""
    tree = Tree(f"[bold]run {_text(chain.run_id)}[/] ({len(chain.events)} events)")
    actor = chain.to_dict()["actor"]
    if actor:
        tree.add(f"[bold]acting for[/]: {_text(actor.get('principal') or '(no principal)')}")
    decisions = {e.call_id: e for e in reversed(chain.events) if e.kind is Kind.GATE_DECISION}
    req = chain.request
    text = clip(request_shown(req), 120) if req else "[red](missing)[/]"
    tree.add(f"[bold]request[/]: {_text(text) if req else text}")
    gone_reads = erased_reads(chain.events)  # retrieved items whose refs were erased
    avail = tree.add(f"[bold]available[/] ({available_count(chain.available, gone_reads)})")
    for ref in chain.available:
        avail.add(_text(ref_text(ref, chain.events, short=True)))
    for text in gone_reads:
        avail.add(_text(text))
    acts = tree.add(f"[bold]actions[/] ({len(chain.actions)})")
    for a in chain.actions:
        style = _OUTCOME_STYLE.get(a.outcome, "white")
        verdict = str(a.verdict) if a.verdict else "no verdict"
        shown = (
            f"[{style}]{verdict}[/]" if a.denied else f"{verdict} → [{style}]{outcome_text(a)}[/]"
        )
        node = acts.add(f"[bold]{_text(a.tool or '?')}[/] call {_text(a.call_id or '?')}: {shown}")
        reason = clip(erased_text(a.intent, "reason") or a.intent.reason, REASON_CLIP)
        reason = reason or "(none recorded)"
        node.add(f"reason: {_text(reason)}")
        decision = decisions.get(a.call_id)
        approval = a.intent.approval or (decision.approval if decision else None)
        if approval is not None:
            when = f" at {format_time(approval.time)}" if approval.time else ""
            why = f": {approval.reason}" if approval.reason else ""
            node.add(f"approved by: {_text(approval.approver + when + why)}")
        elif gone := erased_text(a.intent, "approval") or erased_text(decision, "approval"):
            node.add(f"approved by: {_text(gone)}")
        args = erased_text(a.intent, "args") or a.intent.args or "(none)"
        node.add(f"args: {_text(clip(args, 120))}")
        for ref in a.evidence:
            node.add(f"evidence: {_text(ref_text(ref, chain.events, short=True))}")
        gone = erased_text(a.intent, "refs")
        if gone and not a.evidence:  # erased evidence reads as erased, not as none
            node.add(f"evidence: {_text(gone)}")
        if a.result is not None:
            body = erased_text(a.result, "result", "err") or a.result.err
            body = body or clip(a.result.result, 120)
            node.add(f"result: {_text(body)}")
    if chain.anomalies:
        anomalies = tree.add(f"[bold red]anomalies[/] ({len(chain.anomalies)})")
        for x in chain.anomalies:
            anomalies.add(f"[red]{_text(str(x))}[/]")
    else:
        tree.add("[green]no anomalies[/]")
    return tree


def _chain(reader: Reader, run_id: str) -> Chain:
    chain = reader.chain(resolve_run(reader, run_id))
    if not chain.events:  # a reader that predates RunNotFound
        raise RunNotFound(f"no events recorded for run {run_id!r} (see `ledger runs`)")
    return chain


@click.command(short_help="A run: request, what was available, actions, anomalies.")
@click.argument("run_id")
@db_option
@json_option
def chain(run_id: str, db: str, as_json: bool) -> None:
    """A run's chain: request, what was available, each action, anomalies."""
    with open_db(db) as reader:
        found = _chain(reader, run_id)
    if as_json:
        emit_json(found.to_dict())
    else:
        stdout().print(chain_tree(found))


@click.command(short_help="One action explained backward, back to the request.")
@click.argument("run_id")
@click.argument("call_id")
@db_option
@json_option
def why(run_id: str, call_id: str, db: str, as_json: bool) -> None:
    """One action explained backward: verdict, reason, evidence, the request."""
    with open_db(db) as reader:
        found = _chain(reader, run_id)
    call = resolve_call(
        [*(a.call_id for a in found.actions), *(e.call_id for e in found.events)],
        call_id,
        found.run_id,
    )
    if not any(a.call_id == call for a in found.actions):
        _why_not_an_action(found, call, as_json)
        return
    explanation = found.why(call)
    if as_json:
        emit_json(explanation.to_dict())
    else:
        click.echo(explanation.render(stdout().width))


def _why_not_an_action(chain: Chain, call: str, as_json: bool) -> None:
    """``ledger why`` of a call that has no action: a safe read (or a result that ran
    without an intent): what the gate decided, what it returned, and whether the chain
    flags it."""
    events = [e for e in chain.events if e.call_id == call]
    decision = next((e for e in events if e.kind is Kind.GATE_DECISION), None)
    result = next((e for e in events if e.kind is Kind.TOOL_RESULT), None)
    flagged = [str(x) for x in chain.anomalies if x.call_id == call]
    tool = next((e.tool for e in events if e.tool), "?")
    covered = not any(x.code in UNINTENDED for x in chain.anomalies if x.call_id == call)
    what = "a safe read" if covered and decision is not None else "a result without an intent"
    if as_json:
        emit_json(
            {
                "run_id": chain.run_id,
                "call_id": call,
                "tool": tool,
                "kind": "safe_read" if what == "a safe read" else "unintended_result",
                "decision": (
                    {
                        "verdict": str(decision.verdict or ""),
                        "reason": decision.reason,
                        "policy": decision.label,
                        **({"erased": d.to_dict()} if (d := decision.erased) else {}),
                    }
                    if decision
                    else None
                ),
                "result": event_dict(result) if result is not None else None,
                "anomalies": flagged,
            }
        )
        return
    lines = [f"{tool} (call {call}) in run {chain.run_id}: {what}, no action committed"]
    if decision is not None:
        lines.append(f"  gate:     {gate_text(decision)}")
    else:
        lines.append("  gate:     no decision recorded")
    if result is not None:
        body = erased_text(result, "result", "err") or result.err or clip(result.result, 200)
        body = body or "(empty)"
        lines.append(f"  result:   {body} (event {result.event_id})")
        if result.result is not None:
            lines.append(
                f"  hash:     {content_hash(result.result)} (what a citing action's ref holds)"
            )
    lines.extend(f"  anomaly:  {x}" for x in flagged)
    click.echo("\n".join(map(one_line, lines)))


@click.command(short_help="Events filtered by run, kind, tool, verdict, time.")
@db_option
@click.option("--run", "run_id", metavar="RUN_ID", help="Only this run.")
@click.option("--kind", type=click.Choice([k.value for k in Kind]), help="Only this kind.")
@click.option("--tool", help="Only this tool.")
@click.option("--verdict", type=click.Choice([v.value for v in Verdict]), help="Only this verdict.")
@window_options
@click.option(
    "--after",
    metavar="EVENT_ID",
    callback=lambda ctx, param, value: parse_event_id(value, "--after"),
    help="Only events committed after this one.",
)
@click.option("--limit", type=click.IntRange(min=0), default=1000, show_default=True)
@click.option(
    "--follow", "-f", is_flag=True,
    help="Keep printing new events as they are committed (NDJSON unless --json/--csv...).",
)  # fmt: skip
@click.option("--interval", type=click.FloatRange(min=0.05), default=0.5, show_default=True,
              help="Seconds between looks for new events with --follow.")  # fmt: skip
@listing_options
def events(
    db: str,
    run_id: str | None,
    kind: str | None,
    tool: str | None,
    verdict: str | None,
    since: Any,
    until: Any,
    after: str | None,
    limit: int,
    follow: bool,
    interval: float,
    form: str,
) -> None:
    """Events filtered by run, kind, tool, verdict and time window (commit order).

    With --follow, print every matching event, then each new one as it is committed, in
    commit order and without a gap, until interrupted (Ctrl-C)."""
    if run_id is not None:  # a unique prefix names its run, as for `ledger chain`
        run_id = _events_run(db, run_id, follow=follow)
    filters = {"run_id": run_id, "kind": kind, "tool": tool, "verdict": verdict,
               "since": since, "until": until}  # fmt: skip
    if follow:
        _follow(db, filters, after, "nl" if form == "table" else form, interval)
        return
    with open_db(db) as reader:
        listed = _Listed(
            reader.events(
                run_id=run_id,
                kind=kind,
                tool=tool,
                verdict=verdict,
                since=since,
                until=until,
                after=after,
                limit=limit + 1,  # one past it: is there more?
            ),
            limit,
        )
        found = iter(listed)
        if form != "table":
            csv = form == "csv"
            shape = csv_event_dict if csv else event_dict
            emit_listing(map(shape, found), form, CSV_EVENT_COLUMNS if csv else EVENT_COLUMNS)
            if listed.more and listed.last:  # stdout holds the events alone: say it on stderr
                click.echo(
                    f"limit reached ({limit} events): continue with --after {listed.last}, "
                    "or give a larger --limit",
                    err=True,
                )
            return
        table = narrow_table()
        table.add_column("time", overflow="fold")
        if run_id is None:
            table.add_column("run", overflow="fold")
        table.add_column("kind", no_wrap=True)
        table.add_column("call", overflow="fold")
        table.add_column("tool", overflow="fold")
        table.add_column("verdict", no_wrap=True)
        # fold, and no min_width: rich renders a cell at its min_width and then crops it
        # to the column, which dropped letters at each wrap ("dangerous sh / command refu")
        table.add_column("detail", ratio=1, overflow="fold")
        count, last = 0, ""
        for e in found:
            count += 1
            last = str(e.event_id)
            detail = clip(_detail(e), 60)
            cells = [human_time(e.time)]
            cells += [_text(e.run_id)] if run_id is None else []
            cells += [
                str(e.kind),
                _text(e.call_id),
                _text(e.tool),
                str(e.verdict or ""),
                _text(detail),
            ]
            table.add_row(*cells)
        where = f" of run {_text(run_id)}" if run_id is not None else ""
        table.title = f"{count} event(s){where}, times in UTC"
        table.min_width = cell_len(table.title)  # a title wider than the columns stays whole
    console = stdout()
    console.print(table)
    if listed.more and last:
        console.print(f"limit reached: continue with --after {last}")
    elif count:
        console.print(f"last event {last} (tail with --after {last})")


class _Listed:
    """The first ``limit`` of ``events`` (read with a limit one past it); ``more`` is
    True once the one past the limit was read, ``last`` the last id listed."""

    def __init__(self, events: Iterable[Event], limit: int) -> None:
        self._events, self._limit = events, limit
        self.more, self.last = False, ""

    def __iter__(self) -> Iterator[Event]:
        for count, event in enumerate(self._events):
            if count == self._limit:
                self.more = True
                return
            self.last = str(event.event_id)
            yield event


def _events_run(db: str, given: str, *, follow: bool) -> str:
    """The run ``--run`` names, resolved as ``ledger chain`` resolves it. With
    ``--follow`` a run id the ledger does not hold yet is followed exactly as given
    (a run may be given its id before it starts), with a note on standard error."""
    with open_db(db) as reader:
        try:
            return resolve_run(reader, given)
        except RunNotFound as exc:
            if not follow or not given:
                raise
            click.echo(f"ledger: note: {exc}; waiting for events of run {given!r}", err=True)
            return given


EVENT_COLUMNS = ("event_id", "run_id", "call_id", "time", "kind", "tool", "label", "verdict",
                 "reason", "args", "result", "err", "duration_ms", "agent_path", "preview",
                 "refs", "actor", "approval")  # fmt: skip
CSV_EVENT_COLUMNS = (*EVENT_COLUMNS, "erased")
"""``ledger events --csv``: the event columns, then ``erased`` (the tombstone's ``erased``
member as JSON, empty for an event nothing was erased from)."""


def csv_event_dict(e: Event) -> dict[str, Any]:
    """An event as a CSV row: :func:`event_dict`, each erased field's cell
    ``[erased: <reason>]`` (an erased field is never an empty cell)."""
    row = event_dict(e)
    gone = e.erased
    if gone is not None:
        row.update({name: erased_text(e, name) for name in gone.fields})
    return row


def _follow(
    db: str, filters: dict[str, Any], after: str | None, form: str, interval: float
) -> None:
    """Print matching events, then new ones as they commit. The cursor is the last event
    seen (``after=``), so each look starts where the last ended: commit order, no gap,
    nothing twice."""
    import time

    cursor = after
    header = form == "csv"
    try:
        with open_db(db) as reader:
            while True:
                batch = list(reader.events(**filters, after=cursor, limit=1000))
                if batch:
                    if form == "csv":
                        rows = map(csv_event_dict, batch)
                        emit_listing(rows, "csv", CSV_EVENT_COLUMNS, header=header)
                    else:
                        emit_listing(map(event_dict, batch), "nl", EVENT_COLUMNS)
                    header = False
                    cursor = str(batch[-1].event_id)
                    if len(batch) == 1000:
                        continue
                sys.stdout.flush()
                time.sleep(interval)
    except KeyboardInterrupt:
        return


class _Resolvers:
    """Several resolvers as one, each answering for its own sources."""

    def __init__(self, resolvers: Collection[Resolver]) -> None:
        self._by_source: Mapping[RefSource, Resolver] = {s: r for r in resolvers for s in r.sources}
        self.sources: Collection[RefSource] = frozenset(self._by_source)

    def current_hash(self, source: RefSource, id: str) -> str | None:
        return self._by_source[source].current_hash(source, id)


def _ledger_resolver(config: Path, store: Path) -> Resolver:
    from ledger.cli.typed import load_config
    from ledger.typed.resolver import LedgerResolver
    from ledger.typed.store import ShardStore

    parsed = load_config(config)
    return LedgerResolver(ShardStore(store, parsed), parsed)


def check_dict(c: RefCheck) -> dict[str, Any]:
    """One ref check with stable field names."""
    return c.ref.to_dict() | {
        "state": str(c.state),
        "current_hash": c.current_hash,
        "detail": c.detail,
    }


@click.command(short_help="Is a run's evidence still what it was (intact or drifted)?")
@click.argument("run_id")
@db_option
@click.option(
    "--config", type=click.Path(path_type=Path, dir_okay=False), help="Typed-ledger config (YAML)."
)
@click.option(
    "--store",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Typed-ledger store directory.",
)
@listing_options
def drift(run_id: str, db: str, config: Path | None, store: Path | None, form: str) -> None:
    """Is the evidence of a run still what it was? Each ref: intact, drifted, missing,
    erased, unverifiable. Tool refs resolve in the ledger; ledger refs need --config and
    --store.

    Exits with status 1 when any ref drifted or is missing (erased refs, whose cited
    content retention removed, and unverifiable refs are listed but do not fail), so a
    cron job or CI step notices."""
    if (config is None) != (store is None):
        raise click.UsageError("--config and --store go together (typed-ledger refs)")
    with open_db(db) as reader:
        # tool refs: recorded results, and MCP tool definitions (mcp-tool:<server>/<tool>)
        resolvers: list[Resolver] = [cast(Resolver, DefinitionResolver(reader))]
        if config is not None and store is not None:
            resolvers.append(_ledger_resolver(config, store))
        found = _chain(reader, run_id)
        checks = verify_refs(chain_refs(found), _Resolvers(resolvers))
    failed = sum(str(c.state) in ("drifted", "missing") for c in checks)
    if form != "table":
        emit_listing(map(check_dict, checks), form, DRIFT_COLUMNS)
        if failed:
            raise SystemExit(1)
        return
    table = narrow_table(f"{len(checks)} ref(s) of run {_text(found.run_id or run_id)}")
    table.add_column("state", no_wrap=True)
    table.add_column("source", no_wrap=True)
    table.add_column("id", overflow="fold")
    table.add_column("captured hash", no_wrap=True)
    table.add_column("detail", ratio=1, overflow="fold")
    for c in checks:
        style = _STATE_STYLE[str(c.state)]
        table.add_row(
            f"[{style}]{c.state}[/]",
            _text(str(c.ref.source)),
            _text(c.ref.id),
            short_hash(c.ref.hash) or "-",
            _text(c.detail),
        )
    console = stdout()
    console.print(table)
    for a in found.actions:  # evidence erased with the action's refs: say so, not "none"
        gone = erased_text(a.intent, "refs")
        if gone and not a.evidence:
            console.print(f"evidence of {_text(a.tool or '?')} call "
                          f"{_text(a.call_id or '?')}: {_text(gone)}")  # fmt: skip
    if failed:
        click.echo(f"{failed} ref(s) drifted or missing", err=True)
        raise SystemExit(1)


def _detail(e: Event) -> str:
    """What the events table shows of an event: its error, reason, result, args or
    preview, the first it has; an erased one as ``[erased: <reason>]`` in its place, so
    a field-level erasure of ``args`` leaves a denial's reason readable."""
    for name in ("err", "reason", "result", "args", "preview"):
        text: str = erased_text(e, name) or getattr(e, name) or ""
        if text:
            return text
    return ""


DRIFT_COLUMNS = ("state", "source", "id", "hash", "current_hash", "detail")


def register(group: click.Group) -> None:
    """Add the forensics commands to ``group``."""
    for command in (runs, chain, why, events, drift):
        group.add_command(command)
