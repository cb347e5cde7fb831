"""The conformance suite's script language, public so that a test can write its own scripts: :class:`Script`
(a scenario's steps, its seed, its settings, whether the seat loads the fixture extension) and its
:class:`Step` makers (write, wait for a record, answer the last dialog, close stdin, signal, wait for the
exit, snapshot the session file, relaunch, pause).
:func:`mosaic.pi_rpc.testing.conformance.run_script` runs a script against an engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mosaic.pi_rpc._framing import encode_record

__all__ = [
    "Script",
    "ScriptError",
    "Step",
    "answer",
    "ask",
    "close",
    "cmd",
    "exited",
    "kill",
    "pause",
    "relaunch",
    "reply",
    "send",
    "settled",
    "snapshot",
    "wait",
]


class ScriptError(AssertionError):
    """A script's step did not happen within its bound (or the engine misbehaved)."""


# ---------------------------------------------------------------------------------------------------------
# Scenario steps
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One step. ``kind``: ``send`` (``data``: bytes written in one write), ``wait`` (``match``: every key
    equal in the next matching record, ``count``: how many matches), ``answer`` (an
    ``extension_ui_response`` to the last dialog request a ``wait`` consumed, with the fields of ``match``),
    ``close`` (EOF on stdin), ``signal`` (``sig``), ``exit`` (wait for the process), ``file`` (snapshot the
    session file as ``label``), ``launch`` (restart the engine on the same tree: a second start, ``label``
    names it), ``pause`` (``seconds``: let time pass, to show that nothing happens in it; never a wait for
    something that does)."""

    kind: str
    data: bytes = b""
    match: Mapping[str, Any] = field(default_factory=dict)
    count: int = 1
    sig: int = 0
    label: str = ""
    seconds: float = 0.0


def send(*records: Mapping[str, Any] | bytes) -> Step:
    """Write the records (or raw bytes) in one write."""
    return Step("send", data=b"".join(r if isinstance(r, bytes) else encode_record(r) for r in records))


def cmd(cid: str, ctype: str, **fields: Any) -> Step:
    """Send one command and wait for its response."""
    return Step("send", data=encode_record({"id": cid, "type": ctype, **fields}))


def wait(count: int = 1, **match: Any) -> Step:
    """Wait until ``count`` more records match every key (``delta`` matches the assistant event's)."""
    return Step("wait", match=match, count=count)


def reply(cid: str) -> Step:
    return wait(id=cid, type="response")


def settled() -> Step:
    return wait(type="agent_settled")


def close() -> Step:
    return Step("close")


def kill(sig: int) -> Step:
    return Step("signal", sig=sig)


def exited() -> Step:
    return Step("exit")


def snapshot(label: str) -> Step:
    return Step("file", label=label)


def relaunch(label: str) -> Step:
    return Step("launch", label=label)


def answer(**fields: Any) -> Step:
    """Answer the last dialog request read so far: ``{"type": "extension_ui_response", "id": <its id>,
    **fields}`` in one write."""
    return Step("answer", match=fields)


def pause(seconds: float) -> Step:
    """Let ``seconds`` pass (the records that arrive meanwhile are kept, nothing is awaited)."""
    return Step("pause", seconds=seconds)


def ask(cid: str, ctype: str, **fields: Any) -> list[Step]:
    """A command and the wait for its response."""
    return [cmd(cid, ctype, **fields), reply(cid)]


@dataclass(frozen=True)
class Script:
    """A conformance script (one scenario of the suite, by ``name``): its ``steps``, the session file name,
    an optional ``seed`` (the file's bytes before start, ``{cwd}`` replaced by the project path; a callable
    makes them when the script runs) and the agent ``settings.json``. ``digest_files``: session file states
    are kept as their line count and the SHA-256 of their bytes (the scratch root written ``<scratch>``),
    not line by line (a long seed). ``fixture_extension``: the seat loads the fixture extension (the seal's
    fixture option; the engine's environment gets ``FIXTURE_EXTENSION_ENV``)."""

    name: str
    steps: tuple[Step, ...]
    session: str = "s.jsonl"
    seed: str | Callable[[], str] | None = None  # session file content before start ({cwd} is replaced)
    settings: Mapping[str, Any] = field(default_factory=dict)
    digest_files: bool = False
    fixture_extension: bool = False


def __dir__() -> list[str]:
    return sorted(__all__)
