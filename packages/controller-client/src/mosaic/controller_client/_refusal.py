"""The controller's refusals: one code table (seed README "Refusals", brief "Not contract changes").

Codes CHAT-01 already had are reused (generation, controller); the brief's bounded draft IDs (busy,
stale-incarnation, engine-pin-mismatch, session-drift, live-session-refused, foreign-host) are added as
it names them; `malformed`, `eligibility` and `preflight` are the seed build's names. `reconcile` means
"your view is stale: observe again, then decide" (the reader's sense): true where re-reading the binding
can change the answer (a new generation, a new incarnation, a closed fence that may reopen, a slot that
may free), false where the request itself must change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mosaic.safe_open import Refusal

__all__ = ["ControlRefusal"]


class ControlRefusal(Refusal):
    """Why the controller refused a command. Reaches a socket client as `error.data.refusal`."""

    CODES: ClassVar[Mapping[str, bool]] = {
        "malformed": False,  # a request that fails the envelope check (a client request id that is not an id)
        "channel": False,  # the peer's uid, gid and groups have no grant (seed README "Refusals"; sent as
        # the `closing` reason at connect, which the client library raises as this refusal)
        "capability": False,  # the peer's grant lacks the operation the method needs (`_access`)
        "grant": False,  # a hello names no active grant of this peer's (seed README "Refusals"; issue 26)
        "scope": False,  # the connection's grant does not cover this controller's conversation (its scope)
        "unsupported-capability": False,  # a CHAT-01 command this increment does not verify (approval,
        # draft, upload, queue-edit), or a hello asking for a transport not served (private-host)
        "stale-incarnation": True,  # an old controller incarnation token (H21; deviation V-1)
        "generation": True,  # the request's controller generation is stale (H1, H2)
        "controller": False,  # the connection is not the controller (S5, H15)
        "conflicting-request": False,  # a client request ID reused with other content (H13)
        "fenced": True,  # admission is closed (interrupt, force stop, uncertain, poisoned pipe), or a force
        # stop while one escalation runs (H10), or an ordinary takeover while fenced (K9)
        "busy": True,  # a prompt holds the dispatch slot, or a run is streaming (H18, N13)
        "text-policy": False,  # slash text (S1, S2)
        "draft": False,  # prompt text missing or longer than 262,144 characters
        "no-turn": True,  # interrupt with no slot and no run
        "already-controller": False,  # self-takeover (H4)
        "controller-present": False,  # recovery control while a controller is connected
        "confirmation": False,  # missing, reused, foreign, expired, cancelled or stop-changed (H17)
        "stop-proof": False,  # recovery without a verified stop
        "cursor": True,  # an observe cursor the reader refuses (message names the reader code)
        "preflight": False,  # the load check after launch did not pass; admission never opened (K8)
        "session-drift": False,  # the idle drift check found the file moved under the engine (W10)
        "target": False,  # the session's header ID changed since construction; the leaf moved (K18)
        "eligibility": False,  # launch with a used, unknown or changed eligibility record (K17); recover that
        # cannot reserve the pair
        "engine-pin-mismatch": False,  # recover or launch with other engine pins than the stopped launch's (K6,
        # W9): another binary, install tree or sealed argv
        "live-session-refused": False,  # a session file or claim root outside the fixture root, or under a
        # live location (a repository's .pi/state, ~/.pi, ~/.claude, the data root, a seat registration; G1-G3)
        "configuration": False,  # a required constructor path is missing or misplaced, or unreadable
        "no-space": False,  # the claim root's file system has no room for the claim revisions a launch
        # reserves for its stop, or for recover's reservation or record (ENOSPC, EDQUOT)
        "decision": True,  # an approval naming no open decision: unknown, disabled, superseded after a takeover
        # (H5), answered otherwise (H7), past the engine's timeout or a stop (H8), or a choice not offered (P1)
        "no-engine-uid": True,  # no uid of the engine uid range is proven free (each may still hold a cohort);
        # one frees when its claim is stopped with a proof and its processes are gone (issue 28 item 3)
    }
