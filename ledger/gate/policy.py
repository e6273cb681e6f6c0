"""Gate policies: who may run which tool. Values ``ToolCall`` and ``Decision``, the
``Policy`` role, and the built-ins.

>>> policy = AllowList(["write_file"], when={"write_file": lambda a: a["path"].endswith(".md")})
>>> policy.decide(ToolCall(tool="write_file", args={"path": "x.md"}, call_id="c1",
...                        run_id="r1", safe=False)).verdict
<Verdict.ALLOWED: 'allowed'>

A policy only *decides*; the gate enforces. Whatever a policy allows, a non-safe tool
still runs only after its ``action`` record is durably committed. Policies see the call's
raw arguments (so predicates can inspect real values); only redacted copies are stored.

``needs_approval`` is a request for a human: :class:`Approver` wraps another policy and
turns its ``needs_approval`` into the approver's yes or no. A ``needs_approval`` that
reaches the gate unanswered (no approver) is a denial (fail-closed).

Built-ins:

- :class:`DenyNonSafe` (the default): safe tools allowed; every other tool
  ``needs_approval``, so without an :class:`Approver` it is denied.
- :class:`AllowAll`: every tool allowed (the gate still demands a durable record).
- :class:`AllowList`: tools allowed by name, or only when a predicate over their
  arguments holds (a predicate always applies, also to a name listed in ``tools``); the
  rest get ``otherwise`` (``denied`` unless told).
- :class:`Approver`: asks ``callback(call)`` (sync or async) whenever the wrapped policy
  says ``needs_approval``; its answer and reason become the recorded decision.

A policy may also offer ``async def adecide(call)``; ``Run.acall`` awaits it when present
(an ``async def decide`` works from ``acall`` too; from a sync ``call`` it denies).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol, TypeAlias, runtime_checkable

from ledger.errors import ValidationError
from ledger.model.values import Approval as ModelApproval
from ledger.model.values import Verdict
from ledger.timefmt import utc_now

__all__ = [
    "AllowAll",
    "AllowList",
    "Approval",
    "Approver",
    "ApproverCallback",
    "Decision",
    "DenyNonSafe",
    "Policy",
    "ToolCall",
    "adecide",
    "decide",
]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call as a policy sees it: ``ToolCall(tool, args, call_id, run_id, safe)``
    (positionally, in the order above, or by keyword). ``args`` is a read-only view of the raw
    arguments; ``safe`` is true only for tools explicitly marked safe."""

    tool: str
    args: Mapping[str, Any]
    call_id: str
    run_id: str
    safe: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.args, MappingProxyType):
            object.__setattr__(self, "args", MappingProxyType(dict(self.args)))


@dataclass(frozen=True, slots=True, init=False)
class Decision:
    """A policy's answer: ``Decision("allowed", "why", "policy-id")`` or by keyword,
    ``Decision(verdict="allowed", reason="...", policy_id="p")``.

    ``verdict`` accepts the plain strings too (typed so, for ``mypy --strict`` callers)
    and is stored as a :class:`~ledger.model.Verdict`; ``reason`` is recorded and shown to
    the caller on a denial; ``policy_id`` names the policy that decided; ``approval``
    (a :class:`ledger.model.Approval`) says who approved the call, when and why, and is
    stored on its ``gate_decision`` and ``action``.
    """

    verdict: Verdict
    reason: str
    policy_id: str
    approval: ModelApproval | None

    def __init__(
        self,
        verdict: Verdict | str,
        reason: str,
        policy_id: str = "",
        *,
        approval: ModelApproval | None = None,
    ) -> None:
        try:
            member = Verdict(verdict)
        except ValueError:
            allowed = ", ".join(repr(v.value) for v in Verdict)
            raise ValidationError(
                f"decision verdict: {verdict!r} is not one of {allowed}"
            ) from None
        if not isinstance(reason, str) or not isinstance(policy_id, str):
            raise ValidationError("decision reason and policy_id must be strings")
        object.__setattr__(self, "verdict", member)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "policy_id", policy_id)
        if approval is not None and not isinstance(approval, ModelApproval):
            raise ValidationError("decision approval must be a ledger.model.Approval")
        object.__setattr__(self, "approval", approval)


@runtime_checkable
class Policy(Protocol):
    """Decides one call: ``policy.decide(call) -> Decision``. Raising denies the call.

    The policy decides every call, those of tools marked safe too (``call.safe`` tells):
    a policy that should not block reads returns ``allowed`` for them, as the built-ins
    do. Safe only spares a call the durable commit; it never bypasses the policy.
    """

    def decide(self, call: ToolCall) -> Decision: ...


def decide(policy: Policy, call: ToolCall) -> Decision:
    """Ask ``policy`` synchronously (what ``Run.call`` does)."""
    decision: object = policy.decide(call)
    if inspect.isawaitable(decision):  # an ``async def decide``: only acall can await it
        close = getattr(decision, "close", None)
        if close is not None:
            close()
        raise ValidationError(
            f"policy {type(policy).__name__}.decide is async; call the tool with acall "
            "(or give the policy a sync decide)"
        )
    if not isinstance(decision, Decision):
        raise ValidationError(
            f"policy {type(policy).__name__} returned {type(decision).__name__}, not a Decision"
        )
    return decision


