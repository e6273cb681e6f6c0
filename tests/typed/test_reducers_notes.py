"""The notes reducer: notes, citations, votes and note_state (conformance items 20-31)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ledger.errors import ReplayError
from ledger.typed import LedgerDef, Record, final_id, replay
from ledger.typed.reducers.base import OperationError
from ledger.typed.reducers.notes import NotesReducer
from ledger.typed.reducers.simple import validate_operation

Chain = Callable[..., list[Record]]
NOTES = LedgerDef(name="knowledge", type="notes")
CITE = {"type": "repository", "path": "README.md"}


def note(**changes: Any) -> dict[str, Any]:
    base = {
        "operation": "note",
        "subject": "README",
        "note": "Documented",
        "reason": "Evidence",
        "citations": [CITE],
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def vote(note_id: str, kind: str = "up", **extra: Any) -> dict[str, Any]:
    return {"operation": "vote", "note_id": note_id, "vote": kind, **extra}


def history(chain: Chain) -> list[Record]:
    n = chain(
        [note(citations=[CITE, {**CITE, "start_line": 3, "end_line": 4}])],
        timestamp="2026-01-01T00:00:00.000Z",
    )
    note_id = n[0].id
    up = chain(
        [vote(note_id, "up", reason="Verified")],
        parents=(n[0].sha,),
        tx="u",
        timestamp="2026-01-02T00:00:00.000Z",
    )
    down = chain(
        [vote(note_id, "down")], parents=(n[0].sha,), tx="d", timestamp="2026-01-03T00:00:00.000Z"
    )
    return [*n, *up, *down]


def test_notes_output(chain: Chain) -> None:
    records = history(chain)
    tables = replay(NOTES, records).tables
    n = records[0]
    assert tables["notes"] == [
        {
            "id": n.id,
            "subject": "README",
            "note": "Documented",
            "reason": "Evidence",
            "created_at": n.timestamp,
            "record_sha": n.sha,
        }
    ]
    assert [(c["ordinal"], c["start_line"], c["end_line"]) for c in tables["note_citations"]] == [
        (0, None, None),
        (1, 3, 4),
    ]
    assert [v["record_id"] for v in tables["note_votes"]] == sorted(r.id for r in records[1:])
    reasons = {v["vote"]: v["reason"] for v in tables["note_votes"]}
    assert reasons == {"up": "Verified", "down": None}
    assert tables["note_state"] == [
        {
            "note_id": n.id,
            "upvotes": 1,
            "downvotes": 1,
            "net_votes": 0,
            "last_vote_at": "2026-01-03T00:00:00.000Z",
            "last_positive_vote_at": "2026-01-02T00:00:00.000Z",
        }
    ]


def test_notes_replay_is_order_independent_votes_after_notes(chain: Chain) -> None:
    records = history(chain)
    forward = replay(NOTES, records, ordered=True)
    backward = replay(NOTES, list(reversed(records)), ordered=True)
    assert forward.tables == backward.tables


def test_note_without_votes_has_zero_state(chain: Chain) -> None:
    (n,) = chain([note()])
    assert replay(NOTES, [n]).tables["note_state"] == [
        {
            "note_id": n.id,
            "upvotes": 0,
            "downvotes": 0,
            "net_votes": 0,
            "last_vote_at": None,
            "last_positive_vote_at": None,
        }
    ]


def test_payload_id_is_refused(chain: Chain) -> None:
    with pytest.raises(ReplayError, match="must not duplicate"):
        replay(NOTES, chain([{**note(), "id": final_id("x", 0)}]))


BAD_CITATIONS: list[Any] = [
    "README.md",
    [],
    [{}],
    [CITE] * 33,
    [{"type": "url", "path": "x"}],
    [{**CITE, "path": "../README.md"}],
    [{**CITE, "path": "/README.md"}],
    [{**CITE, "path": "docs\\README.md"}],
    [{**CITE, "path": "docs//README.md"}],
    [{**CITE, "path": "C:/README.md"}],
    [{**CITE, "path": "a/%2e%2E/b"}],
    [{**CITE, "path": "a\x7f"}],
    [{**CITE, "start_line": 0}],
    [{**CITE, "start_line": 1.5}],
    [{**CITE, "end_line": 0}],
    [{**CITE, "extra": 1}],
    [{**CITE, "start_line": 3, "end_line": 2}],
    [{**CITE, "start_line": True}],
]


@pytest.mark.parametrize("citations", BAD_CITATIONS)
def test_citation_rules(chain: Chain, citations: Any) -> None:
    with pytest.raises(ReplayError, match="valid citation"):
        replay(NOTES, chain([note(citations=citations)]))


def test_citation_variants_accepted_and_size_limit(chain: Chain) -> None:
    ok = [CITE, {**CITE, "end_line": 5}, {**CITE, "start_line": 2}]
    assert len(replay(NOTES, chain([note(citations=ok)])).tables["note_citations"]) == 3
    with pytest.raises(ReplayError, match="size limit"):
        replay(NOTES, chain([note(citations=[{**CITE, "path": "a" * 2048}])]))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"subject": ""}, "subject"),
        ({"subject": "   "}, "subject"),
        ({"subject": "a" * 513}, "bounded"),
        ({"note": "a" * 4097}, "bounded"),
        ({"reason": "é" * 1025}, "bounded"),
        ({"reason": "a" * 4097}, "bounded"),
        ({"reason": 1}, "bounded"),
    ],
)
def test_note_field_bounds(chain: Chain, changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ReplayError, match=message):
        replay(NOTES, chain([note(**changes)]))


def test_reason_counts_code_points(chain: Chain) -> None:
    assert replay(NOTES, chain([note(reason="é" * 1024)])).tables["notes"]


def test_vote_rules(chain: Chain) -> None:
    (n,) = chain([note()])
    for payload, message in [
        (vote(n.id, "maybe"), "up or down"),
        (vote(n.id, "up", reason="é" * 1025), "bounded"),
        (vote("", "up"), "bounded note ID"),
        (vote("x" * 129, "up"), "bounded note ID"),
    ]:
        with pytest.raises(ReplayError, match=message):
            replay(NOTES, [n, *chain([payload], parents=(n.sha,), tx="v")])


def test_vote_references(chain: Chain) -> None:
    (n,) = chain([note()])
    with pytest.raises(ReplayError, match="missing note"):
        replay(NOTES, chain([vote(final_id("nope", 0))], tx="v"))
    (v,) = chain([vote(n.id)], parents=(n.sha,), tx="v")
    (vv,) = chain([vote(v.id)], parents=(v.sha,), tx="w")
    with pytest.raises(ReplayError, match="missing note"):
        replay(NOTES, [n, v, vv])


def test_duplicate_note_id_and_missing_envelope_id(chain: Chain) -> None:
    (a,) = chain([note()], ids=[final_id("same", 0)])
    (b,) = chain([note(subject="other")], ids=[final_id("same", 0)])
    with pytest.raises(ReplayError, match="Duplicate note"):
        replay(NOTES, [a, b])
    nameless = Record(
        version=1,
        id="",
        type="ledger_append",
        timestamp="2026-01-01T00:00:00.000Z",
        parents=(),
        payload=note(),
        sha="sha256:" + "1" * 64,
    )
    with pytest.raises(ReplayError, match="canonical record ID"):
        replay(NOTES, [nameless])


def test_stored_vote_is_rechecked_at_output(chain: Chain) -> None:
    (n,) = chain([note()])
    (v,) = chain([vote(n.id, "up")], parents=(n.sha,), tx="v")
    for mutated in ("neutral", "", None):
        reducer = NotesReducer()
        reducer.apply(n)
        reducer.apply(v)
        reducer.finish()
        v.payload["vote"] = mutated
        with pytest.raises(OperationError, match="up or down vote"):
            reducer.output()
        v.payload["vote"] = "up"


@pytest.mark.parametrize(("kind", "state"), [("down", (0, 1, -1)), ("up", (1, 0, 1))])
def test_single_vote_state(chain: Chain, kind: str, state: tuple[int, int, int]) -> None:
    (n,) = chain([note()])
    (v,) = chain([vote(n.id, kind)], parents=(n.sha,), tx="v")
    row = replay(NOTES, [n, v]).tables["note_state"][0]
    assert (row["upvotes"], row["downvotes"], row["net_votes"]) == state


def test_validate_operation_checks_notes_fields() -> None:
    assert validate_operation(NOTES, note()) == "note"
    with pytest.raises(OperationError, match="valid citation"):
        validate_operation(NOTES, note(citations=[]))
