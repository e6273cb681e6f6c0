"""The ``notes`` reducer: evidence-backed notes, their citations, votes and ``note_state``.

Replay applies every ``note`` record first and then every ``vote`` record, each group in
canonical order, so a vote may precede its note in the log and the output does not depend
on record order. Entries are keyed by their **envelope** id; a canonical notes payload
must not carry its own ``id``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from ledger.typed.jsontext import canonical_json, utf8_len
from ledger.typed.records import Record
from ledger.typed.reducers.base import OperationError, Reducer, TableSpec, safe_integer

__all__ = ["NotesReducer", "check_citation"]

MAX_SUBJECT_BYTES: Final = 512
MAX_NOTE_BYTES: Final = 4096
MAX_REASON_CHARS: Final = 1024
MAX_CITATIONS: Final = 32
MAX_CITATION_BYTES: Final = 2048
MAX_NOTE_ID_BYTES: Final = 128
_CITATION_KEYS: Final = frozenset({"type", "path", "start_line", "end_line"})
_SCHEME_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_PATH_BAD_RE: Final = re.compile(r"[\\\x00-\x1f\x7f]|%2e|%2f|%5c", re.IGNORECASE)

_T, _I = "text", "integer"
NOTES_SPECS: Final = (
    TableSpec(
        name="notes",
        columns=(
            ("id", _T),
            ("subject", _T),
            ("note", _T),
            ("reason", _T),
            ("created_at", _T),
            ("record_sha", _T),
        ),
        primary_key=("id",),
    ),
    TableSpec(
        name="note_citations",
        columns=(
            ("note_id", _T),
            ("ordinal", _I),
            ("citation_type", _T),
            ("path", _T),
            ("start_line", _I),
            ("end_line", _I),
        ),
        primary_key=("note_id", "ordinal"),
    ),
    TableSpec(
        name="note_votes",
        columns=(
            ("record_id", _T),
            ("note_id", _T),
            ("vote", _T),
            ("reason", _T),
            ("created_at", _T),
        ),
        primary_key=("record_id",),
    ),
    TableSpec(
        name="note_state",
        columns=(
            ("note_id", _T),
            ("upvotes", _I),
            ("downvotes", _I),
            ("net_votes", _I),
            ("last_vote_at", _T),
            ("last_positive_vote_at", _T),
        ),
        primary_key=("note_id",),
    ),
)


#: What JavaScript's ``String.prototype.trim`` removes (WhiteSpace and LineTerminator);
#: Python's ``str.strip()`` differs (it strips U+001C..U+001F and U+0085, keeps U+FEFF).
JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def _nonblank(value: object) -> bool:
    """A string that is not empty after JavaScript's ``trim()``."""
    return isinstance(value, str) and bool(value.strip(JS_WHITESPACE))


def _bounded_bytes(value: object, limit: int) -> bool:
    return _nonblank(value) and utf8_len(str(value)) <= limit


def _check_reason(value: object, what: str) -> str:
    if not isinstance(value, str) or not _nonblank(value) or len(value) > MAX_REASON_CHARS:
        raise OperationError(
            f"{what} reason must be a nonempty bounded string (at most "
            f"{MAX_REASON_CHARS} characters)",
        )
    return value


def _path_ok(path: object) -> bool:
    if not isinstance(path, str) or not _nonblank(path):
        return False
    if _PATH_BAD_RE.search(path) or _SCHEME_RE.match(path):
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def _line(citation: Mapping[str, Any], key: str) -> int | None:
    if key not in citation:
        return None
    number = safe_integer(citation[key])
    if number is None or number < 1:
        raise ValueError(key)
    return number


def check_citation(citation: object) -> dict[str, Any]:
    """Check one citation; return its normalized fields or raise :class:`OperationError`."""
    invalid = OperationError(
        "Note citations must contain at least one valid citation object: each is "
        "{type: repository, path, start_line?, end_line?} with a relative path"
    )
    if not isinstance(citation, dict):
        raise invalid
    if utf8_len(canonical_json(citation)) > MAX_CITATION_BYTES:
        raise OperationError(f"Note citation exceeds size limit of {MAX_CITATION_BYTES} bytes")
    if citation.get("type") != "repository" or not citation.keys() <= _CITATION_KEYS:
        raise invalid
    if not _path_ok(citation.get("path")):
        raise invalid
    try:
        start, end = _line(citation, "start_line"), _line(citation, "end_line")
    except ValueError:
        raise invalid from None
    if start is not None and end is not None and end < start:
        raise invalid
    return {"type": "repository", "path": citation["path"], "start_line": start, "end_line": end}


