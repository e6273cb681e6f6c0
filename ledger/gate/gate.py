"""``Gate``: "no durable record, no action", enforced at the tool boundary.

>>> import pathlib, tempfile
>>> from ledger.gate.policy import Approver
>>> from ledger.sinks import SQLiteSink
>>> sink = SQLiteSink(pathlib.Path(tempfile.mkdtemp()) / "ledger.db")
>>> ask_human = lambda call: (True, "the notes are mine")
>>> gate = Gate(sink, policy=Approver(ask_human), safe_tools={"read_file"})
>>> @gate.tool(safe=True)
... def read_file(path: str) -> str:
...     return "buy milk"
>>> def write_file(path: str, text: str) -> int:
...     return len(text)
>>> with gate.run("tidy the notes", agent_path="planner") as run:
...     text = read_file(path="notes.txt")                     # finds its run by context
...     run.call("write_file", {"path": "a", "text": text}, write_file)
8
>>> why = sink.chain(run.run_id).why(run.last_call_id)     # why was the file written?
>>> "the notes are mine" in str(why)
True
>>> sink.close()

An effectful (non-safe) tool runs only after the policy allowed it and a self-explaining
``action`` record was committed by a ``DurableSink``; every denied or blocked attempt is
recorded as an ``action`` with verdict ``denied``. See :mod:`ledger.gate.run` for runs,
:mod:`ledger.gate.call` for the flow of one call, :mod:`ledger.gate.policy` for policies,
:mod:`ledger.gate.redact` for redaction and :mod:`ledger.gate.events` for what each
event holds.

Decisions worth knowing:

- **Fail closed.** No active run, a sink without ``commit_action``, a failed or refused
  commit, a policy that raises or answers anything but a ``Decision``, a ``needs_approval``
  nobody answered, a redactor that raises or breaks the JSON shape, or any error inside
  the gate: the tool does not run and the caller gets :class:`~ledger.errors.ToolDenied`
  with the reason; a best-effort ``action(denied)`` records why, and the arguments that
  were tried (redacted) whenever they can be serialized. ``ToolDenied.reason`` is the why
  alone (as recorded); ``str(exc)`` is ``action "<tool>" denied: <reason>``; ``.tool``
  and ``.call_id`` name the call.
- **Runs live in context variables**, so many runs may be active at once in threads and
  asyncio tasks, and a decorated tool finds the innermost active run *of its gate*
  without being passed one. A task created inside a run inherits it; a new thread does
  not (copy the context, or pass the run). A nested ``gate.run`` is a separate run; the
  outer run is active again when it exits.
- **The run's head.** If the ``request`` event cannot be recorded the run still starts
  (safe tools still run, and ``run.head_recorded`` is false), but every non-safe call
  first retries writing the request and is denied while that fails: an action must not
  cite a request the ledger does not have.
- **Outside a run** a decorated tool (safe or not) is denied; the attempt is recorded
  best-effort as ``action(denied)`` under its own run id ``"norun-" + ULID``, never under
  an empty run id.
- **Safe** means explicitly marked: ``safe_tools`` names or ``@gate.tool(safe=True)``.
  Safe calls skip the durable commit; their decisions and results are still recorded.
  The policy still decides them (``call.safe`` tells it); the built-ins allow them.
- **Durable** means able to commit: the sink has a callable ``commit_action`` (the one
  :class:`~ledger.sinks.DurableSink` method the gate uses). Otherwise every non-safe
  call is denied with a reason that names the sink's type.
- **The record holds what runs.** ``args`` is copied once per call (a shallow snapshot):
  the policy sees it read-only, the recorded ``args`` are serialized from it *after*
  the policy decided, and the function gets exactly it. (Nested mutable values shared
  with other threads must not change while the call is in flight.) Args must be JSON
  (str, int within 64 bits, finite float, bool, None, lists, tuples and dicts with string
  keys): any other value would be recorded as something other than what runs, so the
  call is denied before the policy is asked, with a reason naming the argument and type
  (its denied record shows ``"[not JSON: <type>]"``). Results are not held to this: the
  tool has run, and a result that is not JSON is recorded as its text form.
- **What can be gated**: a function whose effect happens inside the call. Generator and
  async-generator functions are denied (their body would run after the result was
  recorded); a returned generator or, in ``call``, coroutine is closed unstarted and
  fails the call with ``TypeError``. The tool name must be a non-empty string and a
  given ``call_id`` a string. ``@gate.tool`` binds positional arguments to parameter
  names and flattens ``**kwargs``; a call that does not fit the signature raises
  ``TypeError`` before the gate (nothing is recorded); functions with positional-only
  or ``*args`` parameters are refused when decorated.
- Best-effort writes (request, retrieved, gate_decision, denials, tool_result, run_end,
  abort) never raise into the agent; failures are logged on the ``ledger.gate.gate`` logger.
  Only the ``action`` commit is on the durable path, and its failure denies the call.
- **The request event** (chain head) holds the redacted request text as a JSON string in
  ``args`` and, bounded to 200 characters, in ``preview``. If the request cannot be
  redacted it is withheld (``"[request withheld: redaction failed]"``) and non-safe calls
  of the run are denied. Run ids default to a fresh ULID string; ``""`` counts as none.
- **Call ids**: ``None`` mints ``"call_" + ULID``; a call id reused within a run is denied.
- **Names are redacted and must fit the sink** (:mod:`ledger.gate.names`): the tool
  name, a given run id or call id, the agent path and ref ids go through the redactor
  (a redacted run id or call id gets a ``#<ULID>`` suffix; ``run.run_id`` and
  ``run.last_call_id`` are the ids as recorded). A tool name or call id the sink cannot
  store (:class:`~ledger.sinks.base.KeyLimits`: NUL or over 2,048 bytes on PostgreSQL, a
  lone surrogate anywhere) denies the call, recorded escaped or cut with the name's
  hash; such a run id or agent path refuses the run at ``Gate.run``
  (``ValidationError``), after recording the attempt.
- **Interrupted calls** (:mod:`ledger.gate.interrupt`): a ``BaseException`` at any step
  before the tool runs is re-raised unchanged, and the stored decision and action of the
  call agree; one inside ``commit_action`` is settled by recording the denial under the
  action's own event id (``DuplicateEvent``: the action was stored, and a
  ``tool_result`` says the tool did not run).
- **Approvals**: the gate records one ``gate_decision`` per call, the final one: an
  :class:`Approver`'s answer becomes its verdict, its reason
  (``"...; approved by <name>: <reason>"``) and its ``label`` (the policy id, the
  approver's name). The allowed ``action`` repeats the reason and adds the request.
- **Cancellation**: an ``async with`` block that is cancelled records ``abort`` with
  reason ``"cancelled"``; any other exception records ``abort`` with
  ``"<Type>: <message>"`` (redacted). ``CancelledError`` and every exception are
  re-raised unchanged.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, overload

from ledger.errors import ToolDenied
from ledger.gate.denial import denied_error
from ledger.gate.events import CallState, denial_event, describe_attempt, new_call_id
from ledger.gate.policy import (
    Policy,
)
from ledger.gate.recorder import Recorder, in_thread
from ledger.gate.redact import Redactor, redact_secrets
from ledger.gate.run import Run, active_runs
from ledger.gate.values import bounded
from ledger.ids import new_event_id
from ledger.model.values import OUTSIDE_RUN_PREFIX, Ref
from ledger.sinks.base import Sink

__all__ = ["Gate"]

log = logging.getLogger("ledger.gate")
F = TypeVar("F", bound=Callable[..., Any])


class Gate:
    """The middleware an agent framework embeds around its tools.

    ``Gate(sink, *, policy=DenyNonSafe(), safe_tools=(), redact=redact_secrets)``.
    ``sink`` receives every event; non-safe calls need it to be a ``DurableSink``.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        policy: Policy | None = None,
        safe_tools: Iterable[str] = (),
        redact: Redactor = redact_secrets,
    ) -> None:
        self._recorder = Recorder(sink, policy=policy, safe_tools=safe_tools, redact=redact)

    # The settings live in the recorder, which the runs and calls share.
    @property
    def sink(self) -> Sink:
        """The sink every event of this gate goes to."""
        return self._recorder.sink

    @property
    def policy(self) -> Policy:
        """The policy that decides each call."""
        return self._recorder.policy

    @property
    def safe_tools(self) -> frozenset[str]:
        """The names of the tools marked safe at construction."""
        return self._recorder.safe_tools

    @property
    def redact(self) -> Redactor:
        """The redactor applied to everything recorded."""
        return self._recorder.redact

    @property
    def durable(self) -> bool:
        """Whether the sink can commit an action (non-safe calls need it)."""
        return self._recorder.durable

    @property
    def not_durable(self) -> str:
        """The reason non-safe calls are denied when the sink is not durable."""
        return self._recorder.not_durable

    def __repr__(self) -> str:
        return f"Gate({self.sink!r}, policy={self.policy!r}, safe_tools={sorted(self.safe_tools)})"

    def run(
        self,
        request: str,
        *,
        agent_path: str = "",
        run_id: str | None = None,
        principal: str | None = None,
        agent_id: str = "",
        agent_version: str = "",
    ) -> Run:
        """A new run; enter it with ``with`` or ``async with`` to record its request.

        ``principal`` names who the run acts for (a user, a service), ``agent_id`` and
        ``agent_version`` the agent itself; they are stored on every event of the run
        (``Event.actor``) and shown by ``ledger chain``, ``ledger why`` and the report.

        >>> from ledger.sinks import DiscardSink
        >>> Gate(DiscardSink()).run("tidy up", principal="alice@example.com").principal
        'alice@example.com'
        """
        return Run(
            self._recorder,
            request,
            agent_path=agent_path,
            run_id=run_id,
            principal=principal,
            agent_id=agent_id,
            agent_version=agent_version,
        )

    def current_run(self) -> Run | None:
        """The innermost run of this gate active in this thread or task, if any."""
        for run in reversed(active_runs()):
            if run.recorder is self._recorder:
                return run
        return None

    @overload
    def tool(self, fn: F, /, *, name: str | None = None, safe: bool = False) -> F: ...
    @overload
    def tool(
        self, fn: None = None, /, *, name: str | None = None, safe: bool = False
    ) -> Callable[[F], F]: ...

    def tool(
        self, fn: F | None = None, /, *, name: str | None = None, safe: bool = False
    ) -> F | Callable[[F], F]:
        """Wrap a sync or async tool function so each call goes through the gate.

        >>> from ledger.gate.policy import AllowAll
        >>> from ledger.sinks import DiscardSink
        >>> gate = Gate(DiscardSink(), policy=AllowAll())
        >>> @gate.tool(name="write_file")
        ... def write(path: str, text: str) -> int:
        ...     return len(text)
        >>> write(path="a.txt", text="hi")   # outside a run: denied, as is a non-durable sink
        Traceback (most recent call last):
        ledger.errors.ToolDenied: action "write_file" denied: no active run (no record, no action)

        The call's arguments (positional ones are bound to their parameter names) are the
        recorded ``args``. A call may cite evidence with ``evidence=[ref, ...]``, which the
        wrapper takes and does not pass on (unless the tool has a parameter of that name:
        then cite with ``run.cite(...)``). Passed to ``run.call``, a decorated tool is
        gated once, not twice. Outside a run of this gate the call is denied. ``safe=True``
        marks a read-only tool (``safe_tools`` names are safe too).
        """
        if fn is not None:
            return self._wrap(fn, name, safe)
        return lambda f: self._wrap(f, name, safe)

    def _wrap(self, fn: F, name: str | None, safe: bool) -> F:
        if not callable(fn):
            raise TypeError(f"gate.tool wraps a function, got {type(fn).__name__}")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise TypeError("gate.tool name must be a non-empty string (or None: the function's)")
        tool_name: str = name or str(getattr(fn, "__name__", "") or type(fn).__name__)
        is_safe = safe or tool_name in self.safe_tools
        kwargs_of = _keyword_binder(fn, tool_name)
        takes_evidence = _has_parameter(fn, "evidence")

        def split(kwargs: dict[str, Any]) -> tuple[dict[str, Any], tuple[Ref, ...]]:
            if takes_evidence or "evidence" not in kwargs:
                return kwargs, ()
            cited = kwargs.pop("evidence")
            if isinstance(cited, Ref):
                return kwargs, (cited,)
            if cited is None:
                return kwargs, ()
            return kwargs, tuple(cited)

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                kwargs, cited = split(kwargs)
                call_args = kwargs_of(args, kwargs)
                run = self.current_run()
                if run is None:  # recorded on a worker thread: not on the event loop
                    raise await in_thread(self._orphan, tool_name, call_args)
                return await run._acall(tool_name, call_args, fn, None, cited, is_safe)

            wrapper: Any = async_wrapper
        else:

            @functools.wraps(fn)
            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                kwargs, cited = split(kwargs)
                call_args = kwargs_of(args, kwargs)
                run = self.current_run()
                if run is None:
                    raise self._orphan(tool_name, call_args)
                return run._call(tool_name, call_args, fn, None, cited, is_safe)

            wrapper = sync_wrapper
        wrapper.tool_name = tool_name
        wrapper.safe = is_safe
        wrapper.__ledger_gated__ = fn  # run.call unwraps it: one gate per call
        return wrapper  # type: ignore[no-any-return]

    def _orphan(self, tool: str, args: dict[str, Any]) -> ToolDenied:
        """Deny a call made outside any run, recording it under a run id of its own."""
        reason = "no active run (no record, no action)"
        name = self._recorder.name(tool, "tool name")
        if name.refused:
            reason = f"{reason}; {name.refused}"
        cs = CallState(
            run_id=f"{OUTSIDE_RUN_PREFIX}{new_event_id()}",
            agent_path="",
            tool=name.value,
            asked=tool,
            call_id=new_call_id(),
            safe=False,
            preview=bounded(name.value),
            redact=self.redact,
            kwargs=args,
        )
        describe_attempt(cs)
        self._recorder.write([denial_event(cs, reason)])
        return denied_error(tool, reason, cs.call_id)


