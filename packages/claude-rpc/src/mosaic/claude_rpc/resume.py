"""What ``--resume`` continues and the load check's evidence (README "Resume and the load check"):
`leaf_by_rule(lines)` (the written rule), `check_resumed(before, after, session_id=, message_uuid=)` ->
`ResumeCheck`, and `SYNTHETIC_MODEL`, the model name of the entry the binary adds to close an interrupted turn.
"""

from __future__ import annotations

from . import _resume
from ._resume import *  # noqa: F403

__all__: list[str] = []
__all__ += _resume.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
