"""``ledger runs / chain / why / events / drift`` over SQLite and JSONL, human and JSON."""

from __future__ import annotations

import json
from pathlib import Path

from ledger.demo import run_scripted_agent
from ledger.model import Event, Kind, Ref, RefSource
from ledger.sinks import JSONLSink, SQLiteSink

from .conftest import Ledger, invoke, sqlite_url

FIELDS = {"run_id", "first_time", "last_time", "events", "actions", "denials", "errors", "ended"}


def test_runs_json_has_stable_fields(sqlite_ledger: Ledger) -> None:
    result = invoke("runs", "--db", sqlite_ledger.url, "--json")
    assert result.exit_code == 0, result.stderr
    (run,) = json.loads(result.stdout)
    assert set(run) == FIELDS
    assert run["run_id"] == sqlite_ledger.run_id
    assert (run["actions"], run["denials"], run["errors"], run["ended"]) == (2, 1, 0, True)


def test_runs_table_and_window(sqlite_ledger: Ledger) -> None:
    table = invoke("runs", "--db", sqlite_ledger.url)
    assert table.exit_code == 0
    assert sqlite_ledger.run_id in table.stdout and "1 run(s)" in table.stdout
    later = invoke("runs", "--db", sqlite_ledger.url, "--since", "2999-01-01", "--json")
    assert json.loads(later.stdout) == []
    recent = invoke("runs", "--db", sqlite_ledger.url, "--since", "1h", "--json")
    assert len(json.loads(recent.stdout)) == 1


def test_chain_shows_each_action_with_verdict_reason_evidence(sqlite_ledger: Ledger) -> None:
    human = invoke("chain", sqlite_ledger.run_id, "--db", sqlite_ledger.url)
    assert human.exit_code == 0
    for text in ("request", "available", "run_shell", "denied", "write_file", "succeeded",
                 "evidence", "denied_attempt"):  # fmt: skip
        assert text in human.stdout
    data = json.loads(
        invoke("chain", sqlite_ledger.run_id, "--db", sqlite_ledger.url, "--json").stdout
    )
    assert data["run_id"] == sqlite_ledger.run_id
    assert data["request"]["kind"] == "request"
    outcomes = {a["call_id"]: a["outcome"] for a in data["actions"]}
    assert outcomes == {sqlite_ledger.shell_call: "denied", sqlite_ledger.write_call: "succeeded"}
    write = next(a for a in data["actions"] if a["call_id"] == sqlite_ledger.write_call)
    assert write["verdict"] == "allowed" and write["reason"] and write["evidence"]
    assert [a["code"] for a in data["anomalies"]] == ["denied_attempt"]
    assert {r["source"] for r in data["available"]} == {"memory", "tool"}


def test_why_explains_one_action(sqlite_ledger: Ledger) -> None:
    led = sqlite_ledger
    human = invoke("why", led.run_id, led.write_call, "--db", led.url)
    assert human.exit_code == 0
    assert "write_file" in human.stdout and "evidence:" in human.stdout
    data = json.loads(invoke("why", led.run_id, led.shell_call, "--db", led.url, "--json").stdout)
    assert data["outcome"] == "denied" and "dangerous" in data["reason"]


def test_why_unknown_call_is_one_clear_line(sqlite_ledger: Ledger) -> None:
    result = invoke("why", sqlite_ledger.run_id, "nope", "--db", sqlite_ledger.url)
    assert result.exit_code == 1
    assert result.stderr.startswith("ledger: error: call id 'nope' has no action")
    assert len(result.stderr.splitlines()) == 1


def test_chain_of_unknown_run_fails_clearly(sqlite_ledger: Ledger) -> None:
    result = invoke("chain", "no-such-run", "--db", sqlite_ledger.url)
    assert result.exit_code == 1 and "'no-such-run'" in result.stderr
    assert "ledger runs" in result.stderr


def test_events_filters(sqlite_ledger: Ledger) -> None:
    url = sqlite_ledger.url
    lines = invoke("events", "--db", url, "--kind", "action", "--nl").stdout.splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["kind"] for e in events] == ["action", "action"]
    denied = invoke("events", "--db", url, "--verdict", "denied", "--kind", "action", "--nl")
    assert [json.loads(x)["tool"] for x in denied.stdout.splitlines()] == ["run_shell"]
    by_tool = invoke("events", "--db", url, "--tool", "read_file", "--nl").stdout.splitlines()
    assert {json.loads(x)["kind"] for x in by_tool} == {"gate_decision", "tool_result"}
    assert invoke("events", "--db", url, "--run", "other", "--nl").stdout == ""
    assert invoke("events", "--db", url, "--until", "2000-01-01", "--nl").stdout == ""
    assert len(invoke("events", "--db", url, "--limit", "3", "--nl").stdout.splitlines()) == 3
    table = invoke("events", "--db", url, "--run", sqlite_ledger.run_id)
    assert table.exit_code == 0 and "run_end" in table.stdout


def test_bad_time_is_a_usage_error(sqlite_ledger: Ledger) -> None:
    result = invoke("events", "--db", sqlite_ledger.url, "--since", "yesterday")
    assert result.exit_code == 2 and "RFC 3339" in result.stderr


