"""The compliance report for a window (``/report?since=&until=``).

``ledger.report.build_report(reader, since=, until=)`` reads the window once (its cost:
every event in the window, plus the content-hash check of its rows); the page lays out
its ``to_dict()`` in the viewer's style: the verdict, the totals, the chart, then each
section as a table, sections the report gains later included (they are rendered from
their dict form). ``/report.html`` answers the report's own self-contained page,
``&format=json`` and ``&format=csv`` its other forms. Both ends are optional (the whole
ledger when neither is given); ``since`` is inclusive, ``until`` exclusive.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from ledger.report.build import build_report
from ledger.report.document import ComplianceReport
from ledger.report.render import render_svg
from ledger.sinks.base import Reader
from ledger.timefmt import parse_time
from ledger.viewer.html import attr, esc, href, link, table, value
from ledger.viewer.pages.parts import run_link, when_text
from ledger.viewer.params import window
from ledger.viewer.routing import Context, Request, Response, html_response

__all__ = ["report_html_page", "report_page"]

_MAX_ROWS = 500
_KNOWN = {
    "ledger",
    "generated_at",
    "window",
    "compliant",
    "totals",
    "records_held",
    "runs",
    "tools",
    "denials",
    "missing_results",
    "unsafe_without_intent",
    "hash_check",
    "timeline",
}
_TITLES = {
    "tools": "Actions per tool",
    "denials": "Denials",
    "missing_results": "Allowed actions without a result",
    "runs": "Runs in the window",
    "approved_actions": "Approved actions",
    "who": "Who: actions and denials per agent and principal",
    "outside_runs": "Calls outside any run",
}


def _build(request: Request, reader: Reader, ledger: str) -> ComplianceReport:
    since, until = window(request.params)
    if "ledger" in inspect.signature(build_report).parameters:  # the report names its ledger
        named: Any = build_report
        return named(reader, since=since, until=until, ledger=ledger)  # type: ignore[no-any-return]
    return build_report(reader, since=since, until=until)


def _time_cell(v: str) -> str:
    try:
        return when_text(parse_time(v))
    except Exception:
        return esc(v)


# sections whose calls are results without an action: their call ids have no "why"
_NO_WHY = ("unsafe_without_intent", "outside_runs", "attempts_outside_runs")


def _cell(key: str, v: Any, row: dict[str, Any], section: str = "") -> str:
    if v is None:
        return '<span class="muted">-</span>'
    if key == "run_id" and isinstance(v, str):
        return run_link(v)
    if (
        key == "call_id"
        and isinstance(v, str)
        and v
        and isinstance(row.get("run_id"), str)
        and not section.startswith(_NO_WHY)
    ):
        return link(href("/why", run=row["run_id"], call=v), v, css="mono")
    if key == "event_id" and isinstance(v, str) and v:
        return link(href("/event", id=v), v, css="mono")
    if isinstance(v, str) and _is_time(key):
        return _time_cell(v)
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return "<br>".join(value(x, limit=80) for x in v[:20]) or '<span class="muted">-</span>'
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float):
        return esc(v)
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    return value(text, limit=160)


def _is_time(key: str) -> bool:
    return key in ("time", "start", "end") or key.endswith(("_time", "_at"))


_SHOWN = 25  # rows of a section shown before the rest is folded


def _rows_table(key: str, rows: list[dict[str, Any]], empty: str) -> str:
    if len(rows) > _SHOWN:
        rest = rows[_SHOWN:]
        return (
            _one_table(key, rows[:_SHOWN], empty)
            + f'<details class="more-rows" id="more-{attr(key)}"><summary>{len(rest):,} more '
            f"row(s)</summary>{_one_table(key + '-more', rest, empty)}</details>"
        )
    return _one_table(key, rows, empty)


def _one_table(key: str, rows: list[dict[str, Any]], empty: str) -> str:
    headers: list[str] = []
    for r in rows[:50]:
        headers.extend(k for k in r if k not in headers)
    numeric = [
        all(isinstance(r.get(h), int) and not isinstance(r.get(h), bool) for r in rows[:50])
        for h in headers
    ]
    css = [
        "n" if n else "id" if h.endswith("_id") else "t" if _is_time(h) else ""
        for h, n in zip(headers, numeric, strict=True)
    ]
    body = [[_cell(h, r.get(h), r, key) for h in headers] for r in rows[:_MAX_ROWS]]
    more = (
        f'<p class="small muted">first {_MAX_ROWS} of {len(rows):,} shown; '
        "the JSON form has all</p>"
        if len(rows) > _MAX_ROWS
        else ""
    )
    row_css = ["denied" if key.startswith("denials") else "" for _ in body]
    return (
        table(
            [h.replace("_", " ") for h in headers],
            body,
            empty=empty,
            id_=f"report-{key}",
            row_css=row_css,
            cell_css=css,
        )
        + more
    )


def _section(key: str, item: Any) -> str:
    title = _TITLES.get(key, key.replace("_", " ").capitalize())
    head = f'<h2 id="h-{attr(key)}">{esc(title)}</h2>'
    if isinstance(item, list) and all(isinstance(r, dict) for r in item):
        return head + _rows_table(key, item, "None.")
    if isinstance(item, dict):
        lists = {
            k: v
            for k, v in item.items()
            if isinstance(v, list) and all(isinstance(r, dict) for r in v)
        }
        plain = {k: v for k, v in item.items() if k not in lists}
        kv = "".join(
            f"<dt>{esc(k.replace('_', ' '))}</dt><dd>{_cell(k, v, item)}</dd>"
            for k, v in plain.items()
        )
        out = head + (
            f'<div class="card" id="report-{attr(key)}"><dl class="kv">{kv}</dl></div>'
            if kv
            else ""
        )
        for k, v in lists.items():
            out += f"<h3>{esc(k.replace('_', ' '))}</h3>" + _rows_table(f"{key}-{k}", v, "None.")
        return out
    return head + f'<p id="report-{attr(key)}">{_cell(key, item, {})}</p>'


def _runs_section(runs: Any) -> str:
    if not isinstance(runs, list):
        return ""
    return (
        f'<details id="report-runs-list"><summary><b>Runs in the window</b> ({len(runs):,})'
        f"</summary>{_rows_table('runs', runs, 'None.')}</details>"
    )


def _stats(d: dict[str, Any]) -> str:
    totals = d.get("totals", {})
    cells = []
    for k, v in totals.items():
        bad = (
            isinstance(v, int)
            and v > 0
            and k in ("unsafe_without_intent", "missing_results", "denials")
        )
        cells.append(
            f'<div class="stat {"bad" if bad else ""}" id="total-{attr(k)}"><b>{esc(v)}</b>'
            f"<span>{esc(k.replace('_', ' '))}</span></div>"
        )
    return f'<div class="stats" id="report-totals">{"".join(cells)}</div>'


def _form(params: dict[str, str]) -> str:
    def field(name: str, hint: str) -> str:
        return (
            f'<label for="r-{name}">{name}<input id="r-{name}" name="{name}" '
            f'value="{attr(params.get(name, ""))}" placeholder="{attr(hint)}"></label>'
        )

    return (
        '<form class="filters" id="report-form" method="get" action="/report">'
        + field("since", "2026-11-01, 30d")
        + field("until", "2026-12-01")
        + '<button type="submit" id="report-apply">Build report</button>'
        + '<span class="small muted">UTC; since inclusive, until exclusive; '
        "empty = the whole ledger</span></form>"
    )


def report_page(request: Request, ctx: Context) -> Response:
    """The report in the viewer's layout (or its JSON / CSV)."""
    reader = ctx.reader
    assert isinstance(reader, Reader)
    report = _build(request, reader, ctx.ledger)
    form = request.params.get("format", "")
    if form == "json":
        text = json.dumps(report.to_dict(), ensure_ascii=True, indent=2)
        return Response(status=200, body=text.encode("ascii"), content_type="application/json")
    if form == "csv":
        return Response(
            status=200, body=report.to_csv().encode("utf-8"), content_type="text/csv; charset=utf-8"
        )
    d = report.to_dict()
    w = d.get("window", {})
    span = f"{w.get('since') or 'the beginning'} → {w.get('until') or 'now'}"
    unsafe = d.get("unsafe_without_intent", {})
    statement = unsafe.get("statement", "") if isinstance(unsafe, dict) else ""
    ok = bool(d.get("compliant"))
    verdict = (
        f'<div class="note {"ok" if ok else "bad"}" id="compliance"><b>'
        f"{'Compliant' if ok else 'Not compliant'}</b>: {esc(statement)}; "
        f"{esc(d.get('hash_check', {}).get('summary', ''))}</div>"
    )
    keep = {k: request.params[k] for k in ("since", "until") if request.params.get(k)}
    forms = " · ".join(
        (
            link(href("/report.html", **keep), "standalone page", id_="report-standalone"),
            link(href("/report", **keep, format="json"), "JSON", id_="report-json"),
            link(href("/report", **keep, format="csv"), "CSV", id_="report-csv"),
            link(href("/", **keep), "runs in this window", id_="report-runs"),
        )
    )
    held = d.get("records_held", {})
    sections = [
        _section(
            "unsafe_without_intent",
            {"count": unsafe.get("count"), "items": unsafe.get("items", [])},
        )
        if isinstance(unsafe, dict)
        else "",
        _section("denials", d.get("denials", [])),
        _section("missing_results", d.get("missing_results", [])),
        _section("tools", d.get("tools", [])),
    ]
    extra = [_section(k, v) for k, v in d.items() if k not in _KNOWN]
    body = (
        f'<div class="crumbs">{link("/", "Runs")} / report</div>'
        f'<h1 id="title">Compliance report</h1>'
        f'<p class="muted">window {esc(span)} · generated {esc(d.get("generated_at", ""))} · '
        f"records held {esc(held.get('oldest') or '-')} → {esc(held.get('newest') or '-')}"
        + (f' · ledger <span class="mono">{esc(d["ledger"])}</span>' if d.get("ledger") else "")
        + "</p>"
        + _form(request.params)
        + verdict
        + _stats(d)
        + f'<p class="small">{forms}</p>'
        + '<h2>Actions and denials over time</h2><div class="card" id="report-chart">'
        + render_svg(report.timeline)
        + "</div>"
        + "".join(sections)
        + "".join(extra)
        + _section("hash_check", d.get("hash_check", {}))
        + _runs_section(d.get("runs", []))
    )
    return html_response(200, "Report", body, ctx, here="report")


def report_html_page(request: Request, ctx: Context) -> Response:
    """The report's own self-contained HTML page (``ComplianceReport.to_html()``)."""
    reader = ctx.reader
    assert isinstance(reader, Reader)
    return Response(
        status=200, body=_build(request, reader, ctx.ledger).to_html().encode("utf-8", "replace")
    )