def _keyword_binder(
    fn: Callable[..., Any], tool_name: str
) -> Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]:
    """How a decorated tool's call becomes the keyword ``args`` it is recorded and called
    with. Positional arguments are bound to their parameter names and ``**kwargs`` are
    flattened; a call that does not fit the signature raises ``TypeError`` before the gate
    sees it, as calling the function would. A tool with positional-only or ``*args``
    parameters cannot be called with keywords alone, so it is refused when decorated."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature (some builtins): keywords as given
        return lambda args, kwargs: kwargs if not args else _no_positional(tool_name)
    params = signature.parameters.values()
    bad = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL)]
    if bad:
        raise TypeError(
            f"gate.tool: tool {tool_name!r} has positional-only or *args parameters "
            f"({', '.join(bad)}); a tool is called with its args as keyword arguments"
        )
    var_kw = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)

    def kwargs_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        bound = signature.bind(*args, **kwargs).arguments
        if not args:
            return kwargs
        if var_kw is not None and var_kw in bound:
            extra = bound.pop(var_kw)
            bound.update(extra)
        return dict(bound)

    return kwargs_of


def _no_positional(tool_name: str) -> dict[str, Any]:
    raise TypeError(f"tool {tool_name!r}: pass its arguments by keyword")


def _has_parameter(fn: Callable[..., Any], name: str) -> bool:
    """Does ``fn`` take a parameter called ``name`` (or any keyword, ``**kwargs``)?"""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
