"""What an encrypted payload looks like where a field's text stands (crypto-shredding,
:mod:`ledger.sinks.shred`): the one rule every reader uses to tell a payload it cannot
open from a value.

>>> is_envelope('{"encrypted":"aes-256-gcm","nonce":"AAAA","ciphertext":"BBBB"}')
True
>>> is_envelope('{"sent":"alice"}'), is_envelope(None)
(False, False)
"""

from __future__ import annotations

import orjson

__all__ = ["ENVELOPE_HEAD", "ENVELOPE_HEAD_IN_TEXT", "is_envelope"]

ENVELOPE_HEAD = '{"encrypted":"aes-256-gcm","nonce":"'
"""How the JSON text of a sealed ``args`` or ``result`` begins."""
ENVELOPE_HEAD_IN_TEXT = orjson.dumps(ENVELOPE_HEAD).decode()[1:-1]
"""The same, as a JSON string holds it (a sealed ``preview``, in an event's JSON)."""


def is_envelope(text: str | None) -> bool:
    """True when a field's JSON text is an encrypted payload's envelope."""
    return text is not None and text.startswith(ENVELOPE_HEAD)
