"""mosaic.pi_format: a pure parser from the bytes of a Pi 0.85.1 session file to its header, entries,
branches, default branch and notices.

    from mosaic.pi_format import parse, Parsed, FormatRefusal
    result = parse(data, project="/abs/project", realpath=os.path.realpath)
    if isinstance(result, FormatRefusal): ...          # code, reconcile, message
    branch = result.branches[result.default_branch]
    for item in branch.items: ...                       # Item: id, kind, line, timestamp, blocks, attrs

No I/O: the caller reads the bytes and injects realpath. `FormatRefusal` subclasses the shared
`mosaic.safe_open.Refusal` (importing safe-open loads no cffi and opens nothing). See the package README
for every rule.
"""

from typing import TYPE_CHECKING, Any

from ._ids import CHAT01_ID_PATTERN, MAIN_BRANCH, is_chat01_id, safe_id
from ._refusal import FormatRefusal

if TYPE_CHECKING:
    from ._model import (
        NOTICE_CODES,
        Block,
        Branch,
        CommandBlock,
        Entry,
        Header,
        ImageBlock,
        Item,
        ItemKind,
        Json,
        Notice,
        NoticeCode,
        Parsed,
        TextBlock,
        ThinkingBlock,
        ToolCallBlock,
        UnavailableBlock,
        UnsupportedBlock,
    )
    from ._parse import parse, parse_appended
    from ._summary import summary

# Importing the package loads only the ids and FormatRefusal; the model, the parser and msgspec load on
# first use of one of these names (issue 13: `from mosaic.pi_format import safe_id` stays cheap).
_LAZY = {
    **dict.fromkeys(("NOTICE_CODES", "Block", "Branch", "CommandBlock", "Entry", "Header", "ImageBlock", "Item",
                     "ItemKind", "Json", "Notice", "NoticeCode", "Parsed", "TextBlock", "ThinkingBlock",
                     "ToolCallBlock", "UnavailableBlock", "UnsupportedBlock"), "_model"),
    "parse": "_parse",
    "parse_appended": "_parse",
    "summary": "_summary",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "CHAT01_ID_PATTERN",
    "MAIN_BRANCH",
    "NOTICE_CODES",
    "Block",
    "Branch",
    "CommandBlock",
    "Entry",
    "FormatRefusal",
    "Header",
    "ImageBlock",
    "Item",
    "ItemKind",
    "Json",
    "Notice",
    "NoticeCode",
    "Parsed",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "UnavailableBlock",
    "UnsupportedBlock",
    "is_chat01_id",
    "parse",
    "parse_appended",
    "safe_id",
    "summary",
]
