"""No secret reaches the database: realistic fake secrets of every common format, in every
place an agent puts one, written through a real Gate into a real SQLiteSink, then looked
for in the raw bytes of the ``.db`` and ``-wal`` files."""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import ToolDenied
from ledger.gate import AllowAll, Decision, Gate, ToolCall, redact_secrets
from ledger.model import Kind, Ref, RefSource, Verdict
from ledger.sinks import SQLiteSink
from tests.gate.secret_corpus import PLACEMENTS, Secret, corpus

# Formats whose prefix is also a common word part ("sk-" in "task-", "SG." in "PSG."):
# found only when no letter or digit is glued before them (documented in docs/redaction.md).
NOT_GLUED = {
    "openai-legacy-key",
    "sendgrid-key",
    "mailgun-key",
    "twilio-api-key",
    "databricks-token",
    "jwt",
}
SHAPE_PLACEMENTS = ("text", "dict-key", "list-item", "glued")


def stored_bytes(db: Path) -> bytes:
    """Everything SQLite has on disk for ``db``: the database and its WAL."""
    data = db.read_bytes()
    wal = db.with_name(db.name + "-wal")
    if wal.exists():
        data += wal.read_bytes()
    return data


def leaks(data: bytes, secrets: list[str]) -> list[str]:
    """The secrets found in ``data``, whole or by their last 16 characters (a partial
    leak), also in the escaped forms JSON could give them."""
    found = []
    for secret in secrets:
        tails = {secret, secret[-16:]} if len(secret) > 24 else {secret}
        forms = {t.encode() for t in tails} | {t.replace("/", "\\/").encode() for t in tails}
        if any(form in data for form in forms):
            found.append(secret)
    return found


def echo(**kwargs: Any) -> dict[str, Any]:
    return kwargs


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "ledger.db"


def _calls(secret: Secret) -> Iterator[tuple[str, dict[str, object]]]:
    for name in SHAPE_PLACEMENTS:
        if name == "glued" and secret.name in NOT_GLUED:
            continue
        yield name, PLACEMENTS[name](secret.shown)


def test_every_format_in_every_shape_placement(db: Path) -> None:
    secrets = corpus(random.randrange(1 << 30))
    with SQLiteSink(db) as sink:
        gate = Gate(sink, policy=AllowAll(), safe_tools={"read"})
        with gate.run("audit the configuration") as run:
            for i, secret in enumerate(secrets):
                for placement, args in _calls(secret):
                    tool = "read" if i % 2 else "write"  # decisions and actions hold args
                    run.call(tool, args, echo, call_id=f"{secret.name}/{placement}")
        assert leaks(stored_bytes(db), [s.value for s in secrets]) == []
        assert len(list(sink.events(run_id=run.run_id, kind=Kind.TOOL_RESULT))) > 200
    assert leaks(stored_bytes(db), [s.value for s in secrets]) == []


def _shapeless(rnd: random.Random) -> str:
    """A secret with no recognisable shape: only its place can give it away."""
    return "".join(rnd.choice(string.ascii_letters + string.digits) for _ in range(24))


def test_every_named_placement_of_a_shapeless_secret(db: Path) -> None:
    rnd = random.Random()
    used: list[str] = []
    with SQLiteSink(db) as sink:
        gate = Gate(sink, policy=AllowAll())
        with gate.run("deploy") as run:
            for name, place in PLACEMENTS.items():
                if name in SHAPE_PLACEMENTS:
                    continue
                secret = _shapeless(rnd)
                used.append(secret)
                run.call("write", place(secret), echo, call_id=name)
        assert leaks(stored_bytes(db), used) == []
        recorded = {e.call_id for e in sink.events(run_id=run.run_id, kind=Kind.ACTION)}
        assert recorded == {n for n in PLACEMENTS if n not in SHAPE_PLACEMENTS}


