"""The Claude Code engine adapter (issue 32, first slice): everything that knows Claude Code 2.1.283's
stream-json wire. The core's half of the seam: `ClaudeRules` (`CLAUDE_RULES`, `CoreConfig.engine`) over
`ClaudeWire` (claude-rpc's link core as the seam's `Wire`, `ClaudeCommand` its lines), Claude's record
reading (`read`, `INTERRUPTED_TEXT`), its overlap table (`CLAUDE_OVERLAP_SIGNALS`) and text policy
(`text_problem`). The lifecycle's half (`Engine`/`EngineFactory`) and the transcript drift check come next."""

from __future__ import annotations

from ._link import ClaudeCommand, ClaudeWire
from ._read import INTERRUPTED_TEXT, read
from ._tables import CLAUDE_OVERLAP_SIGNALS, text_problem
from ._wire import CLAUDE_RULES, ClaudeRules

__all__ = [
    "CLAUDE_OVERLAP_SIGNALS",
    "CLAUDE_RULES",
    "INTERRUPTED_TEXT",
    "ClaudeCommand",
    "ClaudeRules",
    "ClaudeWire",
    "read",
    "text_problem",
]


def __dir__() -> list[str]:
    return list(__all__)
