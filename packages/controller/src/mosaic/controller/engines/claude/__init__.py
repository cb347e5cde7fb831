"""The Claude Code engine adapter (issue 32, first slice): everything that knows Claude Code 2.1.283's
stream-json wire. The core's half of the seam: `ClaudeRules` (`CLAUDE_RULES`, `CoreConfig.engine`) over
`ClaudeWire` (claude-rpc's link core as the seam's `Wire`, `ClaudeCommand` its lines), Claude's record
reading (`read`, `INTERRUPTED_TEXT`), its overlap table (`CLAUDE_OVERLAP_SIGNALS`) and text policy
(`text_problem`). The lifecycle's half: `ClaudeSpec` (how to run Claude: the `EngineFactory` a `LaunchingController`
takes; its `engine()` is the seam's `Engine`) and what it reads of a transcript (`claude_place`, `claude_slug`,
`read_transcript`). The idle transcript drift check (`engines/claude/_drift`)
compares the entries Claude's stream named with the transcript, incrementally from the claim's read."""

from __future__ import annotations

from ._link import ClaudeCommand, ClaudeWire
from ._read import INTERRUPTED_TEXT, read
from ._session import claude_place, claude_slug, read_transcript
from ._spec import ClaudeSpec
from ._tables import CLAUDE_OVERLAP_SIGNALS, text_problem
from ._wire import CLAUDE_RULES, ClaudeRules

__all__ = [
    "CLAUDE_OVERLAP_SIGNALS",
    "CLAUDE_RULES",
    "INTERRUPTED_TEXT",
    "ClaudeCommand",
    "ClaudeRules",
    "ClaudeSpec",
    "ClaudeWire",
    "claude_place",
    "claude_slug",
    "read",
    "read_transcript",
    "text_problem",
]


def __dir__() -> list[str]:
    return list(__all__)
