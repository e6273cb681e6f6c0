"""Provenance sinks: where events go, and the readers that bring them back.

>>> from ledger.sinks import open_sink, DurableSink
>>> with open_sink("sqlite:///ledger.db") as sink:            # doctest: +SKIP
...     sink.commit_action(action_event)                        # durable before it returns
...     chain = sink.chain(action_event.run_id)

Plain sinks: :class:`DiscardSink`, :class:`JSONLSink` (read back with :func:`read_jsonl`).
Durable sinks and readers: :class:`SQLiteSink`, :class:`PostgresSink`. The SQL sinks are
imported lazily, so using a JSONL sink does not load SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ledger.sinks.base import DurableSink, Reader, RunSummary, Sink, validate_action
from ledger.sinks.discard import DiscardSink
from ledger.sinks.jsonl import JSONLContents, JSONLSink, read_jsonl

if TYPE_CHECKING:
    from ledger.sinks.postgres import PostgresSink
    from ledger.sinks.schema import upgrade
    from ledger.sinks.sqlite import SQLiteSink
    from ledger.sinks.url import open_sink

__all__ = [
    "DiscardSink",
    "DurableSink",
    "JSONLContents",
    "JSONLSink",
    "PostgresSink",
    "Reader",
    "RunSummary",
    "SQLiteSink",
    "Sink",
    "open_sink",
    "read_jsonl",
    "upgrade",
    "validate_action",
]

_LAZY = {
    "SQLiteSink": "ledger.sinks.sqlite",
    "PostgresSink": "ledger.sinks.postgres",
    "open_sink": "ledger.sinks.url",
    "upgrade": "ledger.sinks.schema",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ledger.sinks' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
