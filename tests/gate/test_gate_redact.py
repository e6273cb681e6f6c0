"""Redaction: secrets never reach the store, a failing redactor denies, previews are
bounded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import ToolDenied
from ledger.gate import REDACTED, AllowAll, Gate, no_redaction, redact_secrets
from ledger.gate.redact import redact_text
from ledger.gate.values import PREVIEW_LIMIT, bounded, to_jsonable
from ledger.model import Kind
from ledger.sinks import SQLiteSink

PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"
SECRETS = [
    "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
    "sk-ant-api03-abcdefghijklmnopqrstu",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "github_pat_11ABCDEFG0123456789abcdefghij",
    "xoxb-1234567890-abcdefghij",
    "AKIAIOSFODNN7EXAMPLE",
    "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_known_key_formats_are_masked(secret: str) -> None:
    out = redact_text(f"use {secret} now")
    assert secret not in out and out == f"use {REDACTED} now"


def test_structures_and_text_patterns() -> None:
    value = {
        "path": "notes.txt",
        "password": "hunter2",
        "X-Api-Key": "abc",
        "credentials": {"user": "u", "pass": "p"},
        "max_tokens": 100,
        "headers": [{"Authorization": "Bearer abcdefghijkl"}],
        "cmd": "curl -H 'Authorization: Bearer abcdefghijklmnop' https://u:pw123@host/x",
        "env": "PASSWORD=s3cret API_KEY='k' other=1",
        "pem": f"key:\n{PRIVATE_KEY}\nend",
    }
    out = redact_secrets(value)
    assert out["path"] == "notes.txt" and out["max_tokens"] == 100
    assert out["password"] == out["X-Api-Key"] == out["credentials"] == REDACTED
    assert out["headers"] == [{"Authorization": REDACTED}]
    assert out["cmd"] == f"curl -H 'Authorization: Bearer {REDACTED}' https://u:{REDACTED}@host/x"
    assert out["env"] == f"PASSWORD={REDACTED} API_KEY='{REDACTED}' other=1"
    assert out["pem"] == f"key:\n{REDACTED}\nend"
    assert value["password"] == "hunter2"  # the input is not changed
    assert redact_text('{"password": "hunter2"}') == '{"password": "' + REDACTED + '"}'
    assert redact_text("the author wrote a token bucket") == "the author wrote a token bucket"
    assert no_redaction(value) is value


def test_to_jsonable_and_bounded() -> None:
    assert to_jsonable({1: (b"x", {2}), "p": Path("a"), "n": 2**70}) == {
        "1": ["x", [2]],
        "p": "a",
        "n": str(2**70),
    }
    assert bounded("x" * 500) == "x" * (PREVIEW_LIMIT - 1) + "…"
    assert bounded("short") == "short"


def test_nothing_secret_reaches_the_database(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with SQLiteSink(db) as sink:
        gate = Gate(sink, policy=AllowAll(), safe_tools={"read"})
        with gate.run("deploy with password=hunter2") as run:
            run.call("read", {"path": "a"}, lambda path: f"token: {SECRETS[0]}")
            run.call("deploy", {"api_key": "k-123456", "note": SECRETS[2]}, lambda **_: "ok")
            with pytest.raises(RuntimeError):
                run.call("deploy", {}, _raises_secret)
        events = list(sink.events(run_id=run.run_id))
        assert len(events) == 10
        assert all(len(e.preview) <= PREVIEW_LIMIT for e in events)
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    for needle in (b"hunter2", b"k-123456", SECRETS[0].encode(), SECRETS[2].encode(), b"pw999"):
        assert needle not in raw


def _raises_secret() -> None:
    raise RuntimeError("login failed for https://admin:pw999@db.local")


def test_a_failing_redactor_denies_and_withholds(sqlite_sink: SQLiteSink) -> None:
    def picky(value: Any) -> Any:
        if isinstance(value, dict) and "bad" in value:
            raise ValueError("cannot redact")
        if value == "secret result":
            raise ValueError("cannot redact")
        return value

    gate = Gate(sqlite_sink, policy=AllowAll(), redact=picky)
    ran: list[str] = []
    with gate.run("x") as run:
        with pytest.raises(ToolDenied, match="could not redact"):
            run.call("write", {"bad": 1}, lambda bad: ran.append("bad"))
        assert run.call("write", {}, lambda: "secret result", call_id="r") == "secret result"
    assert ran == []
    result = sqlite_sink.chain(run.run_id).action("r").result
    assert result is not None and result.result is None
    assert result.err.startswith("result withheld")


def test_a_redactor_that_breaks_the_shape_denies(sqlite_sink: SQLiteSink) -> None:
    def fails_on_the_request(value: Any) -> Any:
        return 42 if value == "password=hunter2" else value

    gate = Gate(sqlite_sink, policy=AllowAll(), redact=fails_on_the_request)
    with (
        gate.run("password=hunter2") as run,
        pytest.raises(ToolDenied, match=r"request \(chain head\) could not be redacted"),
    ):
        run.call("write", {"a": 1}, lambda a: None)
    head = next(iter(sqlite_sink.events(run_id=run.run_id, kind=Kind.REQUEST)))
    assert head.args == '"[request withheld: redaction failed]"'
    assert "hunter2" not in "".join(e.to_json() for e in sqlite_sink.events(run_id=run.run_id))
    gate = Gate(sqlite_sink, policy=AllowAll(), redact=lambda v: v if isinstance(v, str) else 42)
    with gate.run("x") as run, pytest.raises(ToolDenied, match="could not redact"):
        run.call("write", {"a": 1}, lambda a: None)


def test_a_result_with_undecodable_text_is_recorded_not_failed(sqlite_sink: SQLiteSink) -> None:
    """``os.listdir`` returns lone surrogates for file names that are not UTF-8; a tool
    that returns one succeeded, and its record says so, with the text kept escaped."""

    class Opaque:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    gate = Gate(sqlite_sink, policy=AllowAll())
    with gate.run("list the folder") as run:
        names = run.call("ls", {}, lambda: ["report\udcff.txt", "ok.txt"], call_id="ls")
        assert names == ["report\udcff.txt", "ok.txt"]  # the caller gets the value as is
        run.call("odd", {}, lambda: {"x": Opaque()}, call_id="odd")
    chain = sqlite_sink.chain(run.run_id)
    listed = chain.action("ls")
    assert listed.outcome == "succeeded" and listed.result is not None
    assert json.loads(listed.result.result or "") == ["report\\udcff.txt", "ok.txt"]
    odd = chain.action("odd")
    assert odd.outcome == "succeeded" and odd.result is not None
    assert "unprintable Opaque" in (odd.result.result or "")
