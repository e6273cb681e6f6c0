"""Recorded text as a person reads it in a listing: on one line.

A reason, a name or a run id is text whoever made the record chose; shown as it is, a
line break in it would start a line of the listing that the listing did not write, and
an escape character would drive the terminal. Every text listing shows recorded text
through :func:`one_line`; every document (HTML) through :func:`inert_text`, and every
JSON text printed through :func:`inert_json`, and every CSV cell through
:func:`csv_cell`, so what reaches a terminal or a file is the same, and inert, wherever
it is written.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["csv_cell", "inert_json", "inert_text", "one_line", "shows_as_is"]

# what can start a line, move the cursor, drive the terminal or reorder what is shown:
# controls (C0, DEL, C1), line and paragraph separators, lone surrogates, and the
# bidirectional overrides, embeddings, isolates and marks
_ESCAPED_CATEGORIES = frozenset(("Cc", "Zl", "Zp", "Cs"))
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def one_line(text: str) -> str:
    """``text`` on one line: a line break, a line separator, a control character (an
    escape sequence's ESC among them) or a bidirectional override is shown escaped, so a
    reason (or a run id, a name) given by whoever made a record cannot forge a line of a
    listing that shows it, drive the terminal, or reorder what it shows. Every other
    character is kept: no-break and ideographic spaces, joiners, accents, emoji.

    >>> one_line("litigation\\nno legal hold\\x1b[2K")
    'litigation\\\\nno legal hold\\\\x1b[2K'
    >>> one_line("Motif\\u00a0: 10\\u202f000 \\u20ac, \\u6771\\u4eac\\u3000\\u99c5") == (
    ...     "Motif\\u00a0: 10\\u202f000 \\u20ac, \\u6771\\u4eac\\u3000\\u99c5")
    True
    """
    if text.isprintable():
        return text
    return "".join(_shown(c) for c in text)


def csv_cell(text: str) -> str:
    """:func:`one_line` of ``text`` for a CSV cell, and a leading ``'`` when it begins
    as a spreadsheet formula does (``=``, ``+``, ``-``, ``@``): a reason or a tool name
    recorded as ``=HYPERLINK(...)`` must not run when the CSV is opened in a
    spreadsheet. Only recorded text goes through it (numbers are written as numbers);
    the JSON forms keep the text exactly.

    >>> csv_cell("=cmd|' /C calc'!A0"), csv_cell("-rf /"), csv_cell("rm -rf /")
    ("'=cmd|' /C calc'!A0", "'-rf /", 'rm -rf /')
    """
    shown = one_line(text)
    return "'" + shown if shown[:1] in _FORMULA else shown


_FORMULA = frozenset("=+-@")


def inert_text(text: str) -> str:
    """:func:`one_line` of each line of ``text`` (a document whose own line breaks are
    kept, as an HTML page's): every other character :func:`one_line` escapes is shown
    escaped. For a document in which recorded text is already escaped for its format
    (HTML), where a line break cannot forge anything.

    >>> inert_text("<td>a\\x1b[2Jb</td>\\n<td>c</td>")
    '<td>a\\\\x1b[2Jb</td>\\n<td>c</td>'
    """
    if text.isprintable():
        return text
    return "\n".join(map(one_line, text.split("\n")))


def inert_json(text: str) -> str:
    """JSON text (as a JSON encoder writes it) with every character :func:`one_line`
    would escape written as a ``\\uXXXX`` escape: the same JSON value, read back by any
    parser, but no control character, line separator or bidirectional override reaches
    a terminal raw. Those characters can only stand inside the JSON text's strings.
    (A lone surrogate, which is no text and which no stored event holds, is written as
    its escape too; two of them side by side read back as the one character they pair
    into.)

    >>> inert_json('{"reason": "a\\u202eb\\x9b"}')
    '{"reason": "a\\\\u202eb\\\\u009b"}'
    """
    return _ESCAPED.sub(_json_escape, text)  # a scan in C: large listings stay fast


# the characters _shown escapes but a line break: controls (C0, DEL, C1), the line and
# paragraph separators, surrogates and the bidirectional marks (a test holds it to _shown)
_ESCAPED = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff" + "".join(sorted(_BIDI)) + "]"
)


def _json_escape(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def shows_as_is(text: str) -> bool:
    """True when :func:`one_line` shows ``text`` unchanged: no control character, line
    or paragraph separator, lone surrogate or bidirectional override in it (what a name
    recorded in the log must not hold).

    >>> shows_as_is("dpo@example.com"), shows_as_is("a\u2028b"), shows_as_is("a\x85b")
    (True, False, False)
    """
    return one_line(text) == text


def _shown(c: str) -> str:
    if c in _BIDI or unicodedata.category(c) in _ESCAPED_CATEGORIES:
        return repr(c)[1:-1]
    return c
