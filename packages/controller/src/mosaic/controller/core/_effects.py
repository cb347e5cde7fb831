"""The effects the controller core asks for: `Effect(effect_id, kind, payload)` out, `EffectDone(effect_id,
kind, result)` back (`_io`). One row per kind: what asks for it, what its payload holds, what its result
must hold, and who carries it out. The core asks for no other kind (`CoreState.ask` asserts it), and a
shell may check a kind against this table before it runs one.

A result the core cannot read is never taken for success: a force stop without `state: "stopped"` ends
uncertain, a census without an int `members` counts nobody, a read without `ok: True` fails the drift
check, a claim publication with `ok: False` makes the binding uncertain.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

CENSUS = "census"
READ_SESSION = "read-session"
FORCE_STOP = "force-stop"
RECOVER = "recover"
CLAIM_GENERATION = "claim-generation"
CLAIM_UNCERTAIN = "claim-uncertain"


@dataclass(frozen=True)
class EffectKind:
    """One effect kind: who asks for it and why, its payload, its result, who runs it."""

    kind: str
    asked_by: str
    payload: str
    result: str
    runs_in: str


EFFECTS: Mapping[str, EffectKind] = MappingProxyType({row.kind: row for row in (
    EffectKind(CENSUS, "issue-confirmation for force-stop when CoreConfig.census: the summary's "
               "member count", '{"unit": str | None}',
               '{"members": int | None, "complete": bool, "detail": str} (cgroup-cohort Census.to_dict)',
               "the lifecycle (`Controller._census`), outside the claim lock"),
    EffectKind(READ_SESSION, "the drift check (`_core_drift`, rule 8): the session file after get_entries",
               '{"check": str, "from": int (the byte offset the incremental check reads from)}',
               '{"ok": True, "file": SessionBytes | None (no file)} or {"ok": False, "error": str}',
               "the runtime (`ControllerRuntime._read_session`), off the loop"),
    EffectKind(FORCE_STOP, "force-stop with a consumed confirmation (`_core_force`, H17): its effect id "
               "is the stop's id", '{"stop", "confirmation", "execution", "conversation", "openTools"}',
               '{"state": "stopped", "proof": cohortProof, "proofDigest", "members", "published"} or '
               '{"state": "uncertain", "reason": str, "detail": str}',
               "the lifecycle (`Controller._run_stop`); without one `no_cohort_effects`: uncertain, "
               "no-cohort"),
    EffectKind(RECOVER, "recover after a verified stop (`_core_force`): the reply waits for it",
               '{"confirmation", "stop": str | None, "incarnation"}',
               'the reply\'s result ({"eligibility", "digest"}) or {"refusal": CHAT-01 refusal}',
               "the lifecycle (`Controller._recover`); without one a stop-proof refusal"),
    EffectKind(CLAIM_GENERATION, "a takeover or recovery control (H1): the claim's generation",
               '{"generation": int}',
               '{"ok": True} ({"ok": True, "published": False}: the claim is already stopped with its proof, its '
               'last step) or {"ok": False, "error": str} (uncertain: claim-publication)',
               "the lifecycle; without one a no-op"),
    EffectKind(CLAIM_UNCERTAIN, "the binding going uncertain (`CoreState.uncertain`): the claim says so",
               '{"reason": str, "detail": str}',
               '{"ok": True} or {"ok": False, "error": str} (uncertain: claim-publication)',
               "the lifecycle; without one a no-op"),
)})
