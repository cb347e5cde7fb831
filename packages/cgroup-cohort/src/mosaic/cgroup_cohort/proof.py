"""Proofs: the cohortProof a stop builds, the boot proof a claim from an earlier boot gets, and their check.

``build_cohort_proof`` (from a ``stopped`` outcome), ``build_boot_proof`` (from a reference or an
unlaunched cohort, with ``boot_time()``), ``FixtureVerifier`` (the trusted digest registry, of kind
``VERIFIER_KIND``) and the proofs' JSON Schema (``PROOF_SCHEMA``, ``proof_json_schema``). README "The proof".
"""

from ._proc import boot_time
from ._proof import (
    PROOF_SCHEMA,
    VERIFIER_KIND,
    FixtureVerifier,
    build_boot_proof,
    build_cohort_proof,
    proof_json_schema,
)

__all__ = [
    "PROOF_SCHEMA",
    "VERIFIER_KIND",
    "FixtureVerifier",
    "boot_time",
    "build_boot_proof",
    "build_cohort_proof",
    "proof_json_schema",
]


def __dir__() -> list[str]:
    return sorted(__all__)
