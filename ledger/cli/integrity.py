"""The tamper-evident log on the command line.

::

    ledger keygen example.com/agent-log --out log.key > log.vkey
    ledger checkpoint --db sqlite:///ledger.db --key log.key -o checkpoints/
    ledger verify --db sqlite:///ledger.db --vkey log.vkey --checkpoint checkpoints/
    ledger proof EVENT_ID --db sqlite:///ledger.db
    ledger bundle RUN_ID --db sqlite:///ledger.db -o run.bundle.json
    ledger verify-bundle run.bundle.json --vkey log.vkey
    ledger witness serve --state wstate --key witness.key --log ORIGIN=VKEY

Each command is a thin layer over :mod:`ledger.integrity` and the SQL sinks' log
methods (:mod:`ledger.sinks.tree`). ``verify`` and ``verify-bundle`` exit 0 when
everything verifies, 1 when they find tampering or a bad checkpoint, 2 on a usage error.
A key argument (``--vkey``, ``--log ORIGIN=VKEY``, ``--witness URL=VKEY``) is the key
text itself or the path of a file holding it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from ledger.cli.common import db_option, emit_json, json_option, progress, stdout
from ledger.errors import IntegrityError, RunNotFound, StorageError, ValidationError
from ledger.integrity._keytext import b64encode
from ledger.integrity.bundle import make_bundle, verify_bundle
from ledger.integrity.checkpoint import Checkpoint, TreeHead, parse_checkpoint_body
from ledger.integrity.cosignature import (
    CosignatureSigner,
    CosignatureVerifier,
    generate_witness_key,
    verify_cosignature,
)
from ledger.integrity.merkle import MemoryTree, leaf_hash, verify_consistency, verify_inclusion
from ledger.integrity.note import (
    Signer,
    Verifier,
    add_signature_lines,
    generate_key,
    parse_signatures,
)
from ledger.integrity.verify import (
    JSONLLeaves,
    LeafSource,
    VerifyResult,
    verify_ledger,
)
from ledger.integrity.witness import WitnessServer, request_cosignatures
from ledger.model.shown import one_line
from ledger.report.retention import with_retention_tables
from ledger.sinks.url import parse_url

__all__ = ["register"]

log = logging.getLogger(__name__)

EXIT_FOUND = 1
EXIT_USAGE = 2
CHECKPOINT_GLOB = "checkpoint-*.txt"


# --- arguments -----------------------------------------------------------------------


def _key_text(value: str, what: str) -> str:
    """A key given as text or as the path of a file holding it."""
    candidate = Path(value).expanduser()
    if "+" not in value or candidate.is_file():
        try:
            return candidate.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise click.BadParameter(
                f"{value!r} is neither a key text nor a readable key file ({exc.strerror})",
                param_hint=what,
            ) from None
        except UnicodeDecodeError:
            raise click.BadParameter(f"{value}: not a key file", param_hint=what) from None
    return value.strip()


def _verifier(value: str, what: str = "--vkey") -> Verifier:
    text = _key_text(value, what)
    if text.startswith("PRIVATE+KEY+"):
        raise click.BadParameter(
            "that is a signer key (keep it secret); give the verifier key that "
            "`ledger keygen` printed",
            param_hint=what,
        )
    try:
        return Verifier.from_key(text)
    except (IntegrityError, ValidationError) as exc:
        raise click.BadParameter(str(exc), param_hint=what) from None


def _signer(path: Path) -> Signer:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise click.BadParameter(f"{path}: {exc.strerror}", param_hint="'--key'") from None
    except UnicodeDecodeError:
        raise click.BadParameter(f"{path}: not a key file", param_hint="'--key'") from None
    try:
        return Signer.from_key(text)
    except (IntegrityError, ValidationError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="'--key'") from None


def _pair(value: str, what: str) -> tuple[str, str]:
    left, sep, right = value.partition("=")
    if not sep or not left or not right:
        raise click.BadParameter(f"{value!r}: expected NAME=VKEY", param_hint=what)
    return left, right


def _scheme(url: str) -> str:
    try:
        return str(parse_url(url).scheme)
    except ValidationError as exc:
        raise click.BadParameter(str(exc), param_hint="'--db'") from None


@contextmanager
def _sql_sink(url: str, *, write: bool) -> Iterator[Any]:
    """The SQL sink at ``url`` (one with the log methods)."""
    from ledger.sinks.opening import lock_timeout, open_reader, open_sink

    if write:  # never create a ledger here: a mistyped URL would get a fresh, signed log
        try:
            open_reader(url).close()
        except StorageError as exc:
            if str(exc).startswith("no ledger at"):  # a missing file, schema or events table
                raise
            # a ledger at an older revision: opening it for writing upgrades it, as before
    sink: Any = open_sink(url, lock_wait=lock_timeout()) if write else open_reader(url)
    try:
        if not hasattr(sink, "tree_head"):
            raise click.BadParameter(
                f"{url}: only sqlite:/// and postgresql:// ledgers keep a Merkle log here",
                param_hint="'--db'",
            )
        yield sink
    finally:
        sink.close()


def _jsonl_path(url: str) -> Path:
    parsed = parse_url(url)
    assert parsed.path is not None
    if not parsed.path.is_file():
        raise StorageError(f"no ledger at {parsed.shown}: the file does not exist")
    return parsed.path


# --- keygen --------------------------------------------------------------------------


@click.command(short_help="Make a signing key: write it to FILE, print the verifier key.")
@click.argument("name")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the signer key (mode 0600; never overwritten).",
)
@click.option(
    "--witness", "witness", is_flag=True, help="A witness cosigning key (tlog-cosignature)."
)
def keygen(name: str, out: Path, witness: bool) -> None:
    """Make an Ed25519 key named NAME (e.g. example.com/agent-log): the signer key text
    goes to FILE (created with mode 0600), the verifier key text to standard output."""
    try:
        skey, vkey = generate_witness_key(name) if witness else generate_key(name)
    except (ValidationError, IntegrityError) as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise click.UsageError(f"{out} exists; a key file is never overwritten") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(skey + "\n")
        f.flush()
        os.fsync(f.fileno())
    click.echo(vkey)


# --- checkpoint ----------------------------------------------------------------------


def _previous(out: Path | None) -> list[Checkpoint]:
    """The checkpoints already in ``-o`` (a folder's files, or the file), unverified."""
    if out is None:
        return []
    files = sorted(out.glob(CHECKPOINT_GLOB)) if out.is_dir() else [out] if out.is_file() else []
    found: list[Checkpoint] = []
    for f in files:
        try:
            note = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise IntegrityError(
                f"{f} is not a checkpoint (not UTF-8 text); move it away"
            ) from None
        try:
            body, _ = parse_signatures(note)
            parsed = parse_checkpoint_body(body)
        except IntegrityError as exc:
            raise IntegrityError(f"{f} is not a checkpoint ({exc}); move it away") from None
        found.append(
            Checkpoint(
                origin=parsed.origin,
                size=parsed.size,
                root=parsed.root,
                text=note,
                signers=(),
                extensions=parsed.extensions,
            )
        )
    return found


def _check_previous(previous: Sequence[Checkpoint], origin: str, size: int, root_at: Any) -> None:
    """Refuse to sign when a checkpoint already written outside the ledger disagrees
    with the ledger now: the copy an attacker of the database cannot reach."""
    for cp in previous:
        if cp.origin != origin:
            continue
        if cp.size > size:
            raise IntegrityError(
                f"checkpoint {cp.size} was written before but the ledger has {size} leaves: "
                "it was truncated or restored from an old backup; not signed. Run `ledger verify`"
            )
        if root_at(cp.size) != cp.root:
            raise IntegrityError(
                f"the ledger no longer leads to the root of checkpoint {cp.size} written "
                "before: it was rewritten; not signed. Run `ledger verify`"
            )


def _out_path(text: str | None) -> Path | None:
    """``-o``: a folder when it exists as one or ends in a slash (created), else a file."""
    if text is None:
        return None
    path = Path(text).expanduser()
    if text.endswith(("/", os.sep)) and not path.exists():
        path.mkdir(parents=True)
    if not path.is_dir() and not path.parent.is_dir():
        raise click.BadParameter(f"the folder {path.parent} does not exist", param_hint="-o")
    return path


def _write_note(out: Path, cp: Checkpoint) -> Path:
    target = out / f"checkpoint-{cp.size:012d}.txt" if out.is_dir() else out
    tmp = target.with_name(f".{target.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(cp.text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    return target


def _witness_args(values: Sequence[str]) -> list[tuple[str, CosignatureVerifier]]:
    out: list[tuple[str, CosignatureVerifier]] = []
    for value in values:
        url, key = _pair(value, "--witness")
        if not url.startswith(("http://", "https://")):
            raise click.BadParameter(
                f"{value}: a witness URL is http:// or https://", param_hint="'--witness'"
            )
        try:
            out.append((url, CosignatureVerifier.from_key(_key_text(key, "--witness"))))
        except (IntegrityError, ValidationError) as exc:
            raise click.BadParameter(f"{value}: {exc}", param_hint="'--witness'") from None
    return out


def _cosign(
    cp: Checkpoint, witnesses: Sequence[tuple[str, CosignatureVerifier]], proof_from: Any
) -> Checkpoint:
    """Each witness's verified cosignature line added to the note; IntegrityError (and
    nothing written) when one refuses or answers with a bad cosignature."""
    note = cp.text
    for url, verifier in witnesses:
        try:
            lines = request_cosignatures(url, cp.text, proof_from=proof_from)
        except OSError as exc:  # urllib's URLError, a timeout, a reset connection
            reason = getattr(exc, "reason", None) or exc.strerror or exc
            raise IntegrityError(
                f"witness {url} could not be reached ({reason}); nothing written"
            ) from None
        mine = [line for line in lines if line.removeprefix("— ").split(" ", 1)[0] == verifier.name]
        if not mine:
            raise IntegrityError(f"witness {url} answered without a cosignature by {verifier.name}")
        candidate = add_signature_lines(note, mine)
        verify_cosignature(candidate, verifier)
        note = candidate
    return Checkpoint(
        origin=cp.origin,
        size=cp.size,
        root=cp.root,
        text=note,
        signers=cp.signers,
        extensions=cp.extensions,
    )


def _sign_sql(url: str, signer: Signer, out: Path | None, witnesses: Any) -> Checkpoint:
    with _sql_sink(url, write=True) as sink:
        head = sink.tree_head()
        _check_previous(_previous(out), sink.origin, head.size, sink.tree_root)
        cp: Checkpoint = sink.checkpoint(signer)
        if witnesses:
            cp = _cosign(cp, witnesses, lambda old: sink.consistency_proof(old, cp.size))
        return cp


def _sign_jsonl(
    url: str, signer: Signer, out: Path | None, witnesses: Any, origin: str | None
) -> Checkpoint:
    source = JSONLLeaves(_jsonl_path(url))
    tree = MemoryTree.of(leaf_hash(data) for data in source.leaves())
    name = origin or source.origin_guess()
    if name is None:
        raise click.UsageError(
            "the JSONL file's first line is not a ledger event; name the log with --origin"
        )
    _check_previous(_previous(out), name, tree.size, tree.root)
    cp = Checkpoint.sign(name, TreeHead(size=tree.size, root=tree.root()), signer)
    if witnesses:
        cp = _cosign(cp, witnesses, lambda old: tree.consistency_proof(old, cp.size))
    return cp


@click.command(short_help="Sign the ledger's tree head as a checkpoint.")
@db_option
@click.option(
    "--key",
    "key",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The signer key file (from `ledger keygen`).",
)
@click.option(
    "-o",
    "--out",
    "out_text",
    metavar="FILE|DIR/",
    help="Write the note to FILE, or to DIR/checkpoint-<size>.txt (keep it outside the database).",
)
@click.option(
    "--every",
    "every",
    type=click.FloatRange(min=0.1),
    help="Sign again every SECONDS until interrupted.",
)
@click.option(
    "--witness",
    "witness",
    multiple=True,
    metavar="URL=VKEY",
    help="Have the witness at URL cosign (repeatable); any refusal fails the command.",
)
@click.option(
    "--origin", help="The log's name, for a jsonl:/// file (default: agentledger/<first event id>)."
)
def checkpoint(
    db: str,
    key: Path,
    out_text: str | None,
    every: float | None,
    witness: tuple[str, ...],
    origin: str | None,
) -> None:
    """Sign the current tree head of the ledger at --db (a C2SP checkpoint), store it in
    the ledger, and print it or write it to -o. For a jsonl:/// file the tree is
    computed over its lines (leaf = a line's bytes without the newline)."""
    signer = _signer(key)
    witnesses = _witness_args(witness)
    jsonl = _scheme(db) == "jsonl"
    if origin is not None and not jsonl:
        raise click.UsageError("--origin is for a jsonl:/// file; a SQL ledger stores its own")
    out = _out_path(out_text)
    last: tuple[int, bytes] | None = None
    while True:
        cp = (
            _sign_jsonl(db, signer, out, witnesses, origin)
            if jsonl
            else _sign_sql(db, signer, out, witnesses)
        )
        if (cp.size, cp.root) != last:
            if out is None:
                click.echo(cp.text, nl=False)
            else:
                target = _write_note(out, cp)
                click.echo(f"checkpoint {cp.size} of {cp.origin} written to {target}", err=True)
            last = (cp.size, cp.root)
        if every is None:
            return
        try:
            time.sleep(every)
        except KeyboardInterrupt:
            return


# --- verify --------------------------------------------------------------------------


def _checkpoint_files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(p.glob(CHECKPOINT_GLOB))
            if not found:  # the copies kept outside are the point: none is not "verified"
                raise click.BadParameter(
                    f"the folder {p} holds no {CHECKPOINT_GLOB} file", param_hint="'--checkpoint'"
                )
            files.extend(found)
        else:
            files.append(p)
    return files


def _read_notes(files: Sequence[Path]) -> list[str]:
    notes: list[str] = []
    for f in files:
        try:
            notes.append(f.read_bytes().decode("utf-8"))
        except UnicodeDecodeError:
            notes.append("\x00not UTF-8\n")  # reported as a bad checkpoint
    return notes


_MARK = {"error": "[bold red]✗[/]", "warning": "[yellow]![/]", "info": "[cyan]i[/]"}


def _show(result: VerifyResult) -> None:
    console = stdout()
    from rich.markup import escape

    for f in result.findings:
        console.print(
            f"{_MARK[f.severity]} {f.kind}: {escape(one_line(f.message))}", soft_wrap=True
        )
    if result.ok:
        console.print(f"[green]{escape(result.summary())}[/]", soft_wrap=True)
    else:
        console.print(f"[bold red]{escape(result.summary())}[/]", soft_wrap=True)


def _verify_source(
    source: LeafSource,
    verifiers: list[Verifier] | None,
    files: list[Path],
    origin: str | None = None,
) -> VerifyResult:
    from ledger.report.verification import verify_all, verify_lines
    from ledger.sinks.sql import SQLReader

    notes = _read_notes(files)
    total = source.count_rows()
    labels = [f"checkpoint file {f}" for f in files]
    with progress("verifying", total=total) as update:
        if isinstance(source, SQLReader):  # the rows' own checks too, in the same pass
            return verify_all(
                source, verifiers, notes, labels=labels, progress=update, origin=origin
            )
        if isinstance(source, JSONLLeaves):  # each line read as the readers read it too
            return verify_lines(
                source, verifiers, notes, labels=labels, progress=update, origin=origin
            )
        return verify_ledger(
            source, verifiers, notes, labels=labels, progress=update, origin=origin
        )


@click.command(short_help="Recompute the tree and check it against the checkpoints.")
@db_option
@click.option(
    "--vkey",
    "vkeys",
    multiple=True,
    metavar="VKEY",
    help="A trusted verifier key (text or file); repeatable. Without one, the checkpoints "
    "are matched by their roots only, their signatures not checked.",
)
@click.option(
    "--checkpoint",
    "checkpoints",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="A checkpoint file, or a folder of checkpoint-*.txt; repeatable.",
)
@click.option("--origin", help="The expected log name (default: the one the ledger stores).")
@json_option
def verify(
    db: str,
    vkeys: tuple[str, ...],
    checkpoints: tuple[Path, ...],
    origin: str | None,
    as_json: bool,
) -> None:
    """Recompute every leaf from the stored bytes, rebuild the tree and check it against
    every checkpoint given or stored (signature, size, root) and the checkpoints against
    each other. Exit 0 when everything verifies, 1 when something is found, 2 on a usage
    error. Without --vkey the tree and the stored head are checked all the same, and
    the checkpoints by their roots: who signed them is not, and the output says so."""
    verifiers = [_verifier(v) for v in vkeys] if vkeys else None
    files = _checkpoint_files(checkpoints)
    if _scheme(db) == "jsonl":
        result = _verify_source(JSONLLeaves(_jsonl_path(db)), verifiers, files, origin)
    else:
        with _sql_sink(db, write=False) as sink:
            result = _verify_source(sink, verifiers, files, origin)
            result = with_retention_tables(sink, result)
    if as_json:
        emit_json(result.to_dict())
    else:
        if verifiers is None and result.checkpoints_verified:
            click.echo(
                "ledger: warning: no --vkey given, so no checkpoint's signature was checked "
                "(anyone who can write the database can sign one); give the log's verifier "
                "key, e.g. --vkey log.vkey",
                err=True,
            )
        _show(result)
    if not result.ok:
        raise SystemExit(EXIT_FOUND)


# --- proof ---------------------------------------------------------------------------


@click.command(short_help="An inclusion proof of an event, or a consistency proof.")
@click.argument("event_id", required=False)
@db_option
@click.option(
    "--tree-size", type=click.IntRange(min=0), help="Prove against this size (default: now)."
)
@click.option(
    "--old-size",
    type=click.IntRange(min=0),
    help="Instead of an event: the consistency proof from this size.",
)
@json_option
def proof(
    event_id: str | None,
    db: str,
    tree_size: int | None,
    old_size: int | None,
    as_json: bool,
) -> None:
    """Print the RFC 9162 inclusion proof of EVENT_ID (base64 hashes, lowest first), or
    with --old-size the consistency proof from that size to --tree-size (default: now)."""
    if (event_id is None) == (old_size is None):
        raise click.UsageError("give an EVENT_ID or --old-size N (one of them)")
    with _sql_sink(db, write=False) as sink:
        if event_id is not None:
            p = sink.inclusion_proof(event_id, tree_size)
            root = sink.tree_root(p.tree_size)
            _self_check(
                lambda: verify_inclusion(p.leaf_hash, p.leaf_index, p.tree_size, p.hashes, root)
            )
            value: dict[str, Any] = {
                "event_id": event_id,
                "leaf_index": p.leaf_index,
                "tree_size": p.tree_size,
                "leaf_hash": b64encode(p.leaf_hash),
                "root": b64encode(root),
                "proof": [b64encode(h) for h in p.hashes],
            }
        else:
            assert old_size is not None  # one of EVENT_ID and --old-size, checked above
            old = old_size
            new = tree_size if tree_size is not None else sink.tree_head().size
            hashes = sink.consistency_proof(old, new)
            old_root, root = sink.tree_root(old), sink.tree_root(new)
            _self_check(lambda: verify_consistency(old, new, old_root, root, hashes))
            value = {
                "old_size": old_size,
                "tree_size": new,
                "old_root": b64encode(old_root),
                "root": b64encode(root),
                "proof": [b64encode(h) for h in hashes],
            }
    if as_json:
        emit_json(value)
        return
    for name, item in value.items():
        if name == "proof":
            click.echo("proof:")
            for h in item:
                click.echo(f"  {h}")
        else:
            click.echo(f"{name}: {item}")


def _self_check(check: Any) -> None:
    """Never print a proof that does not verify (a changed row or stored node)."""
    try:
        check()
    except IntegrityError as exc:
        raise IntegrityError(
            f"the stored log gives a proof that does not verify ({exc}): its rows or stored "
            "tree were changed outside the ledger. Run `ledger verify`"
        ) from None


# --- bundles -------------------------------------------------------------------------


@click.command(short_help="Write a run's events, proofs and checkpoint to one file.")
@click.argument("run_id")
@db_option
@click.option("-o", "--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--key",
    "key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Sign a new checkpoint when none stored covers the run.",
)
def bundle(run_id: str, db: str, out: Path, key: Path | None) -> None:
    """Write RUN_ID's stored events, each with its leaf index and inclusion proof, and
    the signed checkpoint they are proven against, to one file (verify it offline with
    `ledger verify-bundle`)."""
    from ledger.retention.evidence import bundle_erasures

    with _sql_sink(db, write=key is not None) as sink:
        rows = sink.run_leaf_rows(run_id)  # LeafRow tuples
        if not rows:  # a refusal (exit 1), as `ledger chain` of an unknown run
            raise RunNotFound(f"no events of run {run_id!r} are stored (see `ledger runs`)")
        erasures = bundle_erasures(sink, rows)  # the records of its tombstones, if any
        indexes = [r.leaf_index for r in [*rows, *(e.record for e in erasures)]]
        need = max((i for i in indexes if i is not None), default=-1) + 1
        stored = [cp for cp in sink.checkpoints() if cp.size >= need]
        if stored:
            cp = stored[-1]
        elif key is not None:
            cp = sink.checkpoint(_signer(key))
        else:
            events_need = max((r.leaf_index for r in rows if r.leaf_index is not None), default=-1)
            why = (
                f"size {need}: its events and the erasure records of its tombstones"
                if need > events_need + 1
                else f"size {need}"
            )
            raise StorageError(  # nothing to prove the run against: a refusal (exit 1)
                f"no stored checkpoint covers run {run_id!r} (it needs {why}); sign one "
                "with `ledger checkpoint` or pass --key"
            )
        made = make_bundle(run_id, rows, cp, lambda i: sink.inclusion_hashes(i, cp.size), erasures)
    data = made.to_bytes()
    if not out.parent.is_dir():
        raise click.BadParameter(f"the folder {out.parent} does not exist", param_hint="-o")
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, out)
    click.echo(
        f"bundle of run {run_id}: {len(made.events)} events"
        + (f" ({made.erased} erased, hash kept)" if made.erased else "")
        + f" proven against checkpoint {cp.size}, written to {out}",
        err=True,
    )


@click.command("verify-bundle", short_help="Check a bundle offline.")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--vkey", "vkeys", multiple=True, required=True, metavar="VKEY", help="A trusted verifier key."
)
@json_option
def verify_bundle_command(file: Path, vkeys: tuple[str, ...], as_json: bool) -> None:
    """Check FILE with no database: the checkpoint's signature, every event's inclusion
    proof, and the file byte for byte. Exit 0 verified, 1 not, 2 on a usage error."""
    verifiers = [_verifier(v) for v in vkeys]
    try:
        made = verify_bundle(file.read_bytes(), verifiers)
    except IntegrityError as exc:
        if as_json:
            emit_json({"ok": False, "error": str(exc)})
        else:
            click.echo(f"NOT verified: {exc}")
        raise SystemExit(EXIT_FOUND) from None
    if as_json:
        emit_json(
            {
                "ok": True,
                "run_id": made.run_id,
                "origin": made.origin,
                "tree_size": made.tree_size,
                "events": len(made.events),
                "erased": made.erased,
            }
        )
    else:
        gone = f" ({made.erased} erased (hash kept))" if made.erased else ""
        click.echo(
            f"verified: {len(made.events)} events{gone} of run {made.run_id} are in "
            f"{made.origin} at tree size {made.tree_size}"
        )


