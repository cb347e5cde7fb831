"""mosaic.controller: one controller per execution. Admission, the dispatch slot, turns, the stop chain,
the socket protocol and the client library (issue 10); the claim-backed lifecycle (issue 11).

Today: the claim <-> cohort adapter (`ClaimCohortProbe`, `run_force_stop`, `cohort_proof_ref`) that the
lifecycle stands on, and the controller's refusal table (`ControlRefusal`).
"""

from ._cohort import ClaimCohortProbe, StopRun, cohort_proof_ref, run_force_stop
from ._refusal import ControlRefusal

__all__ = ["ClaimCohortProbe", "ControlRefusal", "StopRun", "cohort_proof_ref", "run_force_stop"]
