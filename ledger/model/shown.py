"""Recorded text as a person reads it in a listing: on one line.

A reason, a name or a run id is text whoever made the record chose; shown as it is, a
line break in it would start a line of the listing that the listing did not write, and
an escape character would drive the terminal. Every text listing shows recorded text
through :func:`one_line`.
"""

from __future__ import annotations

__all__ = ["one_line"]


def one_line(text: str) -> str:
    """``text`` on one line: a line break, a line separator or any other character that
    does not print is shown escaped, so a reason (or a run id, a name) given by whoever
    made a record cannot forge a line of a listing that shows it.

    >>> one_line("litigation\\nno legal hold")
    'litigation\\\\nno legal hold'
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
