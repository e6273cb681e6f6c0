"""``ledger why``'s output: one action explained backward, for people and for machines.

The human form is :meth:`~ledger.explain.Explanation.render`, wrapped to the terminal
(the reason and the gate's reason whole). The machine form is
``Explanation.to_dict()`` with ``args``, ``result`` and the request's ``args`` embedded as
JSON values, as ``ledger events --json`` and ``ledger chain --json`` give them.
"""

from __future__ import annotations

import json
from typing import Any

from ledger.chain.explain import Explanation

__all__ = ["json_value", "why_dict", "why_text"]


def json_value(text: str | None) -> Any:
    """A stored raw-JSON ``args`` or ``result`` as the value it encodes (``None`` stays
    ``None``; text that does not parse, which the model never stores, stays text)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def why_dict(explanation: Explanation) -> dict[str, Any]:
    """``Explanation.to_dict()`` with ``args``/``result`` as JSON values, not strings."""
    value = explanation.to_dict()
    value["args"] = json_value(value["args"])
    value["result"] = json_value(value["result"])
    if value.get("request"):
        value["request"]["args"] = json_value(value["request"]["args"])
    return value


def why_text(explanation: Explanation, width: int = 100) -> str:
    """The account for people: :meth:`Explanation.render` wrapped to ``width``."""
    return explanation.render(width)
