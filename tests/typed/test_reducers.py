"""Reducers for log, set, map, table, counter and raw ledgers (conformance items 1-19)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from ledger.errors import RecordError, ReplayError
from ledger.typed import LedgerDef, Record, replay
from ledger.typed.reducers.base import OperationError
from ledger.typed.reducers.simple import make_reducer, validate_operation

Chain = Callable[..., list[Record]]
MAX = 2**53 - 1


def run(chain: Chain, ledger: LedgerDef, payloads: Sequence[Any]) -> list[dict[str, Any]]:
    return replay(ledger, chain(payloads)).tables["state"]


def ledger(kind: str, **kw: Any) -> LedgerDef:
    return LedgerDef(name=kind, type=kind, **kw)


TABLE = ledger(
    "table",
    key="id",
    schema={"type": "object", "properties": {"score": {"type": "integer", "maxLength": 1}}},
)
TABLE_MAX = ledger(
    "table",
    key="id",
    schema={"type": "object", "properties": {"score": {"type": "integer", "maximum": 10}}},
)


@pytest.mark.parametrize("kind", ["log", "set", "map", "counter"])
def test_empty_history_gives_empty_state(kind: str) -> None:
    assert replay(ledger(kind), []).tables == {"state": []}


def test_replay_is_deterministic(chain: Chain) -> None:
    records = chain([{"operation": "append", "value": v} for v in (1, {"b": 2, "a": 1})])
    assert replay(ledger("log"), records) == replay(ledger("log"), records)


def test_log_keeps_duplicates_in_order(chain: Chain) -> None:
    rows = run(chain, ledger("log"), [{"operation": "append", "value": v} for v in (1, 1, 2)])
    assert rows == [
        {"position": 0, "value": "1"},
        {"position": 1, "value": "1"},
        {"position": 2, "value": "2"},
    ]
    rows = run(chain, ledger("log"), [{"operation": "append", "value": v} for v in "xxy"])
    assert [r["value"] for r in rows] == ['"x"', '"x"', '"y"']


def test_log_schema_on_replay_is_the_reference_subset(chain: Chain) -> None:
    # faithful on read: minLength and pattern are not enforced by the reference's replay
    loose = ledger("log", schema={"type": "string", "minLength": 2, "pattern": "^a"})
    assert len(run(chain, loose, [{"operation": "append", "value": v} for v in ("a", "bb")])) == 2
    with pytest.raises(ReplayError, match=r"does not match schema: \(root\) must be a string"):
        run(chain, loose, [{"operation": "append", "value": 1}])


def test_log_schema_on_write_is_full_draft_2020_12() -> None:
    strict = ledger("log", schema={"type": "string", "minLength": 2, "pattern": "^a"})
    assert validate_operation(strict, {"operation": "append", "value": "ab"}) == "append"
    for bad in ("a", "bb"):
        with pytest.raises(OperationError, match=r"does not match schema: \(root\)"):
            validate_operation(strict, {"operation": "append", "value": bad})


def test_a_table_update_breaking_maximum_replays_as_the_reference_does(chain: Chain) -> None:
    ops = [
        {"operation": "insert", "value": {"id": "a"}},
        {"operation": "update", "key": "a", "patch": {"score": 11}},
    ]
    assert run(chain, TABLE_MAX, ops) == [{"key": "a", "value": '{"id":"a","score":11}'}]


def test_set_add_remove(chain: Chain) -> None:
    ops = [("add", "x"), ("add", "y"), ("remove", "x")]
    rows = run(chain, ledger("set"), [{"operation": o, "value": v} for o, v in ops])
    assert rows == [{"identity": '"y"', "value": '"y"'}]


def test_set_identity_is_canonical_json(chain: Chain) -> None:
    values: list[tuple[str, Any]] = [
        ("add", "x"),
        ("add", 1),
        ("add", True),
        ("add", None),
        ("add", [1, {"a": 1, "b": 2}]),
        ("add", {"a": [None, False], "b": 1}),
        ("add", {"b": 1, "a": [None, False]}),
        ("remove", [1, {"b": 2, "a": 1}]),
        ("remove", "missing"),
    ]
    rows = run(chain, ledger("set"), [{"operation": o, "value": v} for o, v in values])
    assert len(rows) == 5
    rows = run(chain, ledger("set"), [{"operation": "add", "value": v} for v in ("0", 0, False)])
    assert len(rows) == 3


@pytest.mark.parametrize("bad", [float("nan"), {"x": float("inf")}])
def test_set_refuses_non_finite(bad: Any) -> None:
    reducer = make_reducer("set")
    rec = Record(
        version=1,
        id="x",
        type="t",
        timestamp="",
        parents=(),
        payload={"operation": "add", "value": bad},
        sha="s",
    )
    with pytest.raises(OperationError, match="finite"):
        reducer.apply(rec)


def test_map_put_replace_delete(chain: Chain) -> None:
    ops = [
        {"operation": "put", "key": "a", "value": 1},
        {"operation": "put", "key": "a", "value": 2},
        {"operation": "delete", "key": "missing"},
        {"operation": "put", "key": "b", "value": 3},
        {"operation": "put", "key": "", "value": None},
    ]
    rows = run(chain, ledger("map"), ops)
    assert rows == [
        {"key": "", "value": "null"},
        {"key": "a", "value": "2"},
        {"key": "b", "value": "3"},
    ]
    with pytest.raises(ReplayError, match="key must be a string"):
        run(chain, ledger("map"), [{"operation": "put", "key": 1, "value": 1}])


def test_table_witness(chain: Chain) -> None:
    ops = [
        {"operation": "insert", "value": {"id": "a", "field": "x"}},
        {"operation": "update", "key": "a", "patch": {"field": "y"}},
        {"operation": "upsert", "value": {"id": "b", "field": "x"}},
    ]
    rows = run(chain, ledger("table", key="id"), ops)
    assert rows == [
        {"key": "a", "value": '{"field":"y","id":"a"}'},
        {"key": "b", "value": '{"field":"x","id":"b"}'},
    ]


def test_table_upsert_replaces_whole_row(chain: Chain) -> None:
    ops = [
        {"operation": "insert", "value": {"id": "a", "score": 1, "note": "x"}},
        {"operation": "upsert", "value": {"id": "a", "score": 9}},
        {"operation": "delete", "key": "absent"},
    ]
    assert run(chain, TABLE, ops) == [{"key": "a", "value": '{"id":"a","score":9}'}]


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([{"operation": "update", "key": "a", "patch": {"x": 1}}], "does not exist"),
        ([{"operation": "insert", "value": {"id": "a"}}] * 2, "already exists"),
        (
            [
                {"operation": "insert", "value": {"id": "a"}},
                {"operation": "update", "key": "a", "patch": {"id": "b"}},
            ],
            "primary key",
        ),
        (
            [
                {"operation": "insert", "value": {"id": "a"}},
                {"operation": "update", "key": "a", "patch": {"score": 1.5}},
            ],
            "does not match schema",
        ),
        ([{"operation": "insert", "value": {"id": 1}}], "string primary key"),
        ([{"operation": "insert", "value": [1]}], "string primary key"),
        (
            [
                {"operation": "insert", "value": {"id": "a"}},
                {"operation": "update", "key": "a", "patch": [1]},
            ],
            "primary key",
        ),
        (
            [
                {"operation": "insert", "value": {"id": "a"}},
                {"operation": "update", "key": "a", "patch": {"big": "x" * 65536}},
            ],
            "Replay cell exceeds size limit",
        ),
    ],
)
def test_table_rules(chain: Chain, ops: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ReplayError, match=message):
        run(chain, TABLE, ops)


@pytest.mark.parametrize("amount", ["2", float("nan"), float("inf"), -1, 0.5, 2**53, True, None])
def test_counter_amount_must_be_safe_nonnegative_integer(chain: Chain, amount: Any) -> None:
    reducer = make_reducer("counter")
    rec = Record(
        version=1,
        id="x",
        type="t",
        timestamp="",
        parents=(),
        payload={"operation": "increment", "name": "a", "amount": amount},
        sha="s",
    )
    with pytest.raises(OperationError, match="safe integer"):
        reducer.apply(rec)


def test_counter_range_leaves_state_unchanged(chain: Chain) -> None:
    reducer = make_reducer("counter")
    for i, amount in enumerate((MAX, 1)):
        rec = chain([{"operation": "increment", "name": "a", "amount": amount}], tx=str(i))[0]
        if i == 0:
            reducer.apply(rec)
        else:
            with pytest.raises(OperationError, match="safe integer range"):
                reducer.apply(rec)
    assert reducer.output()["state"] == [{"name": "a", "value": MAX}]


def test_counter_arithmetic_and_negative_results(chain: Chain) -> None:
    ops = [
        ("increment", "a", 3),
        ("increment", "a", 5),
        ("decrement", "a", 2),
        ("increment", "b", 0),
        ("decrement", "c", 4),
    ]
    rows = run(
        chain, ledger("counter"), [{"operation": o, "name": n, "amount": a} for o, n, a in ops]
    )
    assert rows == [
        {"name": "a", "value": 6},
        {"name": "b", "value": 0},
        {"name": "c", "value": -4},
    ]
    with pytest.raises(ReplayError, match="name"):
        run(chain, ledger("counter"), [{"operation": "increment", "name": "", "amount": 1}])


def test_unknown_type_operation_and_fields(chain: Chain) -> None:
    with pytest.raises(OperationError, match="Unknown built-in ledger type"):
        make_reducer("claims")
    with pytest.raises(ReplayError, match="Unsupported ledger operation"):
        run(chain, ledger("log"), [{"operation": "claim", "value": 1}])
    with pytest.raises(ReplayError, match="Invalid ledger operation fields"):
        run(chain, ledger("log"), [{"operation": "append", "value": 1, "claim": 1}])
    with pytest.raises(ReplayError, match="Invalid ledger operation fields"):
        run(chain, ledger("map"), [{"operation": "put", "key": "a"}])


def test_payload_id_is_allowed_for_typed_ledgers(chain: Chain) -> None:
    rows = run(chain, ledger("log"), [{"operation": "append", "value": 1, "id": "ldg-x"}])
    assert rows == [{"position": 0, "value": "1"}]


def test_error_names_the_record(chain: Chain) -> None:
    records = chain([{"operation": "insert", "value": {"id": "a"}}] * 2)
    with pytest.raises(ReplayError) as info:
        replay(TABLE, records)
    assert records[1].id in str(info.value) and records[1].sha in str(info.value)


def test_lenient_replay_skips_bad_records(chain: Chain) -> None:
    records = chain([{"operation": "insert", "value": {"id": "a"}}] * 2)
    result = replay(TABLE, records, strict=False)
    assert result.record_count == 1 and len(result.rejected) == 1
    assert result.rejected[0].record == records[1]


def test_raw_ledger_schema_ignores_payload_id(chain: Chain) -> None:
    raw = LedgerDef(
        name="raw",
        schema={"type": "object", "additionalProperties": False, "properties": {"x": {}}},
    )
    result = replay(raw, chain([{"x": 1, "id": "ldg-1"}]))
    assert result.tables == {} and result.record_count == 1
    with pytest.raises(ReplayError, match="violates its configured schema"):
        replay(raw, chain([{"y": 1}]))


def test_validate_operation_is_stateless(chain: Chain) -> None:
    assert (
        validate_operation(TABLE, {"operation": "update", "key": "zz", "patch": {"a": 1}})
        == "update"
    )
    with pytest.raises(RecordError, match="safe integer"):
        validate_operation(ledger("counter"), {"operation": "increment", "name": "a", "amount": -1})
    with pytest.raises(RecordError, match="does not match schema"):
        validate_operation(TABLE, {"operation": "insert", "value": {"id": "a", "score": "x"}})
