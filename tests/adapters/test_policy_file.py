"""The YAML policy file: what it allows, what it denies, and how it says a file is wrong."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger import Gate, ToolDenied, Verdict
from ledger.gate.policy import ToolCall
from ledger.gate.policy_file import PolicyFileError, parse_policy, policy_from_file
from ledger.sinks import SQLiteSink

POLICY = """\
version: 1
default: deny
safe: [git_status, git_log]
tools:
  git_commit: deny
  git_add:
    decision: allow
    args:
      files:
        path_prefix: ["/repo/src", "/repo/docs/"]
  write_file:
    decision: ask
    reason: writes need a human
    args:
      path: {path_prefix: /tmp/out}
      mode: {one_of: [w, a], optional: true}
  tag:
    decision: allow
    args:
      name: {pattern: "v[0-9]+", max_length: 5}
"""


def call(tool: str, safe: bool = False, **args: object) -> ToolCall:
    return ToolCall(tool=tool, args=args, call_id="c1", run_id="r1", safe=safe)


def test_decisions_per_tool_and_default() -> None:
    p = parse_policy(POLICY, source="p.yaml")
    assert p.safe_tools == {"git_status", "git_log"}
    assert p.decide(call("git_status", safe=True)).verdict is Verdict.ALLOWED
    assert p.decide(call("git_commit", message="x")).verdict is Verdict.DENIED
    unknown = p.decide(call("rm_rf"))
    assert unknown.verdict is Verdict.DENIED
    assert "not named in the policy" in unknown.reason
    assert p.decide(call("git_add", files=["/repo/src/a.py"])).verdict is Verdict.ALLOWED
    assert p.decide(call("tag", name="v12")).verdict is Verdict.ALLOWED
    assert p.decide(call("tag", name="v123456")).verdict is Verdict.DENIED
    assert p.decide(call("tag", name="x1")).verdict is Verdict.DENIED


@pytest.mark.parametrize(
    "files",
    [
        ["/repo/src/../../etc/passwd"],
        ["/repo/srcx/a.py"],
        ["/repo/src/a.py", "/etc/shadow"],
        "relative/a.py",
        [42],
    ],
)
def test_path_prefix_refuses_escapes(files: object) -> None:
    p = parse_policy(POLICY)
    d = p.decide(call("git_add", files=files))
    assert d.verdict is Verdict.DENIED
    assert "files" in d.reason


def test_a_rule_on_a_missing_argument_denies_unless_optional() -> None:
    p = parse_policy(POLICY)
    assert p.decide(call("git_add")).verdict is Verdict.DENIED
    # write_file: path present, mode optional and absent: the rules hold, then "ask"
    assert p.decide(call("write_file", path="/tmp/out/a")).verdict is Verdict.NEEDS_APPROVAL
    assert p.decide(call("write_file", path="/tmp/out/a", mode="x")).verdict is Verdict.DENIED


@given(st.lists(st.sampled_from(["..", ".", "src", "a", "", "etc"]), min_size=1, max_size=8))
def test_an_allowed_path_is_always_under_the_prefix(parts: list[str]) -> None:
    import posixpath

    path = "/repo/src/" + "/".join(parts)
    verdict = parse_policy(POLICY).decide(call("git_add", files=[path])).verdict
    inside = posixpath.normpath(path).startswith("/repo/src")
    norm = posixpath.normpath(path)
    inside = norm == "/repo/src" or norm.startswith("/repo/src/")
    assert (verdict is Verdict.ALLOWED) == inside


def test_ask_answered_by_a_callback_sync_and_async() -> None:
    seen: list[str] = []

    def approver(c: ToolCall) -> tuple[bool, str]:
        seen.append(c.tool)
        return (c.args["path"].endswith(".md"), "markdown only")

    p = parse_policy(POLICY, approver=approver)
    yes = p.decide(call("write_file", path="/tmp/out/a.md"))
    assert yes.verdict is Verdict.ALLOWED and "approved by" in yes.reason
    no = asyncio.run(p.adecide(call("write_file", path="/tmp/out/a.sh")))
    assert no.verdict is Verdict.DENIED and "denied by" in no.reason
    assert seen == ["write_file", "write_file"]


def test_ask_answered_by_a_command(tmp_path: Path) -> None:
    script = tmp_path / "approve.py"
    script.write_text(
        "import json, sys\n"
        "call = json.load(sys.stdin)\n"
        "ok = call['args']['path'].endswith('.md')\n"
        "print('fine' if ok else 'not markdown')\n"
        "sys.exit(0 if ok else 3)\n"
    )
    text = POLICY + f"approval:\n  command: [{sys.executable!r}, {str(script)!r}]\n  timeout: 20\n"
    p = parse_policy(text)
    yes = p.decide(call("write_file", path="/tmp/out/a.md"))
    assert yes.verdict is Verdict.ALLOWED and yes.reason.endswith("fine")
    no = asyncio.run(p.adecide(call("write_file", path="/tmp/out/a.sh")))
    assert no.verdict is Verdict.DENIED and "not markdown" in no.reason


def test_an_approval_command_that_cannot_start_or_hangs_denies(tmp_path: Path) -> None:
    missing = parse_policy(POLICY + "approval: {command: /nonexistent/approve}\n")
    d = missing.decide(call("write_file", path="/tmp/out/a"))
    assert d.verdict is Verdict.DENIED and "could not start" in d.reason
    slow = parse_policy(
        POLICY + f"approval: {{command: [{sys.executable!r}, -c, 'import time; time.sleep(30)'],"
        " timeout: 0.5}\n"
    )
    d = slow.decide(call("write_file", path="/tmp/out/a"))
    assert d.verdict is Verdict.DENIED and "did not answer" in d.reason


def test_ask_without_an_approver_is_denied_by_the_gate(tmp_path: Path) -> None:
    p = parse_policy(POLICY)
    ran: list[str] = []
    with SQLiteSink(tmp_path / "l.db") as sink:
        gate = Gate(sink, policy=p, safe_tools=p.safe_tools)
        with gate.run("write a file") as run:
            with pytest.raises(ToolDenied) as info:
                run.call("write_file", {"path": "/tmp/out/a"}, lambda path: ran.append(path))
            assert run.call("git_status", {}, lambda: "clean") == "clean"
        assert "fail-closed" in info.value.reason
        assert ran == []
        chain = sink.chain(run.run_id)
        assert [a.intent.verdict for a in chain.actions] == [Verdict.DENIED]


def test_policy_from_file_reads_a_file(tmp_path: Path) -> None:
    f = tmp_path / "policy.yaml"
    f.write_text(POLICY)
    p = policy_from_file(f)
    assert p.source == str(f)
    assert p.decide(call("git_commit")).verdict is Verdict.DENIED


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "version: 1\ndefualt: deny\n",
            "line 2: the policy: unknown key 'defualt' (did you mean 'default'?)",
        ),
        ("version: 1\ntools:\n  a: alow\n", "line 3: tools.a: 'alow' is not a decision"),
        (
            "version: 1\ntools:\n  a:\n    decison: allow\n",
            "line 4: tools.a: unknown key 'decison'",
        ),
        ("version: 1\ntools:\n  a:\n    reason: x\n", "line 4: tools.a: say what to do"),
        ("version: 2\n", "line 1: version: 2 is not supported"),
        ("default: deny\n", "needs 'version: 1'"),
        ("", "is empty"),
        ("version: 1\nsafe: git_status\n", "line 2: safe must be a list"),
        (
            "version: 1\ntools:\n  a:\n    decision: allow\n    args:\n      p: {prefix: /x}\n",
            "line 6: tools.a.args.p: unknown key 'prefix'",
        ),
        (
            "version: 1\ntools:\n  a:\n    decision: allow\n    args:\n      p: {pattern: '['}\n",
            "line 6: tools.a.args.p.pattern is not a regular expression",
        ),
        (
            "version: 1\nsafe: [a]\ntools:\n  a: deny\n",
            "listed as safe but its decision is not allow",
        ),
        ("version: 1\ntools: [a, b\n", "not valid YAML"),
        ("version: 1\ntools:\n  a: deny\n  a: allow\n", "line 4: tools: key 'a' appears twice"),
        ("version: 1\napproval: {timeout: -1}\n", "approval.timeout must be seconds"),
    ],
)
def test_mistakes_name_the_line_and_key(text: str, needle: str) -> None:
    with pytest.raises(PolicyFileError) as info:
        parse_policy(text, source="p.yaml")
    assert needle in str(info.value), str(info.value)
    assert str(info.value).startswith("policy file p.yaml")


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError, match="does not exist"):
        policy_from_file(tmp_path / "nope.yaml")


def test_the_documented_example_parses() -> None:
    import ledger.gate.policy_file as mod

    doc = mod.__doc__ or ""
    block = doc.split("The file (every key but ``version`` is optional)::", 1)[1]
    block = block.split("Decisions:", 1)[0]
    p = parse_policy(textwrap.dedent(block))
    assert p.approval_command == ("./approve.sh",)
    assert p.decide(call("git_commit")).verdict is Verdict.DENIED
