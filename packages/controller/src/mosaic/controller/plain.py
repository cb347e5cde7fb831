"""Plain words for what a person reads at a terminal (`mosaic.controller.plain`).

The refusals and records keep their full detail (a refusal's message may cite the Pi source lines it
rests on, as the package README's tables do); what is printed for a person carries no source line numbers
and no 32-hex identifiers in full. Used by `mosaic-controller`, the demo and other command lines.

* `plain_message(text)` drops the parenthesised Pi source citations (``(agent-session.js 827-835, ...)``).
* `shorten(text)` writes each long hexadecimal identifier inside a text as its first four digits and an
  ellipsis (eight after ``sha256:``): ``claim-91d2…``, ``cohort-claim-91d2….scope``, ``sha256:11e6ab63…``.
"""

from __future__ import annotations

import re

__all__ = ["plain_message", "shorten"]

# A parenthesised citation of Pi source: a file name ending .js/.mjs/.ts followed by line numbers, with at
# most one level of parentheses inside it (check_text's message cites "(agent-session.js 827-835, 954-976
# (extension command, runs even while streaming))").
_CITATION = re.compile(r"\s*\((?=[^()]*\b[\w.-]+\.(?:js|mjs|cjs|ts)\b)(?:[^()]|\([^()]*\))*\)")
_HEX = re.compile(r"(?<![0-9a-f])(sha256:)?([0-9a-f]{12,})(?![0-9a-f])")


def plain_message(text: str) -> str:
    """`text` without its parenthesised Pi source citations (and the space before each)."""
    return _CITATION.sub("", text)


def shorten(text: str) -> str:
    """`text` with every run of 12 or more lowercase hex digits cut to its first 4 (8 after `sha256:`) and
    an ellipsis: enough to tell ids apart on one screen, short enough to read."""
    return _HEX.sub(lambda m: (m.group(1) or "") + m.group(2)[: 8 if m.group(1) else 4] + "…", text)


def __dir__() -> list[str]:
    return list(__all__)
