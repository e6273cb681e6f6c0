"""A gate policy written as a YAML file, for the library's ``Gate`` and ``ledger mcp proxy``.

>>> policy = policy_from_file("policy.yaml")       # also ledger.policy_from_file  # doctest: +SKIP
>>> gate = Gate(sink, policy=policy, safe_tools=policy.safe_tools)  # doctest: +SKIP

The file (every key but ``version`` is optional)::

    version: 1
    default: deny            # what a tool not named below gets: deny (the default), ask, allow
    safe:                    # read-only tools: forwarded and recorded, no durable commit
      - git_status
      - git_log
    approval:                # who answers "ask"
      command: ["./approve.sh"]   # or one string, split like a shell would
      timeout: 60                 # seconds; no answer in time is a denial
    tools:
      git_commit: deny
      git_add: allow
      write_file:
        decision: ask        # allow | deny | ask
        reason: "writes need a human"
        args:                # argument rules: every rule must hold, or the call is denied
          path:
            path_prefix: ["/srv/out/", "/tmp/scratch"]
          mode:
            one_of: ["w", "a"]
            optional: true   # a rule on an argument the call leaves out denies, unless optional

Decisions:

- ``allow``: allowed (a non-safe tool still runs only after its durable commit).
- ``deny``: denied, with ``reason`` when given.
- ``ask``: ``needs_approval``, answered by ``approval.command`` or by the ``approver``
  callback given to :func:`policy_from_file` (the callback wins when both are set). With
  neither, the gate denies the call (fail-closed).
- Argument rules run before the decision: a rule that does not hold denies the call,
  whatever the decision says. Rules: ``path_prefix`` (a string, or a list of strings,
  each of which must lie under one of the prefixes after ``.``/``..`` are collapsed;
  symbolic links are not followed, since the gate does not own the file system),
  ``one_of`` (a list of allowed values), ``equals``, ``pattern`` (a regular expression the
  whole string must match), ``max_length`` (for strings and lists), ``optional``.
- A tool listed under ``safe`` is safe; it may not also appear under ``tools`` with
  ``deny`` or ``ask`` (that would be two answers for one tool). Safe tools are allowed
  unless an argument rule in ``tools`` says otherwise.

The command answering ``ask`` gets the call as one JSON object on standard input
(``{"tool", "args", "call_id", "run_id"}``, the raw arguments) and approves by exiting
with status 0; any other status, a timeout, or a command that cannot start is a denial.
The first line of its standard output is recorded as the reason.

Every mistake in the file is a :class:`PolicyFileError` naming the file, the line and the
key, and saying what is accepted: an unknown key (a typo), a wrong type, an unknown
decision, a bad regular expression.
"""

from __future__ import annotations

import asyncio
import json
import os
import posixpath
import re
import shlex
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.errors import ValidationError
from ledger.gate.policy import (
    Approval,
    Approver,
    ApproverCallback,
    Decision,
    ToolCall,
    approver_decision,
)
from ledger.model.values import Verdict

if TYPE_CHECKING:  # PyYAML is imported when a policy is parsed, not with `import ledger`
    import yaml

__all__ = [
    "ArgRule",
    "FilePolicy",
    "PolicyFileError",
    "ToolRule",
    "parse_policy",
    "policy_from_file",
]

_DECISIONS = {"allow": Verdict.ALLOWED, "deny": Verdict.DENIED, "ask": Verdict.NEEDS_APPROVAL}
_TOP_KEYS = ("version", "default", "safe", "approval", "tools")
_TOOL_KEYS = ("decision", "reason", "args")
_RULE_KEYS = ("path_prefix", "one_of", "equals", "pattern", "max_length", "optional")
_APPROVAL_KEYS = ("command", "timeout")
POLICY_ID = "policy-file"


