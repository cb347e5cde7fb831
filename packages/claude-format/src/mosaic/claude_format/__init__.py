"""mosaic.claude_format: a pure parser from the bytes of a Claude Code 2.1.283 transcript
(`<config>/projects/<slug>/<sessionId>.jsonl`) to its branches, default leaf, sidechains and notices.

    from mosaic.claude_format import TranscriptRefusal, parse
    result = parse(data, project="/abs/project", realpath=os.path.realpath)
    if isinstance(result, TranscriptRefusal): ...       # code, reconcile, message
    branch = result.branches[result.default_branch]      # the leaf --resume continues
    for item in branch.items_from(0, 100): ...            # Item: id, kind, line, timestamp, blocks, attrs

No I/O: the caller reads the bytes and injects realpath. What a consumer needs is here (`__all__`); the
output model is in `mosaic.claude_format.model` and the id rules in `mosaic.claude_format.ids`.
`TranscriptRefusal` subclasses the shared `mosaic.safe_open.Refusal` (importing safe-open loads no cffi and
opens nothing). See the package README for every rule.
"""

from typing import TYPE_CHECKING, Any

from ._ids import MAIN_BRANCH, safe_id
from ._refusal import TranscriptRefusal

if TYPE_CHECKING:
    from ._lines import META_TYPES, PINNED_VERSION, first_entry_end
    from ._model import Parsed
    from ._parse import parse, parse_appended

# Importing the package loads only the ids and TranscriptRefusal; the model, the parser and msgspec load on
# first use of one of these names (PEP 562).
_LAZY = {
    "META_TYPES": "_lines",
    "PINNED_VERSION": "_lines",
    "Parsed": "_model",
    "first_entry_end": "_lines",
    "parse": "_parse",
    "parse_appended": "_parse",
}

__all__ = [
    "MAIN_BRANCH",
    "META_TYPES",
    "PINNED_VERSION",
    "Parsed",
    "TranscriptRefusal",
    "first_entry_end",
    "parse",
    "parse_appended",
    "safe_id",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
