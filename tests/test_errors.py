"""The exception hierarchy: one root, broad branches, messages that say what went wrong."""

from __future__ import annotations

from typing import Any

import pytest

import ledger
import ledger.errors as errors
from ledger import (
    CallNotFound,
    CorruptRecord,
    DuplicateEvent,
    Event,
    EventNotFound,
    LedgerError,
    NotSelfExplaining,
    SinkClosed,
    StorageError,
    ToolDenied,
    ValidationError,
    assemble_chain,
)


def _public_error_classes() -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    for module in (errors, ledger):
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, BaseException):
                found.append(obj)
    return found


def test_public_error_list_is_not_empty() -> None:
    names = {cls.__name__ for cls in _public_error_classes()}
    assert {"LedgerError", "ValidationError", "NotSelfExplaining", "ToolDenied"} <= names
    assert {"DuplicateEvent", "EventNotFound", "CallNotFound", "StorageError"} <= names


@pytest.mark.parametrize("cls", _public_error_classes(), ids=lambda c: c.__name__)
def test_every_public_error_is_a_ledger_error(cls: type[BaseException]) -> None:
    assert issubclass(cls, LedgerError)


def test_package_reexports_are_the_same_classes() -> None:
    for name in errors.__all__:
        if hasattr(ledger, name):
            assert getattr(ledger, name) is getattr(errors, name)


@pytest.mark.parametrize(
    ("cls", "bases"),
    [
        (ValidationError, (ValueError,)),
        (NotSelfExplaining, (ValidationError, ValueError)),
        (errors.CanonicalizationError, (ValidationError,)),
        (CallNotFound, (LookupError,)),
        (EventNotFound, (StorageError, LookupError)),
        (DuplicateEvent, (StorageError,)),
        (CorruptRecord, (StorageError,)),
        (SinkClosed, (StorageError,)),
        (errors.SchemaVersionError, (StorageError,)),
        (errors.ConfigError, (errors.TypedLedgerError, ValueError)),
        (errors.RecordError, (errors.TypedLedgerError, ValueError)),
        (errors.QueryError, (errors.TypedLedgerError, ValueError)),
        (errors.ReplayError, (errors.TypedLedgerError,)),
        (errors.PersistError, (errors.TypedLedgerError,)),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else "",
)
def test_branches_let_callers_catch_broadly(
    cls: type[BaseException], bases: tuple[type[BaseException], ...]
) -> None:
    for base in bases:
        assert issubclass(cls, base), f"{cls.__name__} should be a {base.__name__}"


def test_errors_from_the_api_are_caught_as_ledger_errors() -> None:
    loose: Any = Event
    with pytest.raises(LedgerError):
        loose(kind="no-such-kind")
    with pytest.raises(LedgerError):
        Event.from_json("not json")
    with pytest.raises(LedgerError):
        assemble_chain([]).why("c1")


def test_not_self_explaining_lists_every_problem() -> None:
    problems = ["kind must be 'action'", "run_id is empty", "no ref with a known source"]
    exc = NotSelfExplaining(problems)
    message = str(exc)
    for problem in problems:
        assert problem in message
    assert message.index(problems[0]) < message.index(problems[1]) < message.index(problems[2])
    assert "nothing was stored" in message
    assert exc.problems == tuple(problems)


def test_not_self_explaining_keeps_its_own_copy_of_problems() -> None:
    problems = ["tool is empty"]
    exc = NotSelfExplaining(problems)
    problems.append("added later")
    assert exc.problems == ("tool is empty",)
    assert "added later" not in str(exc)


def test_not_self_explaining_is_raisable_and_catchable_as_validation_error() -> None:
    with pytest.raises(ValidationError, match="args is not a JSON object"):
        raise NotSelfExplaining(["args is not a JSON object"])


def test_tool_denied_carries_reason_tool_and_call() -> None:
    exc = ToolDenied("denied by approver: not today", tool="delete_file", call_id="c1")
    assert exc.reason == "denied by approver: not today"
    assert exc.tool == "delete_file"
    assert exc.call_id == "c1"
    assert str(exc) == "denied by approver: not today"


def test_tool_denied_defaults() -> None:
    exc = ToolDenied("no active run (no record, no action)")
    assert exc.reason == "no active run (no record, no action)"
    assert exc.tool == ""
    assert exc.call_id == ""
    with pytest.raises(LedgerError, match="no active run"):
        raise exc


def test_call_not_found_is_caught_as_lookup_error() -> None:
    with pytest.raises(LookupError, match="'c9'"):
        assemble_chain([]).why("c9")