class PolicyFileError(ValidationError):
    """A policy file that cannot be used: the message names the file, line and key."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ArgRule:
    """The conditions one argument must meet (see the module docstring)."""

    name: str
    path_prefix: tuple[str, ...] = ()
    one_of: tuple[Any, ...] | None = None
    equals: Any = None
    has_equals: bool = False
    pattern: re.Pattern[str] | None = None
    max_length: int | None = None
    optional: bool = False

    def problem(self, args: Mapping[str, Any]) -> str:
        """Why ``args`` breaks this rule, or ``""`` when it holds."""
        if self.name not in args:
            return "" if self.optional else f"argument {self.name!r} is required by the policy"
        value = args[self.name]
        if self.path_prefix:
            why = _path_problem(self.name, value, self.path_prefix)
            if why:
                return why
        if self.one_of is not None and not any(_same(value, v) for v in self.one_of):
            return f"argument {self.name!r} is not one of the allowed values"
        if self.has_equals and not _same(value, self.equals):
            return f"argument {self.name!r} is not the value the policy allows"
        if self.pattern is not None and (
            not isinstance(value, str) or self.pattern.fullmatch(value) is None
        ):
            return f"argument {self.name!r} does not match the pattern {self.pattern.pattern!r}"
        if self.max_length is not None:
            if not isinstance(value, str | list | tuple):
                return f"argument {self.name!r} has no length (max_length needs text or a list)"
            if len(value) > self.max_length:
                return f"argument {self.name!r} is longer than {self.max_length}"
        return ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRule:
    """What the file says about one tool."""

    tool: str
    verdict: Verdict
    reason: str = ""
    args: tuple[ArgRule, ...] = ()


def _same(a: Any, b: Any) -> bool:
    # True == 1 in Python; a policy that allows 1 must not allow true.
    return type(a) is type(b) and bool(a == b)


def _norm_path(text: str) -> str:
    return posixpath.normpath(text.replace(os.sep, "/")) if text else ""


def _under(path: str, prefix: str) -> bool:
    if prefix == "/":
        return path.startswith("/")
    return path == prefix or path.startswith(prefix + "/")


def _path_problem(name: str, value: Any, prefixes: tuple[str, ...]) -> str:
    items = value if isinstance(value, list | tuple) else [value]
    if isinstance(value, list | tuple) and not value:
        return ""
    for item in items:
        if not isinstance(item, str) or not item or "\x00" in item:
            return f"argument {name!r} is not a path (path_prefix needs text)"
        norm = _norm_path(item)
        if not any(_under(norm, p) for p in prefixes):
            shown = ", ".join(repr(p) for p in prefixes)
            return f"argument {name!r} ({item!r}) is not under an allowed path ({shown})"
    return ""


class FilePolicy:
    """A :class:`~ledger.gate.policy.Policy` loaded from a policy file.

    ``decide(call)`` / ``adecide(call)``; ``safe_tools`` (give them to the ``Gate``),
    ``default`` (the verdict for unnamed tools), ``rules`` (per tool), ``source`` (the
    file, for messages). Decisions carry ``policy_id`` ``"policy-file"``, or the
    approver's ``"policy-file:approval"`` for answered ``ask`` calls.
    """

    def __init__(
        self,
        *,
        rules: Mapping[str, ToolRule],
        safe_tools: Iterable[str] = (),
        default: Verdict = Verdict.DENIED,
        approval_command: Sequence[str] = (),
        approval_timeout: float = 60.0,
        approver: ApproverCallback | None = None,
        source: str = "<policy>",
    ) -> None:
        self.rules: Mapping[str, ToolRule] = dict(rules)
        self.safe_tools: frozenset[str] = frozenset(safe_tools)
        self.default = default
        self.approval_command = tuple(approval_command)
        self.approval_timeout = approval_timeout
        self.approver = approver
        self.source = source
        self._name = f"{POLICY_ID}:approval"

    def __repr__(self) -> str:
        return (
            f"FilePolicy(source={self.source!r}, default={self.default.value!r}, "
            f"tools={sorted(self.rules)!r}, safe={sorted(self.safe_tools)!r})"
        )

    def _first(self, call: ToolCall) -> Decision:
        """The file's own answer, before any approver."""
        rule = self.rules.get(call.tool)
        for arg in rule.args if rule is not None else ():
            why = arg.problem(call.args)
            if why:
                return Decision(Verdict.DENIED, f"{why} ({self.source})", POLICY_ID)
        safe = call.safe or call.tool in self.safe_tools
        if safe and (rule is None or rule.verdict is Verdict.ALLOWED):
            return Decision(Verdict.ALLOWED, "safe tool", POLICY_ID)
        if rule is not None:
            verdict, said = rule.verdict, rule.reason
            where = f"tool {call.tool!r}"
        else:
            verdict, said = self.default, ""
            where = f"tool {call.tool!r} is not named in the policy; default"
        word = {Verdict.ALLOWED: "allow", Verdict.DENIED: "deny"}.get(verdict, "ask")
        reason = said or f"{where}: {word} ({self.source})"
        return Decision(verdict, reason, POLICY_ID)

    def decide(self, call: ToolCall) -> Decision:
        first = self._first(call)
        if first.verdict is not Verdict.NEEDS_APPROVAL:
            return first
        return self._answered(first, self._ask(call))

    async def adecide(self, call: ToolCall) -> Decision:
        first = self._first(call)
        if first.verdict is not Verdict.NEEDS_APPROVAL:
            return first
        if self.approver is not None:
            return await Approver(self.approver, policy=_Fixed(first), name=self._name).adecide(
                call
            )
        if not self.approval_command:
            return first
        answer = await asyncio.to_thread(self._run_command, call)
        return self._answered(first, answer)

    def _ask(self, call: ToolCall) -> Approval | None:
        if self.approver is not None:
            fixed = _Fixed(self._first(call))
            return Approver(self.approver, policy=fixed, name=self._name).decide(call)
        if self.approval_command:
            return self._run_command(call)
        return None

    def _answered(self, first: Decision, answer: Approval | None) -> Decision:
        if answer is None:
            return first  # needs_approval: the gate denies it, fail-closed
        if isinstance(answer, Decision) and answer.approval is None:
            return answer  # a full decision of the callback's own, kept as it is
        return approver_decision(first, answer, name=self._name, approver=self._name)

    def _run_command(self, call: ToolCall) -> tuple[bool, str]:
        payload = json.dumps(
            {
                "tool": call.tool,
                "args": dict(call.args),
                "call_id": call.call_id,
                "run_id": call.run_id,
            }
        )
        shown = shlex.join(self.approval_command)
        try:
            done = subprocess.run(
                list(self.approval_command),
                input=payload,
                capture_output=True,
                text=True,
                timeout=self.approval_timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False, f"the approval command {shown} did not answer in {self.approval_timeout}s"
        except OSError as exc:
            return False, f"the approval command {shown} could not start: {exc.strerror or exc}"
        line = next((ln.strip() for ln in done.stdout.splitlines() if ln.strip()), "")
        if done.returncode == 0:
            return True, line[:200]
        return False, line[:200] or f"the approval command exited with status {done.returncode}"


class _Fixed:
    """A policy that always answers ``decision`` (the file's first answer, for Approver)."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision

    def decide(self, call: ToolCall) -> Decision:
        return self.decision


# --- parsing ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Reader:
    source: str
    loader: yaml.SafeLoader

    def fail(self, node: yaml.Node | None, message: str) -> PolicyFileError:
        line = f", line {node.start_mark.line + 1}" if node is not None else ""
        return PolicyFileError(f"policy file {self.source}{line}: {message}")

    def value(self, node: yaml.Node) -> Any:
        return self.loader.construct_object(node, deep=True)

    def mapping(self, node: yaml.Node, what: str, keys: Sequence[str]) -> dict[str, yaml.Node]:
        import yaml

        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{what} must be a mapping of keys to values")
        out: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = self.value(key_node)
            if not isinstance(key, str):
                raise self.fail(key_node, f"{what}: key {key!r} must be text")
            if key in out:
                raise self.fail(key_node, f"{what}: key {key!r} appears twice")
            if keys and key not in keys:
                hint = _close(key, keys)
                raise self.fail(
                    key_node,
                    f"{what}: unknown key {key!r}"
                    + (f" (did you mean {hint!r}?)" if hint else "")
                    + f"; known keys: {', '.join(keys)}",
                )
            out[key] = value_node
        return out

    def text(self, node: yaml.Node, what: str) -> str:
        import yaml

        value = self.value(node) if isinstance(node, yaml.ScalarNode) else None
        if not isinstance(value, str) or not value.strip():
            raise self.fail(node, f"{what} must be non-empty text")
        return value

    def texts(self, node: yaml.Node, what: str) -> list[str]:
        import yaml

        if isinstance(node, yaml.ScalarNode):
            return [self.text(node, what)]
        if not isinstance(node, yaml.SequenceNode):
            raise self.fail(node, f"{what} must be text or a list of text")
        return [self.text(item, f"{what} item") for item in node.value]


def _close(word: str, choices: Sequence[str]) -> str:
    import difflib

    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else ""


def _decision(r: _Reader, node: yaml.Node, what: str) -> Verdict:
    import yaml

    value = r.value(node) if isinstance(node, yaml.ScalarNode) else None
    if not isinstance(value, str) or value.strip().lower() not in _DECISIONS:
        raise r.fail(node, f"{what}: {value!r} is not a decision; use allow, deny or ask")
    return _DECISIONS[value.strip().lower()]


def _arg_rule(r: _Reader, name: str, node: yaml.Node, where: str) -> ArgRule:
    import yaml

    keys = r.mapping(node, where, _RULE_KEYS)
    if not keys or set(keys) == {"optional"}:
        raise r.fail(node, f"{where}: give at least one rule ({', '.join(_RULE_KEYS[:-1])})")
    kwargs: dict[str, Any] = {"name": name}
    if "path_prefix" in keys:
        prefixes = r.texts(keys["path_prefix"], f"{where}.path_prefix")
        kwargs["path_prefix"] = tuple(_norm_path(p) for p in prefixes)
    if "one_of" in keys:
        node_ = keys["one_of"]
        if not isinstance(node_, yaml.SequenceNode) or not node_.value:
            raise r.fail(node_, f"{where}.one_of must be a non-empty list of values")
        kwargs["one_of"] = tuple(r.value(node_))
    if "equals" in keys:
        kwargs["equals"] = r.value(keys["equals"])
        kwargs["has_equals"] = True
    if "pattern" in keys:
        text = r.text(keys["pattern"], f"{where}.pattern")
        try:
            kwargs["pattern"] = re.compile(text)
        except re.error as exc:
            raise r.fail(
                keys["pattern"], f"{where}.pattern is not a regular expression: {exc}"
            ) from None
    if "max_length" in keys:
        n = r.value(keys["max_length"])
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise r.fail(keys["max_length"], f"{where}.max_length must be a whole number >= 0")
        kwargs["max_length"] = n
    if "optional" in keys:
        flag = r.value(keys["optional"])
        if not isinstance(flag, bool):
            raise r.fail(keys["optional"], f"{where}.optional must be true or false")
        kwargs["optional"] = flag
    return ArgRule(**kwargs)


def _tool_rule(r: _Reader, tool: str, node: yaml.Node) -> ToolRule:
    import yaml

    where = f"tools.{tool}"
    if isinstance(node, yaml.ScalarNode):
        return ToolRule(tool=tool, verdict=_decision(r, node, where))
    keys = r.mapping(node, where, _TOOL_KEYS)
    if "decision" not in keys:
        raise r.fail(node, f"{where}: say what to do with it (decision: allow, deny or ask)")
    verdict = _decision(r, keys["decision"], f"{where}.decision")
    reason = r.text(keys["reason"], f"{where}.reason") if "reason" in keys else ""
    rules: list[ArgRule] = []
    if "args" in keys:
        arg_nodes = r.mapping(keys["args"], f"{where}.args", ())
        rules = [_arg_rule(r, n, v, f"{where}.args.{n}") for n, v in arg_nodes.items()]
    return ToolRule(tool=tool, verdict=verdict, reason=reason, args=tuple(rules))


def parse_policy(
    text: str, *, source: str = "<policy>", approver: ApproverCallback | None = None
) -> FilePolicy:
    """Parse policy-file ``text`` (YAML); ``source`` names it in error messages.

    >>> p = parse_policy("version: 1\\nsafe: [git_status]\\ntools: {git_add: allow}\\n")
    >>> sorted(p.safe_tools), p.default.value
    (['git_status'], 'denied')
    """
    import yaml

    loader = yaml.SafeLoader(text)
    r = _Reader(source=source, loader=loader)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f", line {mark.line + 1}" if mark is not None else ""
        raise PolicyFileError(
            f"policy file {source}{line}: not valid YAML: {exc.problem or exc}"
        ) from None
    except yaml.YAMLError as exc:
        raise PolicyFileError(f"policy file {source}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    if root is None:
        raise PolicyFileError(f"policy file {source} is empty; start with 'version: 1'")
    top = r.mapping(root, "the policy", _TOP_KEYS)
    if "version" not in top:
        raise r.fail(root, "the policy needs 'version: 1' (the schema version)")
    version = r.value(top["version"])
    if version != 1 or isinstance(version, bool):
        raise r.fail(top["version"], f"version: {version!r} is not supported; use 1")
    default = _decision(r, top["default"], "default") if "default" in top else Verdict.DENIED
    safe: list[str] = []
    if "safe" in top:
        node = top["safe"]
        if not isinstance(node, yaml.SequenceNode):
            raise r.fail(node, "safe must be a list of tool names")
        safe = [r.text(item, "safe: a tool name") for item in node.value]
    command: list[str] = []
    timeout = 60.0
    if "approval" in top:
        keys = r.mapping(top["approval"], "approval", _APPROVAL_KEYS)
        if "command" in keys:
            cnode = keys["command"]
            if isinstance(cnode, yaml.ScalarNode):
                command = shlex.split(r.text(cnode, "approval.command"))
            else:
                command = r.texts(cnode, "approval.command")
            if not command:
                raise r.fail(cnode, "approval.command is empty")
        if "timeout" in keys:
            t = r.value(keys["timeout"])
            if not isinstance(t, int | float) or isinstance(t, bool) or not 0 < t <= 86400:
                raise r.fail(keys["timeout"], "approval.timeout must be seconds, > 0")
            timeout = float(t)
    rules: dict[str, ToolRule] = {}
    if "tools" in top:
        for tool, node in r.mapping(top["tools"], "tools", ()).items():
            rules[tool] = _tool_rule(r, tool, node)
    for tool in safe:
        rule = rules.get(tool)
        if rule is not None and rule.verdict is not Verdict.ALLOWED:
            raise r.fail(
                top["tools"],
                f"tools.{tool}: {tool!r} is listed as safe but its decision is not allow; "
                "remove it from one of the two",
            )
    return FilePolicy(
        rules=rules,
        safe_tools=safe,
        default=default,
        approval_command=command,
        approval_timeout=timeout,
        approver=approver,
        source=source,
    )


def policy_from_file(
    path: str | os.PathLike[str], *, approver: ApproverCallback | None = None
) -> FilePolicy:
    """Load a policy file: ``policy_from_file("policy.yaml", approver=ask_human)``.

    Returns a :class:`FilePolicy` (a ``Policy``; its ``safe_tools`` go to the ``Gate``).
    ``approver`` answers the ``ask`` tools (as :class:`~ledger.gate.policy.Approver`'s
    callback does); without it, the file's ``approval.command`` does. Raises
    :class:`PolicyFileError` for a file that is missing or wrong.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PolicyFileError(f"policy file {p} does not exist") from None
    except UnicodeDecodeError as exc:
        raise PolicyFileError(f"policy file {p} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise PolicyFileError(f"policy file {p} cannot be read: {exc.strerror or exc}") from None
    return parse_policy(text, source=str(p), approver=approver)