async def adecide(policy: Policy, call: ToolCall) -> Decision:
    """Ask ``policy`` from async code: its ``adecide`` when it has one, else ``decide``."""
    async_decide = getattr(policy, "adecide", None)
    if async_decide is not None:
        decision = await async_decide(call)
    else:
        decision = policy.decide(call)
        if inspect.isawaitable(decision):  # an ``async def decide`` is awaited here
            decision = await decision
    if not isinstance(decision, Decision):
        raise ValidationError(
            f"policy {type(policy).__name__} returned {type(decision).__name__}, not a Decision"
        )
    return decision


class AllowAll:
    """Allow every call: ``Gate(sink, policy=AllowAll())``. Durability is still enforced."""

    policy_id = "allow-all"

    def decide(self, call: ToolCall) -> Decision:
        return Decision(verdict=Verdict.ALLOWED, reason="allow-all policy", policy_id="allow-all")

    def __repr__(self) -> str:
        return "AllowAll()"


class DenyNonSafe:
    """The default: safe tools run; any other tool needs approval, which only an
    :class:`Approver` can give, so on its own every non-safe call is denied."""

    def decide(self, call: ToolCall) -> Decision:
        if call.safe:
            return Decision(verdict=Verdict.ALLOWED, reason="safe tool", policy_id="deny-non-safe")
        return Decision(
            verdict=Verdict.NEEDS_APPROVAL,
            reason=f"non-safe tool {call.tool!r} needs approval",
            policy_id="deny-non-safe",
        )

    def __repr__(self) -> str:
        return "DenyNonSafe()"


ArgsPredicate: TypeAlias = Callable[[Mapping[str, Any]], bool]


class AllowList:
    """Allow tools by name, and others only when a predicate over their args holds.

    >>> AllowList(["search"], when={"write_file": lambda a: a["path"].startswith("out/")})
    AllowList(['search'], when=['write_file'])

    Safe tools are always allowed. A tool in ``when`` is allowed only when its predicate
    returns true, whether or not it is also listed in ``tools`` (so ``AllowList(["w"],
    when={"w": pred})`` is the same as ``AllowList(when={"w": pred})``: a condition is
    never silently skipped). A tool listed in ``tools`` and not in ``when`` is allowed
    whatever its args. Anything else gets ``otherwise``: ``denied`` by default, or
    ``needs_approval`` to send it to an :class:`Approver` that wraps this policy. A
    predicate that raises denies the call (the gate treats a failing policy so).
    """

    def __init__(
        self,
        tools: Iterable[str] = (),
        *,
        when: Mapping[str, ArgsPredicate] | None = None,
        otherwise: Verdict | str = Verdict.DENIED,
        policy_id: str = "allow-list",
    ) -> None:
        if isinstance(tools, str):
            raise ValidationError("AllowList tools: give a list of names, not one string")
        self.tools = frozenset(tools)
        self.when: Mapping[str, ArgsPredicate] = MappingProxyType(dict(when or {}))
        self.otherwise = Verdict(otherwise)
        if self.otherwise is Verdict.ALLOWED:
            raise ValidationError("AllowList otherwise: use AllowAll to allow everything")
        self.policy_id = policy_id

    def decide(self, call: ToolCall) -> Decision:
        pid = self.policy_id
        if call.safe:
            return Decision(verdict=Verdict.ALLOWED, reason="safe tool", policy_id=pid)
        predicate = self.when.get(call.tool)
        if predicate is None and call.tool in self.tools:
            reason = f"{call.tool!r} is on the allow-list"
            return Decision(verdict=Verdict.ALLOWED, reason=reason, policy_id=pid)
        if predicate is None:
            reason = f"{call.tool!r} is not on the allow-list"
        elif predicate(call.args):
            reason = f"the arguments of {call.tool!r} satisfy its allow-list condition"
            return Decision(verdict=Verdict.ALLOWED, reason=reason, policy_id=pid)
        else:
            reason = f"the arguments of {call.tool!r} do not satisfy its allow-list condition"
        return Decision(verdict=self.otherwise, reason=reason, policy_id=pid)

    def __repr__(self) -> str:
        return f"AllowList({sorted(self.tools)!r}, when={sorted(self.when)!r})"


Approval: TypeAlias = bool | tuple[bool, str] | tuple[bool, str, str] | Decision
"""An approver's answer: yes/no, (yes/no, reason), (yes/no, reason, who answered), or a
full :class:`Decision` (its ``approval`` names who)."""

ApproverCallback: TypeAlias = Callable[[ToolCall], Approval | Awaitable[Approval]]


