"""JSON shaping of what the gate records: arguments must be JSON (:func:`json_value`),
results are made so (:func:`to_jsonable`), a denied attempt shows what was not
(:func:`marked_jsonable`), and previews are bounded (:func:`bounded`).

>>> json_value({"path": "a.txt", "n": (1, 2)})
{'path': 'a.txt', 'n': [1, 2]}
>>> to_jsonable({1: {"x"}})
{'1': ['x']}
>>> bounded("x" * 300)[-3:]
'xx…'
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "PREVIEW_LIMIT",
    "NotJSON",
    "bounded",
    "json_value",
    "marked_jsonable",
    "to_jsonable",
]

PREVIEW_LIMIT = 200
"""Maximum length, in characters, of any ``preview`` the gate writes."""

_INT64 = 1 << 63


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """``value`` as JSON-shaped data: dict keys become strings, tuples and sets lists,
    bytes text, integers beyond 64 bits and unknown objects their ``str`` (a ``str``
    that raises is named instead); text that is not valid Unicode (lone surrogates, as
    ``os.listdir`` returns for undecodable file names) keeps them as ``\\udcff`` escapes."""
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, str):
        return _unicode(value)
    if isinstance(value, int):
        return value if -_INT64 <= value < _INT64 else str(value)
    if _depth > 64:
        return "[too deeply nested]"
    if isinstance(value, dict):
        return {_unicode(str(k)): to_jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v, _depth + 1) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    try:
        return _unicode(str(value))
    except Exception as exc:  # a broken __str__ must not cost the record
        return f"[unprintable {type(value).__name__}: str() raised {type(exc).__name__}]"


def _unicode(text: str) -> str:
    """``text``, with any lone surrogate written as a ``\\uXXXX`` escape."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


class NotJSON(ValueError):
    """A value that is not JSON: ``what`` was found at ``path`` (the keys and indexes
    from the outside in; empty for the value itself)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
        self._inside_out: list[str | int] = []

    @property
    def path(self) -> list[str | int]:
        return self._inside_out[::-1]

    @property
    def where(self) -> str:
        """The path as Python subscripts: ``"['p'][0]"``."""
        return "".join(f"[{key!r}]" for key in self.path)


def _what(value: Any) -> str:
    if isinstance(value, float):
        return f"float {value!r}"
    if isinstance(value, int):
        return "an integer beyond 64 bits"
    return type(value).__name__


def json_value(value: Any, _depth: int = 0) -> Any:
    """``value`` unchanged if it is JSON (tuples become lists), else :class:`NotJSON`.

    JSON here: ``None``, ``bool``, ``str``, ``int`` within 64 bits, finite ``float``, and
    lists, tuples and dicts with string keys of those, at most 64 levels deep (so a cycle
    is refused too). Subclasses (a ``StrEnum`` member) count as their base type.
    """
    if value is None or isinstance(value, str):  # bool: an int, checked next
        return value
    if isinstance(value, int):
        if -_INT64 <= value < _INT64:
            return value
        raise NotJSON(_what(value))
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise NotJSON(_what(value))
    if not isinstance(value, dict | list | tuple):
        raise NotJSON(_what(value))
    if _depth >= 64:
        raise NotJSON("nested more than 64 levels deep (a cycle?)")
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotJSON(f"a dict with a {type(key).__name__} key")
            try:
                out[key] = json_value(item, _depth + 1)
            except NotJSON as exc:
                exc._inside_out.append(key)
                raise
        return out
    items = []
    for index, item in enumerate(value):
        try:
            items.append(json_value(item, _depth + 1))
        except NotJSON as exc:
            exc._inside_out.append(index)
            raise
    return items


def marked_jsonable(value: Any, _depth: int = 0) -> Any:
    """Like :func:`to_jsonable`, but what is not JSON becomes a placeholder
    ``"[not JSON: <type>]"`` (the record of a call denied for such args)."""
    try:
        return json_value(value, 64)  # scalars only: fast for the JSON ones
    except NotJSON as exc:
        if not isinstance(value, dict | list | tuple) or _depth > 64:
            return f"[not JSON: {exc.what}]"
    if isinstance(value, dict):
        return {str(k): marked_jsonable(v, _depth + 1) for k, v in value.items()}
    return [marked_jsonable(v, _depth + 1) for v in value]


def bounded(text: str, limit: int = PREVIEW_LIMIT) -> str:
    """``text`` cut to at most ``limit`` characters, an ellipsis marking a cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
