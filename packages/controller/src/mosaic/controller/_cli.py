"""mosaic-controller: one controller on a fixture session, from the command line (also `python -m
mosaic.controller`).

    mosaic-controller fixture DIR
    mosaic-controller serve --fixture-root DIR --session FILE --socket DIR/controller.sock --pi-dir PI
                            [--claim-root DIR] [--home DIR] [--grants FILE] [--scripted-model]
                            [--provider P --model M]

`fixture DIR` makes a fixture tree as the demo does (the engine's home and agent directories, a project
with one session file, the claim root; owned by the engine account) and prints the `serve` line for it.

`serve` starts a controller as the demo does: the engine account (`cohorttest`, or MOSAIC_ENGINE_USER), the
cohort route (a systemd scope where a user manager answers, else a direct cgroup; printed, in plain
words), then `Controller.start()`: the live-session guard, the pin, the writer claim, the launch in the
cohort, the load check, and the socket. `--scripted-model` starts pi-rpc's scripted model on 127.0.0.1 and
points the fixture's models.json at it (run it inside `python -m mosaic.pi_rpc.testing.netns --` so the
engine can reach nothing else). `--grants FILE` lets other uids and gids connect and do what the file
grants (the package README, "Who may connect"); without it only this uid can. It serves until SIGINT, SIGTERM or SIGHUP; then it force stops the
engine as a client would (takeover, confirmation, force stop) and, the stop proven, the claim is
released, the cohort let go and everything it made removed. Signals that arrive while it starts are
answered once the start is done (a start is a few seconds), never half-way through a launch.

Options are accepted before or after the subcommand. Paths are arguments; the only derived ones are the
claim root (`<fixture root>/claims`) and the engine's `HOME` and `PI_CODING_AGENT_DIR` (`<fixture
root>/home`, `<fixture root>/agent`), all inside the fixture root the guard holds every path to; `--home`
(whose ~/.pi, ~/.claude and ~/.mosaic-dev are live, and refused) is the invoking user's home by default.

Exit status: 0 done (served, then stopped with a proof; or the fixture made); 1 refused (one line: a
refusal's code and plain message, a missing path, the engine account, no cohort route); 2 a usage error
(one line); 3 the engine could not be proven stopped (its claim stays held, uncertain; serve the same
session again to force stop it); 70 a crash (a bug: one line; MOSAIC_TRACEBACK=1 shows the traceback).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import sys
import tempfile
import traceback
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["main"]

PROG = "mosaic-controller"
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_NOT_STOPPED = 3
EXIT_CRASH = 70
SOCKET_NAME = "controller.sock"
STOP_WAIT = 60.0
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class CliRefused(Exception):
    """An expected way not to run (a missing path, the engine account, no route): one line."""


def version() -> str:
    try:
        return metadata.version("mosaic-controller")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def say(text: str) -> None:
    from .plain import shorten  # noqa: PLC0415 - after argument parsing: --help and --version stay quick

    with contextlib.suppress(OSError):  # a closed terminal is not an error
        print(shorten(text), flush=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """A usage error in one line (argparse prints the whole usage first)."""
        self.exit(EXIT_USAGE, f"{PROG}: {message} (see {PROG} --help)\n")


def _parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--version", action="version", version=f"{PROG} {version()}")
    ap = _Parser(prog=PROG, parents=[common], description=__doc__,
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True, metavar="{serve,fixture}", parser_class=_Parser)
    serve = sub.add_parser("serve", parents=[common], help="start a controller on a fixture session and serve it")
    serve.add_argument("--fixture-root", required=True, help="the fixture root every path must be inside")
    serve.add_argument("--session", required=True, help="the session file (inside the fixture root)")
    serve.add_argument("--socket", required=True, help=f"the controller's socket: <a private directory>/{SOCKET_NAME}")
    serve.add_argument("--pi-dir", default=os.environ.get("MOSAIC_PI_DIR"),
                       help="the pinned Pi 0.85.1 install (default: $MOSAIC_PI_DIR)")
    serve.add_argument("--claim-root", help="the writer claims' root (default: <fixture root>/claims)")
    serve.add_argument("--home", help="whose ~/.pi, ~/.claude, ~/.mosaic-dev are live (default: your home)")
    serve.add_argument("--grants", help="a grants file: other uids and gids that may connect, and what they may do "
                                        "(default: only this uid)")
    serve.add_argument("--scripted-model", action="store_true",
                       help="run pi-rpc's scripted model on 127.0.0.1 and point the fixture's models.json at it")
    serve.add_argument("--provider", default="fakeprov", help="the engine's provider (default: fakeprov)")
    serve.add_argument("--model", default="fake-model-1", help="the engine's model (default: fake-model-1)")
    fixture = sub.add_parser("fixture", parents=[common], help="make a fixture tree as the demo does")
    fixture.add_argument("dir", help="the fixture root to make (must not exist)")
    return ap


# ------------------------------------------------------------------------------------------------ fixture


def make_fixture(args: argparse.Namespace) -> int:
    from mosaic.cgroup_cohort.testing.account import EngineAccountError, engine_account  # noqa: PLC0415

    from .testing import FixtureTree  # noqa: PLC0415

    root = Path(os.path.abspath(args.dir))
    if os.path.lexists(root):
        raise CliRefused(f"{root} exists: fixture makes a new tree (name a path that does not exist)")
    try:
        engine = engine_account()
    except EngineAccountError as e:
        raise CliRefused(f"the engine account: {e}") from None
    root.parent.mkdir(parents=True, exist_ok=True)
    tree = FixtureTree(root)
    tree.make((engine.uid, engine.gid))
    tree.root.chmod(0o755)  # the engine account traverses it
    say(f"fixture tree {root}: session {tree.session}, claim root {tree.claims} (owned by uid {engine.uid})")
    say(f"serve it: {PROG} serve --fixture-root {root} --session {tree.session} --socket "
        f"<a private directory>/{SOCKET_NAME} --pi-dir <the pinned Pi> --scripted-model")
    return 0


# -------------------------------------------------------------------------------------------------- serve


class _Made:
    """What serve makes besides the controller, removed by these exact names at the end."""

    def __init__(self) -> None:
        self.dirs: list[str] = []
        self.route: Any = None
        self.model: Any = None

    def private_dir(self, prefix: str, mode: int) -> str:
        path = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
        self.dirs.append(path)
        os.chmod(path, mode)
        return path

    def close(self) -> list[str]:
        left = []
        if self.model is not None:
            self.model.stop()
        if self.route is not None and not self.route.close():
            left.append(f"the parent cgroup {self.route.parent} (the engine's cohort is still in it)")
        for path in self.dirs:
            shutil.rmtree(path, ignore_errors=True)
        return left


def _paths(args: argparse.Namespace) -> dict[str, str]:
    """The arguments checked for what can be told before anything is made; one line each way they fail."""
    root = os.path.abspath(args.fixture_root)
    session = os.path.abspath(args.session)
    if not os.path.isdir(root):
        raise CliRefused(f"the fixture root {root} is not a directory ({PROG} fixture DIR makes one)")
    if not os.path.isfile(session):
        raise CliRefused(f"the session file {session} does not exist")
    sock = os.path.abspath(args.socket)
    if os.path.basename(sock) != SOCKET_NAME:
        raise CliRefused(f"--socket must name <a private directory>/{SOCKET_NAME} (the controller's socket name), "
                         f"not {sock}")
    if not args.pi_dir:
        raise CliRefused("no Pi install: give --pi-dir (python -m mosaic.pi_rpc.testing.smoke prepare DIR "
                         "installs the pinned Pi 0.85.1 there)")
    pi_dir = os.path.abspath(args.pi_dir)
    if not os.path.isdir(pi_dir):
        raise CliRefused(f"the Pi install {pi_dir} is not a directory")
    home = args.home or pwd.getpwuid(os.getuid()).pw_dir
    return {"root": root, "session": session, "socket": sock, "pi_dir": pi_dir, "home": os.path.abspath(home),
            "claims": os.path.abspath(args.claim_root or os.path.join(root, "claims"))}


def _socket_dir(path: str, made: _Made) -> str:
    """The socket's directory: made 0700 when missing (and removed at the end); an existing one must be a
    private directory of this uid, without a socket of that name in it."""
    directory = os.path.dirname(path)
    try:
        os.mkdir(directory, 0o700)
        made.dirs.append(directory)
    except FileExistsError:
        st = os.stat(directory, follow_symlinks=False)
        if not os.path.isdir(directory) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise CliRefused(f"the socket's directory {directory} must be a private (0700) directory of "
                             f"uid {os.getuid()}") from None
        if os.path.lexists(path):
            raise CliRefused(f"{path} exists (another controller's socket?): name another") from None
    except FileNotFoundError:
        raise CliRefused(f"the socket's directory {directory} cannot be made: its parent does not exist") from None
    return directory


async def _stop_engine(socket_path: str) -> tuple[bool, str]:
    """Force stop the engine as a client does: take control (or recovery control), a confirmation, the
    force stop, its end. (stopped with a proof?, what to say)."""
    from mosaic.safe_open import Refusal  # noqa: PLC0415

    from .client import ControllerClient  # noqa: PLC0415
    from .plain import plain_message  # noqa: PLC0415

    client = await ControllerClient.connect(socket_path)
    try:
        await client.observe()
        try:
            await client.takeover()
        except Refusal:
            await client.acquire_recovery_control()
        started = await client.force_stop_confirmed()
        async with asyncio.timeout(STOP_WAIT):
            done = await client.wait_stop(str(started.stop["stop"]))
    except Refusal as e:
        return False, f"the engine could not be force stopped: {e.code}: {plain_message(e.message)}"
    except TimeoutError:
        return False, f"the force stop did not end within {STOP_WAIT:.0f} s"
    finally:
        await client.aclose()
    if done.get("state") == "stopped":
        return True, f"force stop {done.get('stop')}: stopped (the cohort proof says every process ended)"
    return False, f"force stop {done.get('stop')}: {done.get('state')} ({done.get('reason')})"


async def serve(args: argparse.Namespace) -> int:
    from mosaic.cgroup_cohort import FixtureVerifier  # noqa: PLC0415
    from mosaic.cgroup_cohort.testing.account import EngineAccountError, engine_account  # noqa: PLC0415
    from mosaic.pi_rpc.testing import ModelServer, models_json  # noqa: PLC0415

    from ._access import Grants  # noqa: PLC0415
    from ._lifecycle import Controller, EngineSpec, Placement  # noqa: PLC0415
    from .route import RouteUnavailable, choose_route, engine_can_read  # noqa: PLC0415
    from .testing import readable_install  # noqa: PLC0415

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    got: list[int] = []

    def on_signal(signum: int) -> None:
        got.append(signum)
        stop.set()

    for sig in SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    paths = _paths(args)
    grants = Grants.load(args.grants) if args.grants else None  # refused before anything is made
    made = _Made()
    controller: Controller | None = None
    try:
        try:
            engine = engine_account()
        except EngineAccountError as e:
            raise CliRefused(f"the engine account: {e}") from None
        socket_dir = _socket_dir(paths["socket"], made)
        shims = made.private_dir("mosaic-controller-sock-", 0o700)
        try:
            made.route = choose_route(shims, engine, f"mosaic-controller-{secrets.token_hex(4)}")
        except RouteUnavailable as e:
            raise CliRefused(f"no cohort route: {e}") from None
        say(f"cohort route: {made.route.describe()}")
        pi_dir = paths["pi_dir"]
        if not engine_can_read(pi_dir):
            pi_dir = str(readable_install(pi_dir, made.private_dir("mosaic-controller-", 0o755)))
        agent = os.path.join(paths["root"], "agent")
        if args.scripted_model:
            made.model = ModelServer().start()
            models = Path(agent) / "models.json"
            models.write_text(json.dumps(models_json(made.model.base_url, provider=args.provider, model=args.model)))
            os.chown(models, engine.uid, engine.gid)
            say(f"scripted model at {made.model.base_url} (loopback); {models} points at it")
        env = {"HOME": os.path.join(paths["root"], "home"), "PATH": "/usr/bin:/bin", "PI_CODING_AGENT_DIR": agent}
        controller = Controller(
            Placement(fixture_root=paths["root"], claim_root=paths["claims"], session_file=paths["session"],
                      socket_dir=socket_dir, home=paths["home"]),
            EngineSpec(env=env, pi_dir=pi_dir, provider=args.provider, model=args.model),
            made.route.launcher, verifier=FixtureVerifier(), manager=made.route.manager, grants=grants)
        await controller.start()
        execution = controller.execution
        assert execution is not None
        ref = execution.ref
        where = f"in {ref.unit} (engine pid {ref.engine.pid}, uid {engine.uid})" if ref is not None else \
            "with no engine attached"
        say(f"serving {controller.socket_path}: claim {execution.claim.claim_id} ({controller.mode}) {where}; "
            "SIGINT, SIGTERM or SIGHUP force stops the engine and exits")
        await stop.wait()
        say(f"{signal.Signals(got[0]).name}: force stopping the engine")
        stopped, said = await _stop_engine(controller.socket_path)
        say(said)
        return 0 if stopped else EXIT_NOT_STOPPED
    finally:
        if controller is not None:
            await controller.aclose()
        left = made.close()
        if left:
            say(f"left in place: {'; '.join(left)}; serve the same session again to force stop it")


def main(argv: Sequence[str] | None = None) -> int:
    """Run mosaic-controller; returns the exit status (see the module docstring)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "fixture":
            return make_fixture(args)
        return asyncio.run(serve(args))
    except CliRefused as e:
        say(f"{PROG}: {e}")
        return EXIT_REFUSED
    except KeyboardInterrupt:  # before the loop's own handlers were in place: nothing was made yet
        say(f"{PROG}: interrupted")
        return 128 + signal.SIGINT
    except Exception as e:  # noqa: BLE001 - a refusal is one line; anything else is a crash, said in one line
        from mosaic.safe_open import Refusal  # noqa: PLC0415

        from .plain import plain_message  # noqa: PLC0415

        if isinstance(e, Refusal):
            say(f"{PROG}: refused: {e.code}: {plain_message(e.message)}")
            return EXIT_REFUSED
        first = str(e).splitlines()[0] if str(e) else ""
        say(f"{PROG}: crashed (a bug): {type(e).__name__}: {first}; MOSAIC_TRACEBACK=1 shows the traceback")
        if os.environ.get("MOSAIC_TRACEBACK"):
            traceback.print_exc()
        return EXIT_CRASH


if __name__ == "__main__":
    sys.exit(main())
