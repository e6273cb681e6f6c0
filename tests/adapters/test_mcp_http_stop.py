"""The HTTP gateway once it stops: a request that reaches the SDK's session manager
after SIGTERM tore it down is answered ``503``, not logged by uvicorn as a traceback
(seen as a rare failure of the in-flight SIGTERM probe in ``test_probe_stdio_lane``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("mcp")

from ledger.adapters.mcp.gateway import _RefusedOnceStopped


class _TornDown:
    """The SDK's session manager after its task group is gone: it raises at once."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("Task group is not initialized. Make sure to use run().")


def _call(app: Any) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app({"type": "http", "method": "POST", "path": "/mcp"}, receive, send))
    return sent


def test_a_request_after_the_stop_is_answered_503() -> None:
    sent = _call(_RefusedOnceStopped(_TornDown(), lambda: True))
    assert sent[0]["type"] == "http.response.start"
    assert sent[0]["status"] == 503
    assert b"stopping" in sent[1]["body"]


def test_while_serving_an_error_of_the_app_is_not_hidden() -> None:
    with pytest.raises(RuntimeError, match="Task group"):
        _call(_RefusedOnceStopped(_TornDown(), lambda: False))


def test_a_request_racing_the_stop_is_answered_503() -> None:
    """The check passed, then the stop came while the request was inside the SDK."""
    stopped = False

    class _StopsMidway:
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            nonlocal stopped
            stopped = True
            raise RuntimeError("Task group is not initialized. Make sure to use run().")

    sent = _call(_RefusedOnceStopped(_StopsMidway(), lambda: stopped))
    assert [m.get("status") for m in sent if m["type"] == "http.response.start"] == [503]


def test_an_answer_cut_off_by_the_stop_is_not_started_twice() -> None:
    stopped = False

    class _CutOff:
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            nonlocal stopped
            await send({"type": "http.response.start", "status": 200, "headers": []})
            stopped = True
            raise RuntimeError("stream closed")

    sent = _call(_RefusedOnceStopped(_CutOff(), lambda: stopped))
    assert [m.get("status") for m in sent] == [200]
