"""The Claude link: `ClaudeLinkCore`, the sans-io state machine over a sealed Claude Code's stream-json, and
`ClaudeEngineLink`, its asyncio shell over two pipe fds (README "The link").

What the link writes is an `Outgoing` (a user message, a control request `r<n>`, a permission answer) with a
write `Outcome` (`written`, `acknowledged`, or `unknown` with an `UnknownReason`), every change a row of
`OUTCOME_TABLE`; the first `unknown` poisons the pipe (`LinkPoisoned`). A `can_use_tool` is a
`PermissionRequest` (`PermissionState`), answered at most once with `allow`/`deny`; an interrupt's receipt
is `InterruptEvidence`. Events (`LinkEvent`, their union) come out in read order. `DEFAULT_BOUND`,
`DEFAULT_PERMISSION_HISTORY`, `DEFAULT_MAX_QUEUED_EVENTS`, `NARROW_MODES` and `KNOWN_TYPES` are the
link's constants; `OutcomeUnknownError` is the shell's `outcome()` when the outcome is unknown.
"""

from __future__ import annotations

from . import _link, _link_model, _shell
from ._link import *  # noqa: F403
from ._link_model import *  # noqa: F403
from ._shell import *  # noqa: F403

__all__: list[str] = []
__all__ += _link.__all__
__all__ += _link_model.__all__
__all__ += _shell.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
