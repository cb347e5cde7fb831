"""The client library's values as lines of inert, styled text, pure: a transcript item's styled fragments
(`item_fragments`) and wrapped lines (`item_lines`, `transcript_lines`, `transcript_rows`), `wrap` at a
width, a request's receipt in words (`receipt_words`, `request_line`), the status in plain words
(`status_line`), the developer details (`details_line`), the header (`header_line`, the incarnation shown
to `INCARNATION_SHOWN` characters), a Pi dialog's line (`dialog_line`), the confirmations
(`confirmation_lines`) and a stop's outcome (`stop_words`); `styled` and `plain` build and flatten
fragments. Every string goes through `mosaic.mediated_terminal.text.inert`.
"""

from __future__ import annotations

from ._render import (
    INCARNATION_SHOWN,
    confirmation_lines,
    details_line,
    dialog_line,
    header_line,
    item_fragments,
    item_lines,
    plain,
    receipt_words,
    request_line,
    status_line,
    stop_words,
    styled,
    transcript_lines,
    transcript_rows,
    wrap,
)

__all__ = [
    "INCARNATION_SHOWN",
    "confirmation_lines",
    "details_line",
    "dialog_line",
    "header_line",
    "item_fragments",
    "item_lines",
    "plain",
    "receipt_words",
    "request_line",
    "status_line",
    "stop_words",
    "styled",
    "transcript_lines",
    "transcript_rows",
    "wrap",
]


def __dir__() -> list[str]:
    return sorted(__all__)