def test_drift_tool_and_memory_refs(sqlite_ledger: Ledger) -> None:
    data = json.loads(
        invoke("drift", sqlite_ledger.run_id, "--db", sqlite_ledger.url, "--json").stdout
    )
    states = {(r["source"], r["state"]) for r in data}
    assert ("tool", "intact") in states  # the safe read's result
    assert ("memory", "unverifiable") in states  # no memory resolver
    human = invoke("drift", sqlite_ledger.run_id, "--db", sqlite_ledger.url)
    assert "intact" in human.stdout and "unverifiable" in human.stdout
    assert human.exit_code == 0  # unverifiable is listed, not a failure


def test_drift_resolves_typed_ledger_refs(tmp_path: Path) -> None:
    from ledger.typed import ShardStore, parse_config

    config_path = tmp_path / "ledger.yaml"
    config_path.write_text("facts:\n  type: log\n", encoding="utf-8")
    store = ShardStore(tmp_path / "store", parse_config({"facts": {"type": "log"}}))
    (record,) = store.append("facts", [{"operation": "append", "value": "the sky is blue"}])
    gone = Ref(
        source=RefSource.LEDGER, id="ldg-00000000-0000-4000-8000-000000000000", hash="sha256:00"
    )
    url = sqlite_url(tmp_path / "l.db")
    with SQLiteSink(tmp_path / "l.db") as sink:
        sink.record(Event(kind=Kind.REQUEST, run_id="r1", args='"check"'))
        refs = [Ref(source=RefSource.LEDGER, id=record.id, hash=record.sha), gone]
        sink.record(Event(kind=Kind.RETRIEVED, run_id="r1", refs=refs))
    args = ("drift", "r1", "--db", url, "--json")
    without = invoke(*args)
    assert {r["state"] for r in json.loads(without.stdout)} == {"unverifiable"}
    assert without.exit_code == 0
    store_args = ("--config", str(config_path), "--store", str(tmp_path / "store"))
    checked = invoke(*args, *store_args)
    assert [r["state"] for r in json.loads(checked.stdout)] == ["intact", "missing"]
    assert checked.exit_code == 1  # a missing ref is drift: exit non-zero
    human = invoke("drift", "r1", "--db", url, *store_args)
    assert human.exit_code == 1 and "1 ref(s) drifted or missing" in human.stderr
    assert invoke("drift", "r1", "--db", url, "--config", str(config_path)).exit_code == 2


def test_read_commands_work_on_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with JSONLSink(path) as sink:  # not durable: the write is denied, the rest recorded
        result = run_scripted_agent(sink, tmp_path / "work")
    url = "jsonl:///" + str(path)
    (run,) = json.loads(invoke("runs", "--db", url, "--json").stdout)
    assert run["run_id"] == result.run_id and run["denials"] == 2
    chain = json.loads(invoke("chain", result.run_id, "--db", url, "--json").stdout)
    assert {a["outcome"] for a in chain["actions"]} == {"denied"}
    why = json.loads(
        invoke("why", result.run_id, result.write_call_id, "--db", url, "--json").stdout
    )
    assert "not durable" in why["reason"]
    kinds = invoke("events", "--db", url, "--kind", "request", "--nl").stdout.splitlines()
    assert len(kinds) == 1
    drift = json.loads(invoke("drift", result.run_id, "--db", url, "--json").stdout)
    assert "intact" in {r["state"] for r in drift}


def test_events_after_pages_on_sqlite_and_jsonl(tmp_path: Path) -> None:
    with SQLiteSink(tmp_path / "l.db") as sql, JSONLSink(tmp_path / "l.jsonl") as log:
        for i in range(5):
            event = Event(kind=Kind.PROMPT, run_id="r", preview=f"p{i}")
            sql.record(event)
            log.record(event)
    for url in (sqlite_url(tmp_path / "l.db"), "jsonl:///" + str(tmp_path / "l.jsonl")):
        first = [
            json.loads(x)
            for x in invoke("events", "--db", url, "--limit", "2", "--nl").stdout.splitlines()
        ]
        rest = invoke("events", "--db", url, "--after", first[-1]["event_id"], "--nl")
        assert [json.loads(x)["preview"] for x in rest.stdout.splitlines()] == ["p2", "p3", "p4"]
        unknown = invoke("events", "--db", url, "--after", "01J0000000000000000000000Z")
        assert unknown.exit_code == 1 and "01J0000000000000000000000Z" in unknown.stderr


def test_drift_of_a_tampered_typed_record_is_drift_and_fails(tmp_path: Path) -> None:
    from ledger.typed import ShardStore, parse_config

    config_path = tmp_path / "ledger.yaml"
    config_path.write_text("facts:\n  type: log\n", encoding="utf-8")
    store = ShardStore(tmp_path / "store", parse_config({"facts": {"type": "log"}}))
    (record,) = store.append("facts", [{"operation": "append", "value": "the sky is blue"}])
    url = sqlite_url(tmp_path / "l.db")
    with SQLiteSink(tmp_path / "l.db") as sink:
        sink.record(Event(kind=Kind.REQUEST, run_id="r1", args='"check"'))
        refs = [Ref(source=RefSource.LEDGER, id=record.id, hash=record.sha)]
        sink.record(Event(kind=Kind.RETRIEVED, run_id="r1", refs=refs))
    (shard,) = (tmp_path / "store").rglob("*.jsonl")
    shard.write_text(shard.read_text().replace("blue", "red!"))  # the sha is not updated
    store_args = ("--config", str(config_path), "--store", str(tmp_path / "store"))
    result = invoke("drift", "r1", "--db", url, *store_args, "--json")
    (check,) = json.loads(result.stdout)
    assert check["state"] == "drifted" and "invalid-sha" in check["current_hash"]
    assert result.exit_code == 1
