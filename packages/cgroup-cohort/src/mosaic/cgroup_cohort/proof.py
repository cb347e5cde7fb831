"""Proofs: the cohortProof a stop builds, the boot proof a claim from an earlier boot gets, and their check.

``build_cohort_proof`` (from a ``stopped`` outcome), ``build_boot_proof`` (from a reference or an
unlaunched cohort, with ``boot_time()``), ``classify_host`` (same boot, earlier boot or foreign host),
``proof_digest`` (the ``sha256:<64 hex>`` a claim stores), ``FixtureVerifier`` (the trusted digest
registry) and the proofs' JSON Schema (``PROOF_SCHEMA``, ``proof_json_schema``). README "The proof".
"""

from ._proc import boot_time
from ._proof import (
    PROOF_SCHEMA,
    VERIFIER_KIND,
    FixtureVerifier,
    HostRelation,
    build_boot_proof,
    build_cohort_proof,
    classify_host,
    proof_digest,
    proof_json_schema,
)

__all__ = [
    "PROOF_SCHEMA",
    "VERIFIER_KIND",
    "FixtureVerifier",
    "HostRelation",
    "boot_time",
    "build_boot_proof",
    "build_cohort_proof",
    "classify_host",
    "proof_digest",
    "proof_json_schema",
]


def __dir__() -> list[str]:
    return sorted(__all__)