# --- witness -------------------------------------------------------------------------


@click.group(short_help="Run a witness that cosigns checkpoints (C2SP tlog-witness).")
def witness() -> None:
    """A witness countersigns a log's checkpoint only if it is consistent with the last
    one it cosigned for that log, so a log cannot show two histories."""


@witness.command(short_help="Serve add-checkpoint over HTTP.")
@click.option(
    "--state",
    "state",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder of the witness's durable state.",
)
@click.option(
    "--key",
    "key",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The witness key file (`ledger keygen NAME --witness`).",
)
@click.option(
    "--log",
    "logs",
    multiple=True,
    required=True,
    metavar="ORIGIN=VKEY",
    help="A log to witness; repeatable.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="0 picks a free port.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to bind.")
def serve(state: Path, key: Path, logs: tuple[str, ...], port: int, host: str) -> None:
    """Cosign checkpoints of the given logs at POST /add-checkpoint until interrupted;
    prints the URL it listens on."""
    try:
        cosigner = CosignatureSigner.from_key(key.read_text(encoding="utf-8").strip())
    except (IntegrityError, ValidationError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"{key}: {exc}", param_hint="'--key'") from None
    trusted: dict[str, list[Verifier]] = {}
    for value in logs:
        origin, vkey = _pair(value, "--log")
        trusted.setdefault(origin, []).append(_verifier(vkey, "--log"))
    try:
        server = WitnessServer(state, witness=cosigner, logs=trusted, host=host, port=port)
    except OSError as exc:
        raise StorageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    click.echo(server.url, nl=True)
    sys.stdout.flush()

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


def register(group: click.Group) -> None:
    """Add the log's commands to ``group``."""
    for command in (keygen, checkpoint, verify, proof, bundle, verify_bundle_command, witness):
        group.add_command(command)
