"""The runs list (``/``): filters, one page of runs, the way to the next page.

Query parameters: ``since``, ``until`` (times or ages, see
:mod:`ledger.viewer.params`), ``tool``, ``verdict`` (allowed, denied, needs_approval),
``agent``, ``principal``, ``q`` (free text), ``order`` (``newest``, the default, or
``oldest``), ``limit`` (rows per page, 1-500) and ``offset`` (where the page starts, as
the "next" link gives it). :mod:`ledger.viewer.listing` says what each costs.
"""

from __future__ import annotations

from ledger.errors import ValidationError
from ledger.model.values import Verdict
from ledger.report.model import run_outcome
from ledger.sinks.base import Reader
from ledger.viewer.html import attr, badge, esc, href, link, query_fields, table, value
from ledger.viewer.listing import SCAN_BUDGET, RunPage, RunQuery, list_runs
from ledger.viewer.pages.parts import corrupt_notice, request_text, run_link, span_text, when_text
from ledger.viewer.params import TIME_FORMS, count, text, window
from ledger.viewer.routing import Context, Request, Response, html_response

__all__ = ["FILTERS", "query_of", "runs_page"]

FILTERS = ("since", "until", "tool", "verdict", "agent", "principal", "q", "order", "limit")
_VERDICTS = ("", *(v.value for v in Verdict))


def query_of(params: dict[str, str]) -> RunQuery:
    """The :class:`RunQuery` a runs-list URL asks for."""
    since, until = window(params)
    verdict = text(params, "verdict")
    if verdict not in _VERDICTS:
        raise ValidationError(
            f"verdict: {verdict[:40]!r} is not one of allowed, denied, needs_approval"
        )
    order = text(params, "order") or "newest"
    if order not in ("newest", "oldest"):
        raise ValidationError(f"order: {order[:40]!r} is not newest or oldest")
    return RunQuery(
        since=since,
        until=until,
        tool=text(params, "tool"),
        verdict=verdict,
        agent=text(params, "agent"),
        principal=text(params, "principal"),
        q=text(params, "q"),
        newest=order == "newest",
        offset=count(params.get("offset", ""), "offset", default=0, top=10**12),
        limit=max(1, count(params.get("limit", ""), "limit", default=50, top=500)),
    )


def _field(name: str, label: str, params: dict[str, str], hint: str = "", css: str = "") -> str:
    extra = f' class="{css}"' if css else ""
    return (
        f'<label for="f-{name}">{esc(label)}<input id="f-{name}" name="{name}"{extra} '
        f'value="{attr(params.get(name, ""))}" placeholder="{attr(hint)}"></label>'
    )


def _select(name: str, label: str, choices: tuple[tuple[str, str], ...], chosen: str) -> str:
    opts = "".join(
        f'<option value="{attr(v)}"' + (" selected" if v == chosen else "") + f">{esc(t)}</option>"
        for v, t in choices
    )
    return (
        f'<label for="f-{name}">{esc(label)}'
        f'<select id="f-{name}" name="{name}">{opts}</select></label>'
    )


_QUICK = (("last hour", "1h"), ("24 hours", "24h"), ("7 days", "7d"), ("30 days", "30d"))


def _quick(params: dict[str, str]) -> str:
    """Links to the common windows (keeping the other filters)."""
    keep = {k: v for k, v in query_fields(params, FILTERS).items() if k not in ("since", "until")}
    links = [link(href("/", **keep, since=age), name, id_=f"since-{age}") for name, age in _QUICK]
    links.append(link(href("/", **keep), "all time", id_="since-all"))
    return f'<div class="quick" id="quick">window: {" · ".join(links)}</div>'


def _form(params: dict[str, str]) -> str:
    verdicts = (
        ("", "any"),
        ("allowed", "allowed"),
        ("denied", "denied"),
        ("needs_approval", "needs approval"),
    )
    orders = (("newest", "newest first"), ("oldest", "oldest first"))
    return (
        '<form class="filters" id="filters" method="get" action="/">'
        + _field("since", "since", params, "24h, 2026-11-30")
        + _field("until", "until", params, "RFC 3339 or date")
        + _field("tool", "tool", params, "exact name")
        + _select("verdict", "verdict", verdicts, params.get("verdict", ""))
        + _field("agent", "agent", params, "contains")
        + _field("principal", "principal", params, "contains")
        + _field("q", "search", params, "run, tool, args, result, reason…", "wide")
        + _select("order", "order", orders, params.get("order", "newest"))
        + '<button type="submit" id="apply">Apply</button>'
        + link("/", "Reset", css="button plain", id_="reset")
        + f'<span class="small muted" title="{attr(TIME_FORMS)}">times in UTC</span></form>'
    )


