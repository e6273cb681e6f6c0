"""One stored event (``/event?id=ID``) and one of its fields whole (``/value``).

``/event`` shows every field the event carries (its JSON as recorded, and laid out);
``/value?event=ID&field=NAME`` answers one text field (``args``, ``result``, ``preview``,
``reason``, ``err``) whole, as ``text/plain``: how a value clipped on a page is seen in
full. A field retention erased reads ``[erased: <reason>]`` on both.
"""

from __future__ import annotations

import orjson

from ledger.ids import ulid_text
from ledger.model.erasure import erased_text
from ledger.sinks.base import Reader
from ledger.viewer.html import esc, href, link, value
from ledger.viewer.pages.parts import erased_mark, field_value, run_link, when_text
from ledger.viewer.routing import Context, NotFound, Request, Response, html_response

__all__ = ["FIELDS", "event_page", "value_page"]

FIELDS = ("args", "result", "preview", "reason", "err")


def event_page(request: Request, ctx: Context) -> Response:
    """The event page."""
    event_id = request.params.get("id", "")
    if not event_id:
        raise NotFound("no event given: /event?id=EVENT_ID")
    reader = ctx.reader
    assert isinstance(reader, Reader)
    e = reader.get(event_id)
    rid = ulid_text(e.event_id)
    data = orjson.loads(e.to_json())
    rows = []
    # a field retention erased is shown as erased, where the event held it: the stored
    # JSON no longer has it (a tombstone names it in its "erased" member)
    gone = () if e.erased is None else e.erased.fields
    for key in gone:
        data.setdefault(key, None)
    for key, item in data.items():
        if key in gone:
            shown = erased_mark(e, key)
        elif key in FIELDS and isinstance(e_value := getattr(e, key, None), str):
            shown = field_value(
                e, key, e_value, limit=400, whole=href("/value", event=rid, field=key)
            )
        elif key == "time":
            shown = when_text(e.time) + f' <span class="mono muted small">{esc(item)}</span>'
        elif key == "run_id":
            shown = run_link(e.run_id)
        else:
            text = item if isinstance(item, str) else orjson.dumps(item).decode()
            shown = value(text, limit=400)
        rows.append(f"<dt>{esc(key)}</dt><dd>{shown}</dd>")
    body = (
        f'<div class="crumbs">{link("/", "Runs")} / {run_link(e.run_id)} / event</div>'
        f'<h1 id="title">Event <span class="mono">{esc(rid)}</span></h1>'
        f'<div class="card" id="event"><dl class="kv">{"".join(rows)}</dl></div>'
        f"<h2>As recorded</h2>{value(e.to_json(), limit=4000)}"
    )
    return html_response(200, f"Event {rid}", body, ctx, here="runs")


def value_page(request: Request, ctx: Context) -> Response:
    """One field of an event, whole, as plain text."""
    event_id, field = request.params.get("event", ""), request.params.get("field", "")
    if not event_id or field not in FIELDS:
        raise NotFound(
            f"give an event and a field ({', '.join(FIELDS)}): /value?event=ID&field=args"
        )
    reader = ctx.reader
    assert isinstance(reader, Reader)
    event = reader.get(event_id)
    found = getattr(event, field)
    # an erased field reads as erased (as in chain and why), never as an empty value
    text = erased_text(event, field) or ("" if found is None else str(found))
    return Response(
        status=200,
        body=text.encode("utf-8", "replace"),
        content_type="text/plain; charset=utf-8",
        headers=(("Content-Disposition", "inline"),),
    )
