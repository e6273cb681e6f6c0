"""An erased run reads as it read before, its content replaced by ``[erased: <reason>]``:
a tombstone names only the fields its event held, so no reader shows an erased approval,
principal or policy that was never there; the gate's erased reason reads erased, not
empty; the chain's count of what was available counts the erased reads it lists."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.cli.main import cli
from ledger.model import Event
from ledger.model.erasure import ALL_FIELDS, erase_fields, erase_stored, erased_whole
from ledger.retention import Retention, Selection
from ledger.sinks import SQLiteSink
from tests.retention.conftest import OLD, needs_retention_schema

pytestmark = needs_retention_schema
LEAF = "ab" * 32
RECORD = "01JDX0S1ZQ9T4W8M3V6K2N7B5C"


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _ledger(tmp_path: Path) -> str:
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(
            [
                Event(kind="request", run_id="r1", time=OLD, args='"mail alice"'),
                Event(
                    kind="retrieved",
                    run_id="r1",
                    time=OLD,
                    refs=[{"source": "memory", "id": "m-alice"}],
                ),
                Event(
                    kind="gate_decision",
                    run_id="r1",
                    call_id="c1",
                    tool="rm",
                    time=OLD,
                    verdict="denied",
                    reason="never rm",
                ),
                Event(
                    kind="action",
                    run_id="r1",
                    call_id="c1",
                    tool="rm",
                    time=OLD,
                    args={"path": "/home/alice"},
                    verdict="denied",
                    reason="never rm",
                ),
                Event(kind="run_end", run_id="r1", time=OLD),
            ]
        )
        Retention(sink).set_policy(keep="400d", floor="0d", reason="test")
        done = Retention(sink).erase(Selection.of_run("r1"), reason="GDPR 42")
        assert done.erased == 5
    return f"sqlite:///{path}"


def test_a_denied_call_erased_whole_shows_no_approval_principal_or_policy(
    tmp_path: Path,
) -> None:
    db = _ledger(tmp_path)
    code, out, err = _run("why", "r1", "c1", "--db", db)
    assert code == 0, err
    assert "approved" not in out and "for:" not in out, out
    assert "gate:     denied: [erased: GDPR 42]\n" in out, out  # no "(policy ...)" invented
    assert "alice" not in out
    code, out, _ = _run("why", "r1", "c1", "--db", db, "--json")
    shown = json.loads(out)
    assert shown["approval"] is None
    assert shown["decision"]["erased"]["fields"] == ["reason"]
    code, out, _ = _run("chain", "r1", "--db", db)
    assert "approved" not in out and "available (0 + 1 erased)" in out, out
    code, out, _ = _run("events", "--db", db, "--run", "r1", "--csv")
    rows = out.splitlines()
    request = next(r for r in rows if ",request," in r)
    assert "[erased: GDPR 42]" in request and request.count("[erased") == 1, request


def test_an_event_that_held_nothing_erasable_is_still_a_tombstone(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    with SQLiteSink(Path(db.removeprefix("sqlite:///"))) as sink:
        end = next(e for e in sink.events(run_id="r1") if e.kind == "run_end")
        assert end.erased is not None and end.erased.fields == () and erased_whole(end)
        again = Retention(sink).erase(Selection.of_run("r1"), reason="again")
        assert (again.erased, again.already) == (0, 5)  # nothing left: already erased
        fields = Retention(sink).erase(Selection.of_run("r1"), reason="f", fields=["args"])
        assert (fields.erased, fields.already) == (0, 2)  # those that held args


_VALUES = {
    "args": st.just({"to": "alice"}),
    "reason": st.sampled_from(["", "policy ok"]),
    "label": st.sampled_from(["", "safe:read"]),
    "preview": st.sampled_from(["", "mail alice"]),
    "err": st.sampled_from(["", "timeout"]),
    "refs": st.sampled_from([[], [{"source": "memory", "id": "m"}]]),
}


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(["action", "tool_result", "gate_decision", "request", "run_end"]),
    values=st.fixed_dictionaries({}, optional=_VALUES),
    fields=st.lists(st.sampled_from(ALL_FIELDS), min_size=1, unique=True),
)
def test_a_tombstone_names_exactly_the_fields_its_event_held(
    kind: str, values: dict[str, object], fields: list[str]
) -> None:
    event = Event(kind=kind, run_id="r", call_id="c", **values)  # type: ignore[arg-type]
    gone = erase_fields(event, fields=fields, leaf_hash=LEAF, record=RECORD, reason="why")
    stored = orjson.loads(event.to_json())
    held = [f for f in ALL_FIELDS if f in fields and f in stored]
    assert gone.erased is not None and list(gone.erased.fields) == held
    text, _, _ = erase_stored(
        event.to_json().encode(), fields=fields, leaf_hash=LEAF, record=RECORD, reason="why"
    )
    assert text == gone.to_json()  # the stored-bytes path agrees