def _status(row_outcome: str, ended: bool) -> str:
    return badge(
        row_outcome,
        "ended"
        if ended and "error" not in row_outcome
        else ("bad" if "error" in row_outcome else "open"),
    )


def _who(agent: str, principal: str) -> str:
    shown = f'<span class="mono">{esc(agent)}</span>' if agent else '<span class="muted">-</span>'
    if principal:
        shown += f'<br><span class="small muted">for</span> {esc(principal)}'
    return shown


def _table(result: RunPage) -> str:
    rows, css = [], []
    for r in result.rows:
        s = r.summary
        rows.append(
            (
                run_link(s.run_id),
                when_text(s.first_time),
                span_text(s.last_time - s.first_time),
                value(request_text(r.request), limit=110, empty="(no request)"),
                _who(r.agent, r.principal),
                str(s.events),
                str(s.actions),
                badge(s.denials, "denied") if s.denials else "0",
                badge(s.errors, "failed") if s.errors else "0",
                _status(run_outcome(s), s.ended),
            )
        )
        css.append("denied run" if s.denials else "run")
    headers = (
        "run",
        "started (UTC)",
        "span",
        "request",
        "agent · principal",
        "events",
        "actions",
        "denials",
        "errors",
        "status",
    )
    return table(
        headers,
        rows,
        empty="No runs match.",
        id_="runs",
        row_css=css,
        cell_css=("id run-id", "t", "n", "req", "who", "n", "n", "n", "n", ""),
    )


def _pager(q: RunQuery, result: RunPage, params: dict[str, str]) -> str:
    keep = query_fields(params, FILTERS)
    parts: list[str] = []
    if q.offset:
        back = None if q.filtered else max(0, q.offset - q.limit)
        if back:
            parts.append(link(href("/", **keep, offset=back), "← previous", id_="prev"))
        parts.append(link(href("/", **keep), "first page", id_="first"))
    first = q.offset + 1 if result.rows else q.offset
    span = (
        f"runs {first}–{q.offset + len(result.rows)}"
        if not q.filtered
        else (f"{len(result.rows)} matching run(s)")
    )
    if result.total is not None and not q.filtered:
        span += f" of {result.total}"
    parts.append(f'<span class="muted" id="span">{esc(span)}</span>')
    if result.next_offset is not None:
        label = "continue scanning →" if result.exhausted else "next →"
        parts.append(link(href("/", **keep, offset=result.next_offset), label, id_="next"))
    return f'<div class="pager">{"".join(parts)}</div>'


def _file_notes(reader: Reader) -> str:
    corrupt = getattr(reader, "corrupt_lines", ()) or ()
    torn = getattr(reader, "torn_lines", ()) or ()
    cut = getattr(reader, "truncated_tail", False)
    notes = []
    if corrupt:
        notes.append(f"{len(corrupt)} line(s) of the file do not read as events")
    if torn:
        notes.append(f"{len(torn)} torn line(s)")
    if cut:
        notes.append("the last line is cut off (a write was interrupted)")
    if not notes:
        return ""
    return (
        f'<div class="note warn" id="file-notes">{esc("; ".join(notes))}; they are left out.</div>'
    )


def runs_page(request: Request, ctx: Context) -> Response:
    """The runs list."""
    params = request.params
    q = query_of(params)
    reader = ctx.reader
    assert isinstance(reader, Reader)
    result = list_runs(reader, q)
    scan_note = ""
    if result.exhausted:
        scan_note = (
            f'<div class="note info" id="scan-note">Examined {result.scanned:,} runs '
            f"(at most {SCAN_BUDGET:,} per page) and found {len(result.rows)} match(es); "
            "the rest of the window is not examined yet: continue, or narrow the window "
            "with since/until.</div>"
        )
    body = (
        '<h1 id="title">Runs</h1>'
        + _quick(params)
        + _form(params)
        + _file_notes(reader)
        + corrupt_notice(result.skipped)
        + scan_note
        + _pager(q, result, params)
        + _table(result)
        + _pager(q, result, params).replace('id="', 'id="b-')
    )
    return html_response(200, "Runs", body, ctx, here="runs")
