"""The Claude Code engine adapter (issue 32, first slice): everything that knows Claude Code 2.1.283's
stream-json wire. The core's half of the seam: `ClaudeRules` (`CLAUDE_RULES`, `CoreConfig.engine`) over
`ClaudeWire` (claude-rpc's link core as the seam's `Wire`, `ClaudeCommand` its lines), Claude's record
reading (`read`, `INTERRUPTED_TEXT`), its overlap table (`CLAUDE_OVERLAP_SIGNALS`) and text policy
(`text_problem`). The lifecycle's half: `ClaudeEngine` (the seam's `Engine`), made by `ClaudeSpec.engine()` (how to
run Claude: the `EngineFactory` a `LaunchingController` takes); what it reads of a transcript (`claude_place`,
`ClaudePlace`, `claude_slug`, `read_transcript`, `ClaudeSessionRead`). The transcript drift check is not built yet (`ClaudeEngine.drift` is None)."""

from __future__ import annotations

from ._engine import ClaudeEngine
from ._link import ClaudeCommand, ClaudeWire
from ._read import INTERRUPTED_TEXT, read
from ._session import ClaudePlace, ClaudeSessionRead, claude_place, claude_slug, read_transcript
from ._spec import ClaudeSpec
from ._tables import CLAUDE_OVERLAP_SIGNALS, text_problem
from ._wire import CLAUDE_RULES, ClaudeRules

__all__ = [
    "CLAUDE_OVERLAP_SIGNALS",
    "CLAUDE_RULES",
    "INTERRUPTED_TEXT",
    "ClaudeCommand",
    "ClaudeEngine",
    "ClaudePlace",
    "ClaudeRules",
    "ClaudeSessionRead",
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
