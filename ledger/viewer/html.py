"""HTML helpers of the viewer: escaping, clipped values, links, badges, tables, the page.

Every value that came from a ledger goes through :func:`esc` (element text) or
:func:`attr` (attribute values) before it reaches a page:

>>> esc('<script>alert("x")</script>')
'&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;'
>>> esc("run\\u202eevil")       # a bidi override is shown, not obeyed
'run<span class="ctl">U+202E</span>evil'
>>> href("/run", id='a"b&c')
'/run?id=a%22b%26c'

Long values are clipped with a way to see them whole (:func:`value`); the page shell
(:func:`page`) inlines the one style sheet, so nothing is fetched from anywhere.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import urlencode

from ledger.viewer.style import STYLE

__all__ = [
    "INLINE_LIMIT",
    "WHOLE_LIMIT",
    "attr",
    "badge",
    "esc",
    "href",
    "link",
    "page",
    "query_fields",
    "table",
    "value",
]

INLINE_LIMIT = 240
"""Characters of a value shown before it is clipped."""

WHOLE_LIMIT = 100_000
"""Characters of a value shown when it is opened on the page; the rest is one link away
(``/value``, as plain text)."""

# C0/C1 controls (but tab and newline), and the bidi overrides and isolates that can make
# text read differently from what it holds.
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def _show(match: re.Match[str]) -> str:
    return f'<span class="ctl">U+{ord(match.group()):04X}</span>'


def esc(text: object) -> str:
    """``text`` as HTML element content: ``& < > " '`` escaped, control and bidi
    characters shown as ``U+XXXX`` marks (so a hostile id cannot hide or reorder what is
    on the screen), text that cannot be UTF-8 (a lone surrogate) replaced."""
    s = str(text)
    if not s.isascii():
        s = s.encode("utf-8", "replace").decode("utf-8")
    return _HIDDEN.sub(_show, html.escape(s, quote=True))


def attr(text: object) -> str:
    """``text`` as a quoted attribute's value (controls as ``U+XXXX`` text)."""
    s = str(text)
    if not s.isascii():
        s = s.encode("utf-8", "replace").decode("utf-8")
    s = _HIDDEN.sub(lambda m: f"U+{ord(m.group()):04X}", s)
    return html.escape(s, quote=True)


def href(path: str, **params: object) -> str:
    """A same-site URL: ``path`` and its query (parameters that are None or "" left
    out), not yet escaped for an attribute (:func:`link` does that)."""
    kept = {k: str(v) for k, v in params.items() if v is not None and v != ""}
    if not kept:
        return path
    text = urlencode(kept, encoding="utf-8", errors="replace")
    return f"{path}?{text}"


def link(url: str, text: object, *, css: str = "", id_: str = "", title: str = "") -> str:
    """``<a href=url>text</a>``, everything escaped."""
    extra = f' class="{attr(css)}"' if css else ""
    extra += f' id="{attr(id_)}"' if id_ else ""
    extra += f' title="{attr(title)}"' if title else ""
    return f'<a href="{attr(url)}"{extra}>{esc(text)}</a>'


def badge(word: object, kind: str | None = None, *, title: str = "") -> str:
    """A coloured pill; ``kind`` (default: the word) picks the colour (``b-<kind>``)."""
    css = re.sub(r"[^a-z_]", "", (kind if kind is not None else str(word)).lower()) or "none"
    tip = f' title="{attr(title)}"' if title else ""
    return f'<span class="badge b-{css}"{tip}>{esc(word)}</span>'


def value(
    text: str | None,
    *,
    limit: int = INLINE_LIMIT,
    whole: str = "",
    empty: str = "(none)",
) -> str:
    """A value, clipped at ``limit`` characters. A longer value opens in place (a
    ``<details>``, no script) up to :data:`WHOLE_LIMIT` characters; beyond that ``whole``
    (a URL serving it as plain text) links to all of it."""
    if text is None or text == "":
        return f'<span class="muted">{esc(empty)}</span>'
    if len(text) <= limit:
        return f'<span class="v">{esc(text)}</span>'
    shown = text[:WHOLE_LIMIT]
    rest = ""
    if len(text) > WHOLE_LIMIT:
        more = f"show all {len(text):,} characters as text"
        rest = (
            f'<p class="small muted">first {WHOLE_LIMIT:,} characters shown; '
            + (link(whole, more) if whole else f"{len(text):,} in all")
            + "</p>"
        )
    return (
        '<details class="clip"><summary>'
        f'<span class="v">{esc(text[: limit - 1])}…</span>'
        f'<span class="more">{len(text):,} chars · show</span></summary>'
        f"<pre>{esc(shown)}</pre>{rest}</details>"
    )


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    empty: str,
    id_: str = "",
    row_css: Sequence[str] | None = None,
    cell_css: Sequence[str] = (),
) -> str:
    """A table of pre-rendered cells (each already escaped HTML); ``empty`` when no row.
    ``cell_css`` gives each column's class (``n`` numbers, ``t`` times, ``id`` ids)."""
    body: list[str] = []
    for i, row in enumerate(rows):
        css = row_css[i] if row_css is not None and i < len(row_css) else ""
        cells = "".join(
            f'<td class="{cell_css[j]}">{c}</td>'
            if j < len(cell_css) and cell_css[j]
            else f"<td>{c}</td>"
            for j, c in enumerate(row)
        )
        body.append(f'<tr class="{attr(css)}">{cells}</tr>' if css else f"<tr>{cells}</tr>")
    if not body:
        return f'<p class="muted">{esc(empty)}</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    ident = f' id="{attr(id_)}"' if id_ else ""
    return (
        f'<div class="scroll"><table{ident}><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


_NAV = (
    ("runs", "/", "Runs"),
    ("report", "/report", "Report"),
    ("integrity", "/integrity", "Integrity"),
)


def page(title: str, body: str, *, here: str = "", ledger: str = "") -> str:
    """A whole page: the header (navigation, the ledger it shows), ``body`` (HTML),
    the inline style sheet. ``title`` and ``ledger`` are escaped here."""
    nav = "".join(
        f'<a href="{url}" id="nav-{key}"'
        + (' class="here"' if key == here else "")
        + f">{name}</a>"
        for key, url, name in _NAV
    )
    shown = f'<span class="db" title="the ledger shown">{esc(ledger)}</span>' if ledger else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{esc(title)} · ledger ui</title><style>{STYLE}</style></head><body>"
        '<header class="top"><span class="brand">agentledger</span>'
        f"<nav>{nav}</nav>{shown}</header>"
        f'<main id="main">{body}</main>'
        "<footer>read-only view · ledger ui</footer></body></html>"
    )


def query_fields(params: Mapping[str, str], keep: Iterable[str]) -> dict[str, str]:
    """The parameters named in ``keep`` that ``params`` holds (for links that keep a
    page's filters)."""
    return {k: params[k] for k in keep if params.get(k)}
