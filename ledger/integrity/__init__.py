"""The tamper-evident log: RFC 9162 Merkle trees, signed notes, checkpoints, cosignatures.

Every stored event is a leaf of an append-only Merkle tree (RFC 9162); a log signs its
tree head as a C2SP checkpoint (a signed note); inclusion and consistency proofs show
that an event is in the log and that the log only grew; witnesses cosign checkpoints
(C2SP tlog-cosignature) so a log cannot show different histories to different readers::

    >>> from ledger.integrity import (Checkpoint, MemoryTree, Signer, TreeHead, Verifier,
    ...                               generate_key, leaf_hash, verify_inclusion)
    >>> tree = MemoryTree.of(leaf_hash(e) for e in (b'{"a":1}', b'{"b":2}', b'{"c":3}'))
    >>> skey, vkey = generate_key("example.com/agent-log")
    >>> cp = Checkpoint.sign("example.com/agent-log", TreeHead(size=tree.size, root=tree.root()),
    ...                      Signer.from_key(skey))
    >>> head = Checkpoint.parse(cp.text, [Verifier.from_key(vkey)])
    >>> verify_inclusion(leaf_hash(b'{"b":2}'), 1, head.size, tree.inclusion_proof(1), head.root)

Verification failures raise :class:`IntegrityError`; bad arguments raise
:class:`~ledger.errors.ValidationError`. The modules: :mod:`.merkle` (hashes, proofs,
the compact range), :mod:`.note` (signed notes and keys), :mod:`.checkpoint`,
:mod:`.cosignature`, :mod:`.witness_protocol` (the witness HTTP formats and rules, pure)
and :mod:`.witness` (a standard-library HTTP witness server and client; not imported
here), :mod:`.verify` (:func:`verify_ledger`: a whole ledger against its checkpoints)
and :mod:`.bundle` (evidence bundles). The SQL sinks keep the log itself
(:mod:`ledger.sinks.tree`).
"""

from __future__ import annotations

from ledger.errors import IntegrityError
from ledger.integrity._keytext import key_id
from ledger.integrity.bundle import Bundle, make_bundle, verify_bundle
from ledger.integrity.checkpoint import (
    Checkpoint,
    CheckpointBody,
    InclusionProof,
    TreeHead,
    checkpoint_body,
    parse_checkpoint_body,
)
from ledger.integrity.cosignature import (
    Cosignature,
    CosignatureSigner,
    CosignatureVerifier,
    cosigned_message,
    generate_witness_key,
    verify_cosignature,
)
from ledger.integrity.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    Frontier,
    MemoryTree,
    Node,
    NodeHashes,
    NodeLookup,
    SubtreeHashes,
    consistency_nodes,
    consistency_path,
    consistency_proof_size,
    inclusion_nodes,
    inclusion_path,
    inclusion_proof_size,
    leaf_hash,
    node_hash,
    root_from_nodes,
    root_hash,
    root_nodes,
    subtree_from_nodes,
    verify_consistency,
    verify_inclusion,
)
from ledger.integrity.note import (
    NoteSignature,
    NoteSigner,
    NoteVerifier,
    OpenedNote,
    Signer,
    Verifier,
    add_signature_lines,
    generate_key,
    open_note,
    parse_signatures,
    sign_note,
)
from ledger.integrity.verify import (
    Finding,
    FindingKind,
    JSONLLeaves,
    LeafRow,
    LeafSource,
    VerifyResult,
    verify_ledger,
)

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "Bundle",
    "Checkpoint",
    "CheckpointBody",
    "Cosignature",
    "CosignatureSigner",
    "CosignatureVerifier",
    "Finding",
    "FindingKind",
    "Frontier",
    "InclusionProof",
    "IntegrityError",
    "JSONLLeaves",
    "LeafRow",
    "LeafSource",
    "MemoryTree",
    "Node",
    "NodeHashes",
    "NodeLookup",
    "NoteSignature",
    "NoteSigner",
    "NoteVerifier",
    "OpenedNote",
    "Signer",
    "SubtreeHashes",
    "TreeHead",
    "Verifier",
    "VerifyResult",
    "add_signature_lines",
    "checkpoint_body",
    "consistency_nodes",
    "consistency_path",
    "consistency_proof_size",
    "cosigned_message",
    "generate_key",
    "generate_witness_key",
    "inclusion_nodes",
    "inclusion_path",
    "inclusion_proof_size",
    "key_id",
    "leaf_hash",
    "make_bundle",
    "node_hash",
    "open_note",
    "parse_checkpoint_body",
    "parse_signatures",
    "root_from_nodes",
    "root_hash",
    "root_nodes",
    "sign_note",
    "subtree_from_nodes",
    "verify_bundle",
    "verify_consistency",
    "verify_cosignature",
    "verify_inclusion",
    "verify_ledger",
]