def test_secrets_in_identifiers_request_results_errors_and_reasons(db: Path) -> None:
    """A secret in a tool name, run id, call id, agent path, ref id, the request, a
    result, an exception or the policy's reason is masked too, and the run still works."""
    s = corpus(random.randrange(1 << 30))
    gh, slack, pg, aws = (
        next(x for x in s if x.name == n)
        for n in ("github-pat", "slack-bot-token", "postgres-url", "aws-access-key-id")
    )

    class Quoting:
        def decide(self, call: ToolCall) -> Decision:
            return Decision("allowed", f"fine: {call.args}", "quoting")

    def fails(**kwargs: Any) -> None:
        raise RuntimeError(f"could not log in with {pg.shown}")

    with SQLiteSink(db) as sink:
        gate = Gate(sink, policy=Quoting())
        with gate.run(f"use {gh.value}", run_id=f"run-{slack.value}", agent_path=aws.value) as run:
            out = run.call(f"tool_{gh.value}", {"x": pg.shown}, echo, call_id=f"c-{aws.value}")
            assert out == {"x": pg.shown}  # the tool got the real value
            run.retrieved([Ref(source=RefSource.MEMORY, id=pg.shown, hash="")])
            run.call("w", {}, echo, evidence=[Ref(source="tool", id=f"x{gh.value}", hash="")])
            with pytest.raises(RuntimeError):
                run.call("w", {}, fails)
        assert slack.value not in run.run_id and run.run_id.startswith("run-[REDACTED]#")
        chain = sink.chain(run.run_id)  # the run is found by the id it reports
        assert chain.request is not None and len(chain.actions) == 3
        assert run.last_call_id in {a.intent.call_id for a in chain.actions}
        assert leaks(stored_bytes(db), [gh.value, slack.value, pg.value, aws.value]) == []


def test_two_runs_whose_ids_redact_alike_stay_apart(db: Path) -> None:
    with SQLiteSink(db) as sink:
        gate = Gate(sink, policy=AllowAll())
        ids = []
        for token in ("ghp_" + "A1b2" * 9, "ghp_" + "C3d4" * 9):
            with gate.run("x", run_id=f"deploy-{token}") as run:
                run.call("w", {}, echo)
            ids.append(run.run_id)
        assert ids[0] != ids[1]
        assert all(len(sink.chain(i).actions) == 1 for i in ids)


def test_a_refused_call_keeps_its_secret_out_too(db: Path) -> None:
    with SQLiteSink(db) as sink:
        gate = Gate(sink)  # DenyNonSafe: denied, but the attempt is recorded
        with gate.run("x") as run, pytest.raises(ToolDenied):
            run.call("write", {"password": "hunter2hunter2", "k": "ghp_" + "Z9y8" * 9}, echo)
        assert leaks(stored_bytes(db), ["hunter2hunter2", "Z9y8" * 9]) == []
        (denied,) = sink.events(run_id=run.run_id, kind=Kind.ACTION)
        assert denied.verdict is Verdict.DENIED and "[REDACTED]" in (denied.args or "")


def test_redacted_dict_keys_never_collide() -> None:
    a, b = "ghp_" + "A1b2" * 9, "ghp_" + "C3d4" * 9
    out = redact_secrets({a: 1, b: 2, "[REDACTED]": 3})
    assert sorted(out.values()) == [1, 2, 3]
    assert all(a not in k and b not in k for k in out)


def test_a_run_id_the_redactor_cannot_handle_is_withheld(db: Path) -> None:
    def picky(value: Any) -> Any:
        if isinstance(value, str) and value.startswith("run-"):
            raise ValueError("no")
        return value

    with SQLiteSink(db) as sink:
        with Gate(sink, policy=AllowAll(), redact=picky).run("x", run_id="run-1") as run:
            run.call("w", {}, echo)
        assert "withheld" in run.run_id and len(sink.chain(run.run_id).actions) == 1


def test_a_redactor_returning_no_text_for_a_name_withholds_it(db: Path) -> None:
    with SQLiteSink(db) as sink:
        gate = Gate(sink, policy=AllowAll(), redact=lambda v: 0 if v == "t" else v)
        with gate.run("x") as run:
            run.call("t", {}, echo)
        (action,) = sink.events(run_id=run.run_id, kind=Kind.ACTION)
        assert action.tool.startswith("[tool name withheld")