class Approver:
    """A human (or any callback) answers the calls another policy marks ``needs_approval``.

    >>> policy = Approver(lambda call: (call.tool == "write_file", "ok"))
    >>> call = ToolCall(tool="write_file", args={}, call_id="c1", run_id="r1")
    >>> policy.decide(call).reason
    "non-safe tool 'write_file' needs approval; approved by approver: ok"

    ``callback(call)`` returns ``True``/``False``, ``(bool, reason)``, ``(bool, reason,
    approver)`` or a ``Decision``, or an awaitable of one (an ``async def`` callback). The
    answer is recorded with who gave it and when (``Event.approval``): the approver the
    answer names, else ``approver=`` given here, else ``name``. The recorded decision is the
    approver's: verdict ``allowed`` or ``denied``, reason ``"<policy reason>; approved by
    <name>: <answer reason>"`` (or ``denied by``), ``policy_id`` ``name``. Calls the wrapped
    policy (default :class:`DenyNonSafe`) allows or denies outright never reach the
    callback; they keep the wrapped policy's decision and id (a denial says which policy
    refused), except for tools marked safe, whose decisions carry ``name``: the policy
    the user configured, so a safe read is labelled ``safe:<name>``, not
    ``safe:deny-non-safe``. An async callback cannot answer a sync ``Run.call`` made
    inside a running event loop; such a call is denied (use ``acall``). A sync callback
    called from ``acall`` runs on the event loop, so it should not block for long.
    """

    def __init__(
        self,
        callback: ApproverCallback,
        *,
        policy: Policy | None = None,
        name: str = "approver",
        approver: str | None = None,
    ) -> None:
        if not callable(callback):
            raise ValidationError("Approver callback must be callable")
        if approver is not None and (not isinstance(approver, str) or not approver.strip()):
            raise ValidationError("approver: name who answers (a non-empty string)")
        self.callback = callback
        self.policy: Policy = policy if policy is not None else DenyNonSafe()
        self.name = name
        self.approver = approver or name

    def decide(self, call: ToolCall) -> Decision:
        first = decide(self.policy, call)
        if first.verdict is not Verdict.NEEDS_APPROVAL:
            return self._passed(call, first)
        answer = self.callback(call)
        if inspect.isawaitable(answer):
            awaited = self._run_sync(answer)
            if awaited is None:
                return Decision(
                    verdict=Verdict.DENIED,
                    reason=f"{first.reason}; the async approver {self.name!r} cannot answer a "
                    "sync call inside a running event loop (use acall)",
                    policy_id=self.name,
                )
            return self._answer(first, awaited)
        return self._answer(first, answer)

    async def adecide(self, call: ToolCall) -> Decision:
        first = await adecide(self.policy, call)
        if first.verdict is not Verdict.NEEDS_APPROVAL:
            return self._passed(call, first)
        answer = self.callback(call)
        if inspect.isawaitable(answer):
            answer = await answer
        return self._answer(first, answer)

    def _passed(self, call: ToolCall, first: Decision) -> Decision:
        """The wrapped policy's own decision, labelled with this approver for safe tools."""
        if not call.safe:
            return first
        return Decision(verdict=first.verdict, reason=first.reason, policy_id=self.name)

    @staticmethod
    def _run_sync(awaitable: Awaitable[Approval]) -> Approval | None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(_await(awaitable))
        close = getattr(awaitable, "close", None)
        if close is not None:
            close()
        return None

    def _answer(self, first: Decision, answer: object) -> Decision:
        return approver_decision(first, answer, name=self.name, approver=self.approver)

    def __repr__(self) -> str:
        return f"Approver({self.callback!r}, policy={self.policy!r}, name={self.name!r})"


async def _await(awaitable: Awaitable[Approval]) -> Approval:
    return await awaitable


def approver_decision(first: Decision, answer: object, *, name: str, approver: str) -> Decision:
    """The recorded decision for an approver's ``answer`` to a call ``first`` marked
    ``needs_approval``: verdict from the answer, reason ``"<first reason>; approved by
    <name>: <answer reason>"`` (or ``denied by``), ``policy_id`` ``name``, and who answered
    and when (the approver the answer names, else ``approver``). The one reading of an
    approver's answer: :class:`Approver` and policy files' ``ask`` rules both use it."""
    answered_at = utc_now()
    who = approver
    given: ModelApproval | None = None
    if isinstance(answer, Decision):
        ok, said, given = answer.verdict is Verdict.ALLOWED, answer.reason, answer.approval
    elif isinstance(answer, bool):
        ok, said = answer, ""
    elif (
        isinstance(answer, tuple)
        and len(answer) in (2, 3)
        and isinstance(answer[0], bool)
        and all(isinstance(part, str) for part in answer[1:])
    ):
        ok, said = answer[0], answer[1]
        if len(answer) == 3 and answer[2].strip():
            who = answer[2]
    else:
        raise ValidationError(
            f"approver {name!r} answered {type(answer).__name__}; expected a bool, "
            "(bool, reason), (bool, reason, approver) or a Decision"
        )
    verb = "approved by" if ok else "denied by"
    reason = f"{first.reason}; {verb} {name}" + (f": {said}" if said else "")
    verdict = Verdict.ALLOWED if ok else Verdict.DENIED
    approval = given or ModelApproval(approver=who, time=answered_at, reason=said)
    return Decision(verdict=verdict, reason=reason, policy_id=name, approval=approval)
