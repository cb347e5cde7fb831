"""What ``--resume`` continues, and the evidence a load check (K8 for Claude) reads from the transcript.

**The leaf rule** (docs/claude-2.1.283.md "Which leaf --resume continues", proven on the binary by the
committed trees): the ``leafUuid`` of the last ``last-prompt`` line; without one, the last entry with a
``uuid`` in file order. Timestamps play no part.

**What a resume appends** (the ``sealed-resume`` and ``sealed-resume-after-interrupt`` recordings): the
claimed session's own file grows (nothing before it changes); the first prompt's ``user`` entry carries the
uuid the link stamped on it and hangs on the rule's leaf, either directly or, when the session's last turn
was interrupted (its leaf is a ``user`` entry such as ``[Request interrupted by user for tool use]``),
through one ``assistant`` entry the binary makes itself (``message.model`` ``<synthetic>``, text ``No
response requested.``) to close that turn. :func:`check_resumed` checks exactly that; the init messages'
``session_id`` is the other half of the check (the link reports a ``SessionMismatch``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["SYNTHETIC_MODEL", "ResumeCheck", "check_resumed", "leaf_by_rule"]

SYNTHETIC_MODEL = "<synthetic>"


def leaf_by_rule(lines: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """``(rule, uuid)``: ``("last-prompt", leafUuid of the last last-prompt line)``, else
    ``("last-uuid-entry", uuid of the last line that has one)``. Timestamps play no part. Raises
    ``ValueError`` when no line has a uuid (nothing to continue)."""
    prompts = [d for d in lines if d.get("type") == "last-prompt" and isinstance(d.get("leafUuid"), str)]
    if prompts:
        return "last-prompt", str(prompts[-1]["leafUuid"])
    with_uuid = [d for d in lines if isinstance(d.get("uuid"), str)]
    if not with_uuid:
        raise ValueError("no entry has a uuid")
    return "last-uuid-entry", str(with_uuid[-1]["uuid"])


@dataclass(frozen=True)
class ResumeCheck:
    """The verdict of :func:`check_resumed`: ``ok``, or ``reason`` for a person; ``leaf`` the rule's leaf of
    the file before the launch; ``synthetic`` the uuids of the entries the binary put between them."""

    ok: bool
    reason: str
    leaf: str | None
    synthetic: tuple[str, ...] = ()


def _is_synthetic(entry: Mapping[str, Any]) -> bool:
    message = entry.get("message")
    return entry.get("type") == "assistant" and isinstance(message, Mapping) and message.get("model") == SYNTHETIC_MODEL


def check_resumed(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]], *, session_id: str,
                  message_uuid: str) -> ResumeCheck:
    """Did the engine resume ``session_id`` at its leaf? ``before`` is the transcript's lines read before the
    launch, ``after`` the lines once the first prompt (stamped ``message_uuid``) has been written. Never
    raises for what the files hold."""
    try:
        _rule, leaf = leaf_by_rule(before)
    except ValueError:
        return ResumeCheck(False, "the transcript before the launch has no entry to continue", None)
    if list(after[: len(before)]) != list(before):
        return ResumeCheck(False, "the lines before the launch changed: not an append to the claimed session", leaf)
    added = {str(e.get("uuid")): e for e in after[len(before):] if isinstance(e.get("uuid"), str)}
    entry = added.get(message_uuid)
    if entry is None or entry.get("type") != "user":
        return ResumeCheck(False, f"no user entry {message_uuid} was appended", leaf)
    if entry.get("sessionId") != session_id:
        return ResumeCheck(False, f"the entry names session {entry.get('sessionId')!r}, not {session_id}", leaf)
    synthetic: list[str] = []
    parent = entry.get("parentUuid")
    while isinstance(parent, str) and parent != leaf:
        between = added.get(parent)
        if between is None or not _is_synthetic(between):
            return ResumeCheck(False, f"the prompt hangs on {parent}, not on the leaf {leaf}", leaf, tuple(synthetic))
        synthetic.append(parent)
        parent = between.get("parentUuid")
    if parent != leaf:
        return ResumeCheck(False, f"the prompt's chain does not reach the leaf {leaf}", leaf, tuple(synthetic))
    return ResumeCheck(True, "resumed at the leaf", leaf, tuple(synthetic))
