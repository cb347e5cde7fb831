"""The effects the controller core asks for, one row each: `Effect(effect_id, kind, payload)` out,
`EffectDone(effect_id, kind, result)` back (`_io`). A row says what asks for the effect, what its payload
and result hold, the core's handler of its result (`done`), and what runs it: the method of `EffectPorts`
(`port`) on the runtime's own ports or on the ports the shell was given (`runs_in`), whether the
lifecycle runs it under the claim lock, one at a time (`claim_lock`), what it answers with no lifecycle
attached (`unattached`), and what its result is when its runner raised (`failed`). Every place that
dispatches an effect reads this table: the core's `receive` (its `done`), the runtime (its `port`, the
failure), `no_cohort_effects` (`unattached`) and the lifecycle's ports (`claim_lock`); adding a kind is one
row and one `EffectPorts` method. The rules it keeps:

1. The core asks for no other kind (`CoreState.ask` asserts it); a result of a kind no row names is
   evidence (`unknown-effect`) and changes nothing.
2. A result the core cannot read is never taken for success: a force stop without `state: "stopped"` ends
   uncertain, a census without an int `members` counts nobody, a read without `ok: True` fails the drift
   check, a claim publication with `ok: False` makes the binding uncertain, a recover without its
   eligibility is refused.
3. Checked at import (`_check_effects`): the rows are exactly `EffectName`'s kinds; each row's `done` is
   callable and its `port` a method of `EffectPorts`, and every method of `EffectPorts` is some row's port.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, Protocol, get_args

from mosaic.controller_client import ControlRefusal

from . import _drift, _force
from ._io import (
    CENSUS,
    CLAIM_GENERATION,
    CLAIM_UNCERTAIN,
    FORCE_STOP,
    READ_SESSION,
    RECOVER,
    Effect,
    EffectDone,
    EffectName,
)
from ._state import CoreState

__all__ = ["EFFECTS", "EffectKind", "EffectPorts", "effect_failed"]


class EffectPorts(Protocol):
    """What runs the core's effects: one method per row's `port`, each given the `Effect` and returning its
    result (fed back to the core as `EffectDone`). The runtime runs `read_session` itself; the lifecycle's
    ports (or a handler, `ports_from_handler`) run the rest."""

    async def census(self, effect: Effect) -> Mapping[str, Any]: ...
    async def read_session(self, effect: Effect) -> Mapping[str, Any]: ...
    async def force_stop(self, effect: Effect) -> Mapping[str, Any]: ...
    async def recover(self, effect: Effect) -> Mapping[str, Any]: ...
    async def publish_generation(self, effect: Effect) -> Mapping[str, Any]: ...
    async def mark_uncertain(self, effect: Effect) -> Mapping[str, Any]: ...


def effect_failed(exc: BaseException) -> Mapping[str, Any]:
    """An effect whose runner raised: failed, never success (rule 2). Every row's reader finds its word in
    it: `ok` False (a publication, a read), `state` uncertain with a reason and a detail (a force stop)."""
    return {"ok": False, "state": "uncertain", "reason": "effect-failed", "error": repr(exc),
            "detail": f"{type(exc).__name__}: {exc}"}


def _recover_failed(exc: BaseException) -> Mapping[str, Any]:
    """A recover whose runner raised: refused `eligibility` (no record was issued), its reply never a result."""
    return {**effect_failed(exc), "refusal": ControlRefusal(
        "eligibility", f"the recover could not be carried out ({type(exc).__name__}: {exc}); no eligibility "
                       "record was issued").to_dict()}


@dataclass(frozen=True)
class EffectKind:
    """One effect kind: who asks for it and why, its payload, its result (words, the README's table); the
    core's handler of its result; the port that runs it and where; what it answers unattached and failed."""

    kind: EffectName
    asked_by: str
    payload: str
    result: str
    runs_in: Literal["runtime", "lifecycle"]
    done: Callable[[CoreState, EffectDone], None]
    port: str
    claim_lock: bool
    unattached: Mapping[str, Any]
    failed: Callable[[BaseException], Mapping[str, Any]] = effect_failed


EFFECTS: Mapping[str, EffectKind] = MappingProxyType({row.kind: row for row in (
    EffectKind(CENSUS, "issue-confirmation for force-stop when CoreConfig.census: the summary's "
               "member count", '{"unit": str | None}',
               '{"members": int | None, "complete": bool, "detail": str} (cgroup-cohort Census.to_dict)',
               "lifecycle", _force.census_done, "census", False,
               # unattached: the summary's members is null (no cohort is counted)
               {"ok": True}),
    EffectKind(READ_SESSION, "the drift check (`core/_drift`, the core's rule 8): the session file after get_entries",
               '{"check": str, "from": int (the byte offset the incremental check reads from)}',
               '{"ok": True, "file": SessionBytes | None (no file)} or {"ok": False, "error": str}',
               "runtime", _drift.read_done, "read_session", False,
               {"ok": False, "error": "the runtime reads the session file, never a handler"}),
    EffectKind(FORCE_STOP, "force-stop with a consumed confirmation (`_force`, H17): its effect id is the stop's "
               "id", '{"stop", "confirmation", "execution", "conversation", "openTools"}',
               '{"state": "stopped", "proof": cohortProof, "proofDigest", "members", "published"} or '
               '{"state": "uncertain", "reason": str, "detail": str}',
               "lifecycle", _force.force_stop_done, "force_stop", True,
               {"state": "uncertain", "reason": "no-cohort", "detail": "no cohort is attached to this controller"}),
    EffectKind(RECOVER, "recover after a verified stop (`_force`): the reply waits for it",
               '{"confirmation", "stop": str | None, "incarnation"}',
               'the reply\'s result ({"eligibility", "digest"}) or {"refusal": CHAT-01 refusal}',
               "lifecycle", _force.recover_done, "recover", True,
               {"refusal": {"code": "stop-proof", "reconcile": False,
                            "message": "no lifecycle is attached to this controller: nothing to recover"}},
               _recover_failed),
    EffectKind(CLAIM_GENERATION, "a takeover or recovery control (H1): the claim's generation",
               '{"generation": int}',
               '{"ok": True} ({"ok": True, "published": False}: the claim is already stopped with its proof, its '
               'last step) or {"ok": False, "error": str} (uncertain: claim-publication)',
               "lifecycle", _force.claim_published, "publish_generation", True, {"ok": True}),
    EffectKind(CLAIM_UNCERTAIN, "the binding going uncertain (`CoreState.uncertain`): the claim says so",
               '{"reason": str, "detail": str}',
               '{"ok": True} or {"ok": False, "error": str} (uncertain: claim-publication)',
               "lifecycle", _force.claim_published, "mark_uncertain", True, {"ok": True}),
)})


def _check_effects(table: Mapping[str, EffectKind]) -> None:
    """Rule 3: refuse a table that misses a kind or names one that does not exist, a row with no handler, or
    a port `EffectPorts` does not have (or a method of it no row uses): programming errors."""
    kinds = set(get_args(EffectName))
    if set(table) != kinds:
        raise TypeError(f"EFFECTS rows {sorted(table)} are not the effect names {sorted(kinds)}")
    ports = {name for name in vars(EffectPorts) if not name.startswith("_")}
    for kind, row in table.items():
        if row.kind != kind or not callable(row.done) or not callable(row.failed):
            raise TypeError(f"EFFECTS row {kind!r} has no handler of its result")
        if row.port not in ports:
            raise TypeError(f"EFFECTS row {kind!r} names port {row.port!r}, which EffectPorts does not have")
    unused = ports - {row.port for row in table.values()}
    if unused:
        raise TypeError(f"EffectPorts methods no row runs: {sorted(unused)}")


_check_effects(EFFECTS)
