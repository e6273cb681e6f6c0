"""ECMAScript ``Number::toString`` for Python floats, as RFC 8785 and ``JSON.stringify`` use.

>>> from ledger._canonical_numbers import format_number
>>> [format_number(x) for x in (1.0, -0.0, 1e21, 1e-7, 1e16, 0.000001, 4.5, 5e-324)]
['1', '0', '1e+21', '1e-7', '10000000000000000', '0.000001', '4.5', '5e-324']

How it works: Python's ``repr(float)`` already yields the shortest digit string that reads
back to the same double, choosing the closest such string when several have that length
(David Gay's ``dtoa`` mode 0) — the digits ECMA-262 asks for. Only the layout differs, so
the digits and the decimal exponent are taken from ``repr`` and laid out by the rules of
ECMA-262 §6.1.6.1.20 (``Number::toString``). All 100,000 upstream ES6 number vectors
(``tests/vectors/rfc8785/es6-numbers-100k.txt.gz``) pass.
"""

from __future__ import annotations

import math

from ledger.errors import CanonicalizationError

__all__ = ["MAX_SAFE_INTEGER", "format_number"]

MAX_SAFE_INTEGER = 2**53 - 1
"""Largest integer a JSON number carries exactly in every parser (``Number.MAX_SAFE_INTEGER``)."""

_TWO_53 = 9007199254740992.0


def format_number(x: float | int) -> str:
    """Format ``x`` as ECMAScript ``Number::toString`` does (the RFC 8785 number form).

    >>> format_number(333333333.33333329), format_number(1e30), format_number(2**53)
    ('333333333.3333333', '1e+30', '9007199254740992')

    An ``int`` is first converted to the nearest double, as ``JSON.parse`` would do.
    NaN and the infinities have no JSON form and raise
    :class:`~ledger.errors.CanonicalizationError`; so do ``bool`` and other types.
    """
    if type(x) is not float:
        if isinstance(x, bool) or not isinstance(x, int | float):
            raise CanonicalizationError(
                f"format_number takes an int or float, not {type(x).__name__}"
            )
        x = float(x)
    if not math.isfinite(x):
        raise CanonicalizationError(
            f"{x!r} is not a JSON number; replace it with null or a string before encoding"
        )
    if x == 0.0:
        return "0"  # covers -0.0 too
    if x < 0.0:
        return "-" + format_number(-x)
    if x < _TWO_53 and x.is_integer():
        # Every integer below 2**53 is exact and needs all its digits to round-trip.
        return str(int(x))
    text = repr(x)
    mantissa, _, exp_text = text.partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    all_digits = int_part + frac_part
    digits = all_digits.lstrip("0")
    # n: position of the decimal point relative to the first significant digit, so that
    # x == 0.<digits> * 10**n (ECMA-262's n; its k is len(digits)).
    n = len(int_part) + (int(exp_text) if exp_text else 0) - (len(all_digits) - len(digits))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = n - 1
    exponent = ("e+" if e >= 0 else "e-") + str(abs(e))
    if k == 1:
        return digits + exponent
    return digits[0] + "." + digits[1:] + exponent
