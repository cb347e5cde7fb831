"""Test helpers for the pinned Claude Code: the scripted Anthropic Messages server, the driver that runs
the binary in a scratch directory (``env -i``, fake key, scratch config), the makers of the committed
recordings and transcript trees, the loopback-only network namespace and the smoke suite's preparation.

Nothing here is imported by the runtime package; it needs only the standard library (the namespace uses
pyroute2 when it is installed). Public modules: ``.model_server``, ``.drive``, ``.recordings``, ``.trees``,
``.netns``, ``.smoke``.
"""

from mosaic.claude_rpc.testing.model_server import (
    DEFAULT_SCENARIOS,
    HttpError,
    ModelServer,
    RecordedRequest,
    Reply,
    Scenario,
    TextReply,
    ToolUseReply,
)

__all__ = [
    "DEFAULT_SCENARIOS",
    "HttpError",
    "ModelServer",
    "RecordedRequest",
    "Reply",
    "Scenario",
    "TextReply",
    "ToolUseReply",
]


def __dir__() -> list[str]:
    return sorted(__all__)
