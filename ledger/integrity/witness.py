"""A small C2SP ``tlog-witness`` HTTP server and client, on the standard library only.

The server answers ``POST <prefix>/add-checkpoint`` by the rules of
:func:`.decide_add_checkpoint`, and keeps the latest cosigned checkpoint of each log in
one JSON file in its folder, replaced atomically (write a temporary file, fsync, rename,
fsync the folder) before any cosignature is sent. It listens on 127.0.0.1 unless told
otherwise::

    server = WitnessServer(Path("witness-state"), witness=CosignatureSigner.from_key(wkey),
                           logs={"example.com/log": [Verifier.from_key(vkey)]})
    server.start()                      # a background thread; server.url is its address
    lines = request_cosignatures(server.url, checkpoint.text, proof_from=tree_proof)
    server.close()

:func:`request_cosignatures` is the log's side: it sends the checkpoint with a
consistency proof from the size the witness last cosigned, learning that size from a
409 answer when its guess was wrong, and returns the cosignature lines (verify them with
:func:`.verify_cosignature` or :meth:`.Checkpoint.parse` before trusting them).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

from ledger.errors import IntegrityError, StorageError, ValidationError
from ledger.fsync import fsync_path
from ledger.integrity._keytext import b64decode, b64encode
from ledger.integrity.checkpoint import Checkpoint, TreeHead, parse_checkpoint_body
from ledger.integrity.cosignature import CosignatureSigner
from ledger.integrity.note import NoteVerifier, parse_signatures
from ledger.integrity.witness_protocol import (
    CONTENT_TYPE_SIZE,
    CONTENT_TYPE_TEXT,
    WitnessDecision,
    decide_add_checkpoint,
    format_add_checkpoint,
    parse_cosignatures,
    parse_size,
)

__all__ = [
    "MAX_REQUEST_BYTES",
    "WitnessReply",
    "WitnessServer",
    "WitnessState",
    "request_cosignatures",
    "submit_checkpoint",
]

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES: Final = 1 << 20
"""Larger request bodies are refused (413)."""

STATE_FILE: Final = "witness-state.json"
_STATE_VERSION: Final = 1


class WitnessState:
    """The latest cosigned checkpoint of each log, durable in ``folder``.

    Not safe for two processes at once; :class:`WitnessServer` serializes its own
    threads around it.
    """

    __slots__ = ("_folder", "_logs")

    def __init__(self, folder: Path) -> None:
        self._folder = Path(folder)
        self._folder.mkdir(parents=True, exist_ok=True)
        self._logs: dict[str, dict[str, Any]] = self._load()

    @property
    def path(self) -> Path:
        """The state file."""
        return self._folder / STATE_FILE

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(raw)
            if data.get("version") != _STATE_VERSION:
                raise ValueError(f"unknown version {data.get('version')!r}")
            logs: dict[str, dict[str, Any]] = data["logs"]
            for origin, entry in logs.items():
                TreeHead(size=entry["size"], root=b64decode(entry["root"]))
                if not isinstance(origin, str) or not isinstance(entry["checkpoint"], str):
                    raise ValueError("bad entry")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StorageError(
                f"witness state {self.path} is unreadable ({exc}); restore it from a backup"
                " -- starting empty would let a log roll back"
            ) from None
        return logs

    def heads(self) -> dict[str, TreeHead]:
        """The latest cosigned head of each origin."""
        return {
            origin: TreeHead(size=e["size"], root=b64decode(e["root"]))
            for origin, e in self._logs.items()
        }

    def checkpoint(self, origin: str) -> str | None:
        """The latest cosigned checkpoint note of ``origin``, or ``None``."""
        entry = self._logs.get(origin)
        return None if entry is None else str(entry["checkpoint"])

    def record(self, checkpoint: Checkpoint) -> None:
        """Make ``checkpoint`` the latest of its origin, durably, before returning."""
        logs = dict(self._logs)
        logs[checkpoint.origin] = {
            "size": checkpoint.size,
            "root": b64encode(checkpoint.root),
            "checkpoint": checkpoint.text,
        }
        data = json.dumps({"version": _STATE_VERSION, "logs": logs}, sort_keys=True).encode()
        fd, tmp = tempfile.mkstemp(prefix=".witness-state.", dir=self._folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        fsync_path(self._folder, best_effort=True)
        self._logs = logs


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)

    def _send(self, status: int, body: bytes, content_type: str = CONTENT_TYPE_TEXT) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == self.server.witness.prefix + "/add-checkpoint":
            self._send(405, b"use POST\n")
        else:
            self._send(404, b"not found\n")

    def do_POST(self) -> None:
        if self.path != self.server.witness.prefix + "/add-checkpoint":
            self.close_connection = True
            self._send(404, b"not found\n")
            return
        length_text = self.headers.get("Content-Length")
        if length_text is None or not length_text.isdigit():
            self.close_connection = True
            self._send(411, b"a Content-Length is required\n")
            return
        length = int(length_text)
        if length > MAX_REQUEST_BYTES:
            self.close_connection = True
            self._send(413, b"request too large\n")
            return
        body = self.rfile.read(length)
        decision = self.server.witness.handle(body)
        self._send(decision.status, decision.body, decision.content_type)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    witness: WitnessServer


class WitnessServer:
    """A witness over HTTP: cosigns checkpoints of the ``logs`` it trusts.

    ``logs`` maps each origin to the log's verifier keys; ``witness`` is the cosigning
    key (or keys); the state lives in ``folder``. ``port=0`` picks a free port.
    """

    def __init__(
        self,
        folder: Path,
        *,
        witness: CosignatureSigner | Sequence[CosignatureSigner],
        logs: Mapping[str, Sequence[NoteVerifier]],
        host: str = "127.0.0.1",
        port: int = 0,
        prefix: str = "",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.state = WitnessState(folder)
        self._witness = [witness] if isinstance(witness, CosignatureSigner) else list(witness)
        if not self._witness:
            raise ValidationError("a witness needs at least one cosigning key")
        self._logs = {origin: list(keys) for origin, keys in logs.items()}
        self._clock = clock
        self._lock = threading.Lock()
        self.prefix = prefix.rstrip("/")
        self._http = _HTTPServer((host, port), _Handler)
        self._http.witness = self
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The submission prefix, e.g. ``http://127.0.0.1:8080``."""
        host, port = self._http.server_address[:2]
        host_text = host.decode() if isinstance(host, bytes) else host
        return f"http://{host_text}:{port}{self.prefix}"

    def handle(self, body: bytes) -> WitnessDecision:
        """Decide on one ``add-checkpoint`` body; on success the new state is durable
        before this returns (check and update happen under one lock)."""
        with self._lock:
            decision = decide_add_checkpoint(
                body,
                logs=self._logs,
                latest=self.state.heads(),
                witness=self._witness,
                now=int(self._clock()),
            )
            if decision.checkpoint is not None:
                try:
                    self.state.record(decision.checkpoint)
                except OSError:
                    log.exception("cannot persist the witness state; no cosignature sent")
                    return WitnessDecision.refuse(500, "the witness cannot persist its state")
            return decision

    def serve_forever(self) -> None:
        """Serve in this thread until :meth:`close` is called from another."""
        self._http.serve_forever()

    def start(self) -> None:
        """Serve in a background thread."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._http.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="ledger-witness",
                daemon=True,
            )
            self._thread.start()

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join()
            self._thread = None
        self._http.server_close()

    def __enter__(self) -> WitnessServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- the client ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class WitnessReply:
    """A witness's answer to ``add-checkpoint``.

    ``cosignatures`` holds the signature lines of a 200 answer (not yet verified);
    ``latest_size`` the witness's latest cosigned size of a 409 size answer.
    """

    status: int
    cosignatures: tuple[str, ...] = ()
    latest_size: int | None = None
    message: str = ""


def submit_checkpoint(
    url: str,
    old_size: int,
    proof: Sequence[bytes],
    checkpoint: str,
    *,
    timeout: float = 10.0,
) -> WitnessReply:
    """POST one ``add-checkpoint`` request to the witness at ``url`` (its submission
    prefix); return its answer. Network failures raise :class:`OSError`."""
    if not url.startswith(("http://", "https://")):
        raise ValidationError(f"a witness URL is http:// or https://, not {url!r}")
    body = format_add_checkpoint(old_size, proof, checkpoint)
    request = urllib.request.Request(
        url.rstrip("/") + "/add-checkpoint",
        data=body,
        method="POST",
        headers={"Content-Type": "text/plain; charset=utf-8"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, content_type, data = response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        status, content_type, data = exc.code, exc.headers, exc.read()
    ctype = (content_type.get("Content-Type") or "").split(";")[0].strip()
    if status == 200:
        return WitnessReply(status=200, cosignatures=parse_cosignatures(data))
    if status == 409 and ctype == CONTENT_TYPE_SIZE:
        try:
            return WitnessReply(status=409, latest_size=parse_size(data))
        except ValidationError:
            pass
    return WitnessReply(status=status, message=data.decode("utf-8", "replace").strip()[:500])


def _note_size(note: str) -> int | None:
    """The tree size of a checkpoint note, or None when it does not parse."""
    try:
        body, _ = parse_signatures(note)
        return parse_checkpoint_body(body).size
    except IntegrityError:
        return None


def request_cosignatures(
    url: str,
    checkpoint: str,
    *,
    proof_from: Callable[[int], Sequence[bytes]],
    old_size: int = 0,
    timeout: float = 10.0,
) -> tuple[str, ...]:
    """Get a witness's cosignature lines for a signed checkpoint note.

    ``proof_from(size)`` returns the consistency proof from ``size`` to the
    checkpoint's size (empty for 0). ``old_size`` is the size the witness is believed
    to have cosigned last; when wrong, the witness's 409 answer gives the right one and
    the request is sent once more. Raises :class:`IntegrityError` when the witness
    refuses (its status and reason in the message).
    """
    reply = submit_checkpoint(url, old_size, proof_from(old_size), checkpoint, timeout=timeout)
    if reply.status == 409 and reply.latest_size is not None:
        size = reply.latest_size
        ours = _note_size(checkpoint)
        if ours is not None and size > ours:
            raise IntegrityError(
                f"witness {url} refused the checkpoint: it cosigned size {size} of this log "
                f"before, and this checkpoint has size {ours} (a rollback: the ledger was "
                "truncated or restored from an old backup). Run `ledger verify`"
            )
        try:
            proof = proof_from(size)
        except (IntegrityError, ValidationError) as exc:
            raise IntegrityError(
                f"witness {url} cosigned size {size} before, and no consistency proof from "
                f"it to this checkpoint can be made ({exc})"
            ) from None
        reply = submit_checkpoint(url, size, proof, checkpoint, timeout=timeout)
    if reply.status != 200:
        detail = reply.message or f"latest size {reply.latest_size}"
        raise IntegrityError(f"witness {url} refused the checkpoint ({reply.status}): {detail}")
    return reply.cosignatures
