"""Ledger URLs: the one parser every command and ``open_*`` function goes through.

>>> parse_url("sqlite:///ledger.db").path.name
'ledger.db'
>>> u = parse_url("postgresql://ledger:secret@db/prod?ledger_schema=agents")
>>> u.scheme, u.schema, u.shown
('postgresql', 'agents', 'postgresql://ledger:***@db/prod?ledger_schema=agents')
>>> parse_url("JSONL:///runs/today.jsonl?fsync=1").fsync
True

The forms (schemes are case-insensitive, RFC 3986):

* ``sqlite:///relative.db`` or ``sqlite:////absolute/ledger.db`` (SQLAlchemy's convention;
  ``sqlite+pysqlite://`` is the same); no query parameters, no ``:memory:``.
* ``postgresql://USER@HOST:PORT/DB`` (also ``postgres://`` and ``postgresql+psycopg://``);
  ``?ledger_schema=NAME`` picks the schema, every other parameter goes to psycopg.
* ``jsonl:///relative.jsonl`` or ``jsonl:////absolute.jsonl``; ``?fsync=1`` asks for an
  fsync per line.
* ``discard:`` (a sink that keeps nothing).
* A bare file path (``ledger.db``, ``/var/lib/agent/ledger.db``, ``./runs.jsonl``): a
  SQLite file, or a JSONL file when its name ends in ``.jsonl``; a bare word with no
  folder and no such suffix is refused (a typo must not become a new database).

>>> parse_url("runs/today.jsonl").scheme, parse_url("ledger.db").url
('jsonl', 'sqlite:///ledger.db')

Opening is in :mod:`ledger.sinks.opening`; this module only parses, so every layer that
needs to understand a URL can import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ledger.errors import ValidationError

__all__ = ["LedgerURL", "Scheme", "parse_url", "shown_url"]

Scheme = Literal["sqlite", "postgresql", "jsonl", "discard"]

_ALIASES: dict[str, Scheme] = {
    "sqlite": "sqlite",
    "sqlite+pysqlite": "sqlite",
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "postgresql+psycopg": "postgresql",
    "jsonl": "jsonl",
    "discard": "discard",
}
_FORMS = "sqlite:///FILE, postgresql://USER@HOST:PORT/DB, jsonl:///FILE or discard:"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerURL:
    """A parsed ledger URL.

    ``path`` is the file of a ``sqlite`` or ``jsonl`` URL (relative paths stay relative);
    ``dsn`` is the server URL of a ``postgresql`` one, as SQLAlchemy's psycopg 3 dialect
    takes it (``postgresql+psycopg://...``, without ``ledger_schema``); ``schema`` is its
    ``ledger_schema``; ``fsync`` is a ``jsonl`` URL's flag.
    """

    url: str
    scheme: Scheme
    path: Path | None = None
    dsn: str | None = None
    schema: str | None = None
    fsync: bool = False

    @property
    def shown(self) -> str:
        """The URL with any password replaced by ``***``, for messages and reports."""
        return shown_url(self.url)

    @property
    def is_file(self) -> bool:
        """True for the file-backed schemes (``sqlite``, ``jsonl``)."""
        return self.path is not None


def parse_url(url: object) -> LedgerURL:
    """Parse ``url``; ``ValidationError`` saying which forms work when it is unusable."""
    if not isinstance(url, str):
        raise ValidationError(f"ledger URL: expected a string, got {type(url).__name__}")
    if "\x00" in url:
        raise ValidationError("ledger URL: it holds a NUL character; no file or server has one")
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(
            f"ledger URL {url[:80]!r}: not valid Unicode text (a lone surrogate: bytes that are "
            "not UTF-8?)"
        ) from None
    if _is_path(url):
        path = Path(url).expanduser()
        kind: Scheme = "jsonl" if path.suffix.lower() == ".jsonl" else "sqlite"
        return LedgerURL(url=f"{kind}:///{path}", scheme=kind, path=path)
    head, colon, _ = url.partition(":")
    scheme = _ALIASES.get(head.lower()) if colon else None
    if scheme is None:
        if colon and head.lower().startswith(("postgres", "sqlite")):
            raise ValidationError(
                f"ledger URL {shown_url(url)!r}: driver {head!r} is not supported; use "
                f"{head.split('+', 1)[0].lower()}:// (psycopg 3 and the standard sqlite3 module)"
            )
        raise ValidationError(f"unsupported ledger URL {shown_url(url)!r}: use {_FORMS}")
    url = head.lower() + url[len(head) :]
    rest = url[len(head) + 1 :]
    if scheme == "discard":
        return LedgerURL(url=url, scheme="discard")
    if scheme == "postgresql":
        return _postgres(url, rest)
    return _file(url, scheme, rest)


_FILE_SUFFIXES = (".db", ".sqlite", ".sqlite3", ".jsonl")


def _is_path(text: str) -> bool:
    """A bare file path rather than a URL: it has a folder part (``/``, ``./``, ``~``) or
    the name of a ledger file (``.db``, ``.sqlite``, ``.sqlite3``, ``.jsonl``), and no
    scheme before a ``:``. A bare word (``nonsense``) is neither, so a typo is refused
    rather than made a new database."""
    if not text.strip():
        return False
    head, colon, _ = text.partition(":")
    if colon and "/" not in head and "." not in head:
        return False  # a scheme, known or not
    return "/" in text or text.startswith("~") or text.lower().endswith(_FILE_SUFFIXES)


def _file(url: str, scheme: Scheme, rest: str) -> LedgerURL:
    if not rest.startswith("///") or rest in ("///", "////"):
        raise ValidationError(
            f"ledger URL {url!r} names no file: write {scheme}:///relative.{_ext(scheme)} or "
            f"{scheme}:////absolute/path.{_ext(scheme)}"
        )
    path, _, query = rest[3:].partition("?")
    if path == ":memory:":
        raise ValidationError(
            f"ledger URL {url!r}: an in-memory database is neither durable nor shared; give a file"
        )
    fsync = False
    params = dict(parse_qsl(query, keep_blank_values=True))
    if scheme == "sqlite" and query:
        raise ValidationError(
            f"ledger URL {url!r}: a sqlite URL takes no query parameters; write "
            "sqlite:///relative.db or sqlite:////absolute/ledger.db"
        )
    if scheme == "jsonl":
        unknown = sorted(set(params) - {"fsync"})
        if unknown:
            raise ValidationError(
                f"ledger URL {url!r}: unknown parameter {unknown[0]!r} (only fsync)"
            )
        flag = params.get("fsync", "0").lower()
        if flag not in _TRUE | _FALSE:
            raise ValidationError(f"ledger URL {url!r}: fsync={flag!r}; use fsync=1 or fsync=0")
        fsync = flag in _TRUE
    return LedgerURL(url=url, scheme=scheme, path=Path(path), fsync=fsync)


def _ext(scheme: Scheme) -> str:
    return "db" if scheme == "sqlite" else "jsonl"


def _postgres(url: str, rest: str) -> LedgerURL:
    if not rest.startswith("//"):
        raise ValidationError(
            f"ledger URL {shown_url(url)!r}: write postgresql://USER@HOST:PORT/DB "
            "(postgresql:///DB for the local socket)"
        )
    base, _, query = rest.partition("?")
    pairs = parse_qsl(query, keep_blank_values=True)
    schemas = [v for k, v in pairs if k == "ledger_schema"]
    if len(schemas) > 1:
        raise ValidationError(f"ledger URL {shown_url(url)!r}: ledger_schema is given twice")
    if schemas and not schemas[0]:
        raise ValidationError(
            f"ledger URL {shown_url(url)!r}: ledger_schema is empty; name a schema or drop it"
        )
    others = urlencode([(k, v) for k, v in pairs if k != "ledger_schema"])
    dsn = "postgresql+psycopg:" + base + (f"?{others}" if others else "")
    return LedgerURL(url=url, scheme="postgresql", dsn=dsn, schema=schemas[0] if schemas else None)


def shown_url(url: str) -> str:
    """``url`` with any password replaced by ``***``, for messages: the one in its user
    part, and a ``password`` query parameter (libpq takes one there too).

    >>> shown_url("postgresql://u:pw@h/db?password=pw2&ledger_schema=s")
    'postgresql://u:***@h/db?password=***&ledger_schema=s'
    """
    try:
        parts = urlsplit(url)
        if parts.password is not None:
            netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
            url = urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return "<unparsable URL>"
    return _QUERY_PASSWORD.sub(r"\1***", url)


_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)
