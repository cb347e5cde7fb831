"""mosaic.pi_format: a pure parser from the bytes of a Pi 0.85.1 session file to its header, entries,
branches, default branch and notices.

    from mosaic.pi_format import FormatRefusal, parse
    result = parse(data, project="/abs/project", realpath=os.path.realpath)
    if isinstance(result, FormatRefusal): ...          # code, reconcile, message
    branch = result.branches[result.default_branch]
    for item in branch.items: ...                       # Item: id, kind, line, timestamp, blocks, attrs

No I/O: the caller reads the bytes and injects realpath. What a consumer needs is here (`__all__`); the
rest is in named public modules: `mosaic.pi_format.model` (the output model: branches, entries, items,
blocks, notices), `mosaic.pi_format.ids` (the id rules), `mosaic.pi_format.cli` (`python -m
mosaic.pi_format` and the summary it prints) and `mosaic.pi_format.testing` (switches that pin the line
index's mechanisms in tests). `FormatRefusal` subclasses the shared `mosaic.safe_open.Refusal` (importing
safe-open loads no cffi and opens nothing). See the package README for every rule.
"""

from typing import TYPE_CHECKING, Any

from ._ids import MAIN_BRANCH, safe_id
from ._refusal import FormatRefusal

if TYPE_CHECKING:
    from ._model import Parsed
    from ._parse import parse, parse_appended

# Importing the package loads only the ids and FormatRefusal; the model, the parser and msgspec (tens of
# milliseconds of imports) load on first use of one of these names, so `safe_id` stays cheap (PEP 562).
_LAZY = {
    "Parsed": "_model",
    "parse": "_parse",
    "parse_appended": "_parse",
}

__all__ = [
    "MAIN_BRANCH",
    "FormatRefusal",
    "Parsed",
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
