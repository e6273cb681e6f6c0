"""The checks a call passes before the gate asks its policy (see :mod:`ledger.gate.call`):
the function can be gated, its result is a value, its args are JSON, its evidence is refs.

>>> unusable_fn(print, sync=True)
''
>>> def gen():
...     yield 1
>>> unusable_fn(gen, sync=True)[:30]
'the tool is a generator functi'

Each check returns the problem (a reason the gate records and the caller reads) or an
empty/``None`` answer; none of them raises for a bad value except :func:`refs_of`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from types import FunctionType
from typing import Any

from ledger.gate.values import NotJSON
from ledger.model.values import Ref

__all__ = ["not_a_value", "not_json", "refs_of", "unusable_fn"]

_GENERATORS = inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR
_DEFERRED = _GENERATORS | inspect.CO_COROUTINE
_ASYNC = "the tool is async; call it with acall"


def unusable_fn(fn: Any, *, sync: bool) -> str:
    """Why ``fn`` cannot be gated (``""`` when it can): a tool's effect must happen
    inside the call, between the commit and the recorded result."""
    code = getattr(fn, "__code__", None)  # a plain function: its flags decide
    if code is not None and callable(fn):
        flags = code.co_flags
        if not flags & _DEFERRED:
            return ""
        if type(fn) is FunctionType and not flags & _GENERATORS:  # an ``async def``
            return _ASYNC if sync else ""
    if not callable(fn):
        return f"the tool function is not callable ({type(fn).__name__})"
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        return (
            "the tool is a generator function: its body would run after the gate recorded "
            "its result; return a value (for example a list) instead"
        )
    if sync and inspect.iscoroutinefunction(fn):
        return _ASYNC
    return ""


def not_a_value(tool: str, result: Any, *, sync: bool) -> TypeError | None:
    """The error for a result that is a deferred computation rather than a value (a
    coroutine in a sync call, a generator): it is closed unstarted, so it never runs."""
    if inspect.isgenerator(result) or (sync and inspect.iscoroutine(result)):
        result.close()
    elif not inspect.isasyncgen(result):
        return None
    how = "call it with acall" if inspect.iscoroutine(result) else "return a value instead"
    return TypeError(f'tool "{tool}" returned {type(result).__name__}, not a value; {how}')


def not_json(exc: NotJSON, redact: Callable[[Any], Any]) -> str:
    """The reason a call whose args are not JSON is denied: it names the argument and
    what was found (redacted: a nested dict key in the path could be anything)."""
    path = exc.path
    arg = path[0] if path else "?"
    inner = f" at {exc.where}" if len(path) > 1 else ""
    reason = (
        f"argument {arg!r} is not JSON ({exc.what}{inner}); args must be a JSON object (str, "
        "int, finite float, bool, None, list, dict with string keys) so that the record "
        "describes what would run"
    )
    try:
        return str(redact(reason))
    except Exception:
        return f"argument {arg!r} is not JSON ({exc.what})"


def refs_of(evidence: Iterable[Ref]) -> tuple[Ref, ...]:
    """The caller's evidence as a tuple of refs (one ``Ref`` is accepted as is)."""
    if isinstance(evidence, Ref):
        return (evidence,)
    refs = tuple(evidence)
    for ref in refs:
        if not isinstance(ref, Ref):
            raise TypeError(f"evidence must be Ref values, got {type(ref).__name__}")
    return refs
