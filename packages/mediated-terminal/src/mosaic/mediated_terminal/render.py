"""The client library's values as lines of inert, styled text, pure: a transcript item's styled fragments
(`item_fragments`) and wrapped lines (`item_lines`, `transcript_lines`, `transcript_rows`), `wrap` at a
width, a request's receipt in words (`receipt_words`, `request_line`), the status in plain words
(`status_line`), the developer details (`details_line`), the header (`header_line`), a Pi dialog's line
(`dialog_line`), the confirmations (`confirmation_lines`) and a stop's outcome (`stop_words`); `styled`
and `plain` build and flatten fragments (`Fragments`: a list of (style, text)). Every string goes through
`mosaic.mediated_terminal.text.inert`.
"""

from __future__ import annotations

from . import _render
from ._render import *  # noqa: F403

__all__: list[str] = []
__all__ += _render.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
