"""In ``acall`` (and ``async with``), large values are redacted on the gate's worker
threads, never on the event loop: another task keeps running meanwhile. Measured by
counting the ticks of a concurrent task, not by timing."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from ledger.errors import ToolDenied
from ledger.gate import AllowAll, Gate, redact_secrets
from ledger.model import Kind, Verdict
from ledger.sinks import SQLiteSink

BIG = 200_000


def _size(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_size(k) + _size(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(map(_size, value))
    return 0


class Witness:
    """A redactor that, for a large value, waits until a task on the event loop has
    ticked a few times: possible only when it does not itself run on the loop."""

    def __init__(self) -> None:
        self.ticks = 0
        self.loop_thread: threading.Thread | None = None
        self.seen: list[tuple[bool, int]] = []  # (ran on the loop thread, ticks meanwhile)

    def __call__(self, value: Any) -> Any:
        if _size(value) >= BIG:
            start, give_up = self.ticks, time.monotonic() + 10  # a hang guard, not a bar
            while self.ticks < start + 5 and time.monotonic() < give_up:
                time.sleep(0.001)
            self.seen.append((threading.current_thread() is self.loop_thread, self.ticks - start))
        return redact_secrets(value)

    async def tick(self) -> None:
        while True:
            self.ticks += 1
            await asyncio.sleep(0)


def test_large_request_args_and_result_are_redacted_off_the_loop(sqlite_sink: SQLiteSink) -> None:
    witness = Witness()
    gate = Gate(sqlite_sink, policy=AllowAll(), redact=witness)
    big = "x" * BIG + " password=hunter2"

    async def echo(text: str) -> str:
        return text

    async def main() -> str:
        witness.loop_thread = threading.current_thread()
        ticker = asyncio.create_task(witness.tick())
        try:
            async with gate.run(big) as run:  # the request
                await run.acall("write", {"text": big}, echo)  # its args, then its result
            return run.run_id
        finally:
            ticker.cancel()

    run_id = asyncio.run(main())
    assert len(witness.seen) == 3  # request, args, result
    assert all(not on_loop and ticks >= 5 for on_loop, ticks in witness.seen)
    events = list(sqlite_sink.events(run_id=run_id))
    assert all("hunter2" not in e.to_json() for e in events)
    assert [e.kind for e in events].count(Kind.TOOL_RESULT) == 1


def test_small_args_stay_on_the_loop_and_are_redacted_the_same(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())

    async def main() -> str:
        async with gate.run("x") as run:
            await run.acall("write", {"api_key": "k-1", "note": "token=abc"}, lambda **kw: kw)
            return run.run_id

    (action,) = sqlite_sink.events(run_id=asyncio.run(main()), kind=Kind.ACTION)
    assert action.args == '{"api_key":"[REDACTED]","note":"token=[REDACTED]"}'


def test_an_adversarial_megabyte_is_redacted_in_acall(sqlite_sink: SQLiteSink) -> None:
    """The review's input, scaled up: it is redacted, whole, and the loop went on."""
    gate = Gate(sqlite_sink, policy=AllowAll())
    text = "a-" * 500_000 + " token=" + "Zq9" * 10
    ticks = [0]

    async def tick() -> None:
        while True:
            ticks[0] += 1
            await asyncio.sleep(0)

    async def main() -> str:
        ticker = asyncio.create_task(tick())
        try:
            async with gate.run("x") as run:
                await run.acall("write", {"text": text}, lambda text: len(text))
                return run.run_id
        finally:
            ticker.cancel()

    (action,) = sqlite_sink.events(run_id=asyncio.run(main()), kind=Kind.ACTION)
    assert "Zq9Zq9" not in (action.args or "") and "token=[REDACTED]" in (action.args or "")
    assert ticks[0] > 0


def test_large_args_of_denied_attempts_are_redacted_off_the_loop(
    sqlite_sink: SQLiteSink,
) -> None:
    """Refused before the policy (a generator tool; outside any run) or by it: the
    attempt's record is still built off the event loop."""
    witness = Witness()
    gate = Gate(sqlite_sink, redact=witness)  # DenyNonSafe: "write" is refused
    big = "y" * BIG

    def generator(text: str) -> Any:
        yield text

    @gate.tool()
    async def orphan(text: str) -> None: ...

    async def main() -> None:
        witness.loop_thread = threading.current_thread()
        ticker = asyncio.create_task(witness.tick())
        try:
            with pytest.raises(ToolDenied, match="no active run"):
                await orphan(text=big)
            async with gate.run("x") as run:
                for fn in (generator, lambda text: None):
                    with pytest.raises(ToolDenied):
                        await run.acall("write", {"text": big}, fn)
        finally:
            ticker.cancel()

    asyncio.run(main())
    assert len(witness.seen) == 3
    assert all(not on_loop and ticks >= 5 for on_loop, ticks in witness.seen)
    denied = [e for e in sqlite_sink.events(kind=Kind.ACTION) if e.verdict is Verdict.DENIED]
    assert len(denied) == 3
