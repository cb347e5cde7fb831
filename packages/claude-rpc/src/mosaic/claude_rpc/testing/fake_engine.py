"""The fake Claude engine: ``python -m mosaic.claude_rpc.testing.fake_engine [--fake-control SOCKET] <sealed
args>`` speaks the pinned binary's stream-json for the flows the controller needs (the module docstring of
``_fake_engine.py`` lists them; the conformance suite holds it to the real binary, README "The fake engine").

It refuses anything outside the seal, like the launch would: arguments that :func:`mosaic.claude_rpc.seal.
check_seal` refuses, or an environment :func:`mosaic.claude_rpc.seal.check_env` refuses, exit 2 with one line
on stderr. Its model is the scripted server at ``ANTHROPIC_BASE_URL`` (real HTTP).

:func:`fake_engine_command` is the command to put before the sealed arguments (a launcher's test hook:
``seal_launch(None, ..., command=fake_engine_command())``); :func:`fake_launch` makes the whole sealed launch
for a scratch directory, as :func:`mosaic.claude_rpc.seal.seal_launch` does for the binary.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mosaic.claude_rpc.seal import SealedLaunch

__all__ = ["FAKE_CONTROL_FLAG", "fake_engine_command", "fake_launch", "main"]

FAKE_CONTROL_FLAG = "--fake-control"


def fake_engine_command(control: str | None = None) -> list[str]:
    """The interpreter and module (and the control socket's pre-arguments) to run before the sealed args."""
    cmd = [sys.executable, "-m", "mosaic.claude_rpc.testing.fake_engine"]
    if control is not None:
        cmd += [FAKE_CONTROL_FLAG, control]
    return cmd


def fake_launch(scratch: str | os.PathLike[str], cwd: str | os.PathLike[str], *, session_id: str, resume: bool,
                base_url: str, partial_messages: bool = False, control: str | None = None) -> SealedLaunch:
    """A :class:`mosaic.claude_rpc.seal.SealedLaunch` of the fake engine (not pinned) with the fake key."""
    from mosaic.claude_rpc.seal import seal_launch
    from mosaic.claude_rpc.testing.drive import FAKE_KEY

    return seal_launch(None, session_id=session_id, resume=resume, scratch=scratch, cwd=cwd, base_url=base_url,
                       api_key=FAKE_KEY, partial_messages=partial_messages, command=fake_engine_command(control))


def main(argv: Sequence[str] | None = None) -> int:
    from mosaic.claude_rpc._seal import SEALED_FLAGS, check_env, check_seal
    from mosaic.claude_rpc.testing._fake_engine import Options, serve

    args = list(sys.argv[1:] if argv is None else argv)
    control = None
    if args[:1] == [FAKE_CONTROL_FLAG]:
        if len(args) < 2:
            print("fake engine: --fake-control needs a socket path", file=sys.stderr)
            return 2
        control, args = args[1], args[2:]
    env = dict(os.environ)
    if env.get("LC_CTYPE") == "C.UTF-8":
        del env["LC_CTYPE"]  # put there by the interpreter itself (PEP 538 locale coercion), not by the launcher
    refusal = check_seal(args) or check_env(env)
    if refusal is not None:
        print(f"fake engine: {refusal.code}: {refusal.message}", file=sys.stderr)
        return 2
    rest = args[len(SEALED_FLAGS):]
    options = Options(session=rest[1], resume=rest[0] == "--resume", partial="--include-partial-messages" in rest,
                      cwd=os.getcwd(), config_dir=env["CLAUDE_CONFIG_DIR"], tmpdir=env["CLAUDE_CODE_TMPDIR"],
                      base_url=env.get("ANTHROPIC_BASE_URL"), api_key=env.get("ANTHROPIC_API_KEY"))
    return asyncio.run(serve(options, control))


def __dir__() -> list[str]:
    return sorted(__all__)


if __name__ == "__main__":
    raise SystemExit(main())
