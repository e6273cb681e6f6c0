"""The intent queue: agent tool calls are validated and queued, never persisted (§7.1-7.2).

>>> from ledger.typed.config import parse_config
>>> queue = IntentQueue(parse_config({"history": {"type": "log"}, "repos": {"type": "map"}}))
>>> queue.submit("ledger_append", {"operation": "append", "value": "x"})
{'success': True, 'queued': True}
>>> put = queue.tool("ledger_map_put")          # a plain ``fn(**arguments)``
>>> put(key="a", value=1)
{'success': True, 'queued': True}
>>> queue.submit("ledger_map_put", {"key": 1})["success"]
False
>>> artifact = queue.artifact("12345:1")        # the transaction artifact of §7.2

Writes are *deferred*: a call's answer only confirms that the intent was queued (or says
why it was refused). The trusted :func:`ledger.typed.persist.persist` step decides later,
after the agent has finished, what is persisted.

A call is checked against its tool's JSON Schema, then turned into an append request (the
dedicated map and notes tools become ``put``/``delete``/``note``/``vote`` operations), and
accepted only if the whole queue with it still normalizes, so :meth:`IntentQueue.artifact`
cannot fail on what was accepted. When ``ledger`` is omitted the queue fills in the only
relevant ledger, so every queued request names its ledger.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema_rs

from ledger.errors import RecordError
from ledger.typed.config import LedgerConfig
from ledger.typed.limits import check_shape, stringify_bytes
from ledger.typed.schema import without_surrogates
from ledger.typed.tools import QUERY_TOOL, tool_definitions
from ledger.typed.transactions import normalize_appends

__all__ = ["MAX_REQUESTS", "IntentQueue"]

log = logging.getLogger(__name__)

MAX_REQUESTS = 100
_DEDICATED: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "ledger_map_put": ("put", ("key", "value")),
    "ledger_map_delete": ("delete", ("key",)),
    "ledger_note_add": ("note", ("subject", "note", "reason", "citations", "temp_id")),
    "ledger_note_vote": ("vote", ("note_id", "vote", "reason")),
}


class IntentQueue:
    """Validates agent tool calls and queues them as append requests for one run.

    >>> from ledger.typed.config import parse_config
    >>> queue = IntentQueue(parse_config({"repos": {"type": "map"}}))
    >>> put = queue.tool("ledger_map_put")          # a plain ``fn(**arguments)``
    >>> put(key="a", value=1)
    {'success': True, 'queued': True}
    >>> queue.submit("ledger_map_put", {"key": 1})["success"]
    False

    The queue is thread-safe. It holds at most 100 requests (one transaction), and it
    accepts a call only if the whole queue with it still normalizes, so
    :meth:`artifact` cannot fail on what was accepted.
    """

    def __init__(self, config: LedgerConfig) -> None:
        self._config = config
        tools = tool_definitions(config)
        self._tools = {t.name: t for t in tools if t.name != QUERY_TOOL}
        self._validators = {
            t.name: jsonschema_rs.validator_for(dict(t.input_schema)) for t in tools
        }
        self._requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    @property
    def requests(self) -> tuple[dict[str, Any], ...]:
        """The queued requests, in call order (copies are not made; do not mutate)."""
        with self._lock:
            return tuple(self._requests)

    def __len__(self) -> int:
        return len(self._requests)

    def submit(self, tool_name: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Validate and queue one call; ``{"success": True, "queued": True}`` or an error."""
        try:
            request = self._request(tool_name, arguments)
            with self._lock:
                self._check_batch(request)
                self._requests.append(request)
        except RecordError as exc:
            log.info("ledger tool %s refused: %s", tool_name, exc)
            return {"success": False, "queued": False, "error": str(exc)}
        return {"success": True, "queued": True}

    def tool(self, tool_name: str) -> Callable[..., dict[str, Any]]:
        """The tool as a plain function ``fn(**arguments) -> dict`` (for a gate or agent)."""
        if tool_name not in self._tools:
            raise RecordError(f"Unknown ledger tool {tool_name!r}; offered: {sorted(self._tools)}")

        def call(**arguments: Any) -> dict[str, Any]:
            return self.submit(tool_name, arguments)

        call.__name__ = call.__qualname__ = tool_name
        call.__doc__ = self._tools[tool_name].description
        return call

    def functions(self) -> dict[str, Callable[..., dict[str, Any]]]:
        """Every queueing tool as ``{name: fn(**arguments)}``."""
        return {name: self.tool(name) for name in self._tools}

    def artifact(self, transaction_id: str) -> dict[str, Any]:
        """The run's transaction artifact (§7.2) for ``transaction_id``."""
        return normalize_appends(self._config, list(self.requests), transaction_id)

    def clear(self) -> None:
        """Forget every queued request (e.g. after the artifact was written)."""
        with self._lock:
            self._requests.clear()

    def _request(self, tool_name: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        if not isinstance(tool_name, str):
            raise RecordError(f"tool name must be a string, not {type(tool_name).__name__}")
        tool = self._tools.get(tool_name)
        if tool is None:
            if tool_name == QUERY_TOOL:
                raise RecordError("ledger_query is answered at once; it is not queued")
            raise RecordError(f"Unknown ledger tool {tool_name!r}; offered: {sorted(self._tools)}")
        args = {} if arguments is None else arguments
        if not isinstance(args, Mapping):
            raise RecordError(
                f"Invalid ledger append message: expected an object, received {type(args).__name__}"
            )
        args = dict(args)
        check_shape(args)
        stringify_bytes(args)  # JSON only: NaN, bytes, dates... are refused here
        errors = _errors(self._validators[tool_name], args)
        if errors:
            raise RecordError(f"Invalid {tool_name} arguments: " + "; ".join(errors[:5]))
        if "ledger" not in args:
            args["ledger"] = tool.ledgers[0]  # the schema requires it when there are several
        return _to_request(tool_name, args)

    def _check_batch(self, request: dict[str, Any]) -> None:
        if len(self._requests) >= MAX_REQUESTS:
            raise RecordError(
                f"Invalid ledger append batch: at most {MAX_REQUESTS} requests per run"
            )
        normalize_appends(self._config, [*self._requests, request], "local:1")


def _errors(validator: jsonschema_rs.Validator, args: dict[str, Any]) -> list[str]:
    try:
        found = list(validator.iter_errors(args))
    except (ValueError, TypeError):  # a lone surrogate: validate it as U+FFFD
        found = list(validator.iter_errors(without_surrogates(args)))
    return [f"{'/'.join(map(str, e.instance_path)) or '(root)'}: {e.message}" for e in found]


def _to_request(tool_name: str, args: dict[str, Any]) -> dict[str, Any]:
    if tool_name not in _DEDICATED:
        return args
    operation, fields = _DEDICATED[tool_name]
    request = {"ledger": args["ledger"], "operation": operation}
    request |= {k: args[k] for k in fields if k in args}
    return request