def _check_note(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    if not _bounded_bytes(payload["subject"], MAX_SUBJECT_BYTES) or not _bounded_bytes(
        payload["note"], MAX_NOTE_BYTES
    ):
        raise OperationError(
            "Note subject and assertion must be nonempty bounded strings (subject at most "
            f"{MAX_SUBJECT_BYTES} bytes, note at most {MAX_NOTE_BYTES} bytes)",
        )
    _check_reason(payload["reason"], "Note")
    citations = payload["citations"]
    if not isinstance(citations, list) or not 1 <= len(citations) <= MAX_CITATIONS:
        raise OperationError(
            "Note citations must contain at least one valid citation object "
            f"(1..{MAX_CITATIONS} citations)",
        )
    return [check_citation(citation) for citation in citations]


def _check_vote(payload: Mapping[str, Any]) -> None:
    note_id = payload["note_id"]
    if (
        not isinstance(note_id, str)
        or not note_id
        or utf8_len(note_id) > MAX_NOTE_ID_BYTES
        or payload["vote"] not in ("up", "down")
    ):
        raise OperationError(
            "Vote requires a bounded note ID and an up or down vote "
            f"(note_id of 1..{MAX_NOTE_ID_BYTES} bytes, vote 'up' or 'down')",
        )
    if "reason" in payload:
        _check_reason(payload["reason"], "Vote")


class NotesReducer(Reducer):
    """Collects notes and votes while applying; resolves them in :meth:`finish`."""

    ledger_type = "notes"
    specs = NOTES_SPECS
    #: ``False`` (replay, as the reference projects): every note first, then every vote.
    #: ``True`` (the persistence dry run): records in the order given, so a vote before its
    #: note fails with "Vote references a missing note", as the reference's dry run does.
    sequential: bool = False

    def __init__(self, schema: Mapping[str, Any] | None = None, key: str | None = None) -> None:
        super().__init__(None, key)
        self._pending_notes: list[tuple[Record, list[dict[str, Any]]]] = []
        self._pending_votes: list[Record] = []
        self._notes: dict[str, tuple[Record, list[dict[str, Any]]]] = {}
        self._votes: dict[str, Record] = {}

    def check_payload(self, operation: str, payload: dict[str, Any]) -> None:
        if operation == "note":
            _check_note(payload)
        else:
            _check_vote(payload)

    def apply_operation(self, operation: str, payload: dict[str, Any], record: Record) -> None:
        if "id" in payload:
            raise OperationError(
                "Notes canonical payload must not duplicate the envelope ID (remove payload.id)"
            )
        if not record.id:
            raise OperationError("Notes projection requires a canonical record ID")
        if operation == "note":
            self._pending_notes.append((record, _check_note(payload)))
        else:
            _check_vote(payload)
            self._pending_votes.append(record)
        if self.sequential:  # the reference's persistence dry run: each record in turn
            for failed, problem in self.finish():
                assert failed is record
                raise problem

    def finish(self) -> list[tuple[Record, OperationError]]:
        rejected: list[tuple[Record, OperationError]] = []
        for record, citations in self._pending_notes:
            if record.id in self._notes:
                rejected.append((record, OperationError(f"Duplicate note record ID {record.id}")))
            else:
                self._notes[record.id] = (record, citations)
        for record in self._pending_votes:
            problem = self._vote_problem(record)
            if problem is not None:
                rejected.append((record, OperationError(problem)))
            else:
                self._votes[record.id] = record
        self._pending_notes, self._pending_votes = [], []
        return rejected

    def _vote_problem(self, record: Record) -> str | None:
        if record.id in self._notes or record.id in self._votes:
            return f"Duplicate vote record ID {record.id}"
        note_id = record.payload["note_id"]
        if note_id not in self._notes:
            return f"Vote references a missing note {note_id!r}"
        return None

    def output(self) -> dict[str, list[dict[str, Any]]]:
        note_ids = sorted(self._notes)
        votes = [self._votes[k] for k in sorted(self._votes)]
        return {
            "notes": [_note_row(self._notes[i][0]) for i in note_ids],
            "note_citations": [
                _citation_row(i, n, c) for i in note_ids for n, c in enumerate(self._notes[i][1])
            ],
            "note_votes": [_vote_row(v) for v in votes],
            "note_state": _state_rows(note_ids, votes),
        }


def _note_row(record: Record) -> dict[str, Any]:
    p = record.payload
    return {
        "id": record.id,
        "subject": p["subject"],
        "note": p["note"],
        "reason": p["reason"],
        "created_at": record.timestamp,
        "record_sha": record.sha,
    }


def _citation_row(note_id: str, ordinal: int, citation: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "note_id": note_id,
        "ordinal": ordinal,
        "citation_type": citation["type"],
        "path": citation["path"],
        "start_line": citation["start_line"],
        "end_line": citation["end_line"],
    }


def _vote_row(record: Record) -> dict[str, Any]:
    p = record.payload
    return {
        "record_id": record.id,
        "note_id": p["note_id"],
        "vote": p["vote"],
        "reason": p.get("reason"),
        "created_at": record.timestamp,
    }


def _empty_state(note_id: str) -> dict[str, Any]:
    return {
        "note_id": note_id,
        "upvotes": 0,
        "downvotes": 0,
        "net_votes": 0,
        "last_vote_at": None,
        "last_positive_vote_at": None,
    }


def _state_rows(note_ids: list[str], votes: list[Record]) -> list[dict[str, Any]]:
    rows = {note_id: _empty_state(note_id) for note_id in note_ids}
    for vote in votes:
        kind = vote.payload.get("vote")
        if kind not in ("up", "down"):
            raise OperationError(f"Vote {vote.id} is not an up or down vote: {kind!r}")
        row = rows[vote.payload["note_id"]]
        at = vote.timestamp
        row["upvotes" if kind == "up" else "downvotes"] += 1
        row["last_vote_at"] = max(row["last_vote_at"] or at, at)
        if kind == "up":
            row["last_positive_vote_at"] = max(row["last_positive_vote_at"] or at, at)
    for row in rows.values():
        row["net_votes"] = row["upvotes"] - row["downvotes"]
    return [rows[note_id] for note_id in note_ids]
