"""Chains: one run reassembled from its events, and the answer to *why*.

>>> from ledger.chain import assemble_chain
>>> assemble_chain([]).actions
()

:mod:`ledger.chain.parts` holds the values (:class:`Action`, :class:`Anomaly`),
:mod:`ledger.chain.explain` the :class:`Explanation`, :mod:`ledger.chain.assemble` the
pure :func:`assemble_chain`.
"""

from __future__ import annotations

from ledger.chain.assemble import Chain, assemble_chain
from ledger.chain.explain import Explanation
from ledger.chain.parts import Action, Anomaly, AnomalyCode

__all__ = ["Action", "Anomaly", "AnomalyCode", "Chain", "Explanation", "assemble_chain"]
