"""mosaic-controller: one controller on a fixture session, from the command line (also `python -m
mosaic.controller`).

    mosaic-controller fixture DIR
    mosaic-controller serve --fixture-root DIR --session FILE --socket DIR/controller.sock --pi-dir PI
                            [--claim-root DIR] [--home DIR] [--grants FILE] [--scripted-model]
                            [--provider P --model M] [--eligibility ID]
                            [--engine-uids FIRST:COUNT --engine-uid-state DIR]
    (every command also takes --debug and --log FILE)

`fixture DIR` makes a fixture tree as the demo does (the engine's home and agent directories, a project
with one session file, the claim root; owned by the engine account) and prints the `serve` line for it.

`serve` starts a controller as the demo does: the engine account (`cohorttest`, or MOSAIC_ENGINE_USER), the
cohort route (a systemd scope where a user manager answers, else a direct cgroup; printed, in plain
words), then `LaunchingController.start()`: the live-session guard, the pin, the writer claim, the launch in the
cohort, the load check, and the socket. `--scripted-model` starts pi-rpc's scripted model on 127.0.0.1 and
points the fixture's models.json at it (run it inside `python -m mosaic.pi_rpc.testing.netns --` so the
engine can reach nothing else). `--grants FILE` lets other uids and gids connect and do what the file
grants (the package README, "Who may connect"); without it only this uid can. `--engine-uids FIRST:COUNT
--engine-uid-state DIR` runs each execution's engine as a uid of its own from that range (in the engine
account's group), allocated at the launch, recorded in the claim and the binding, and never given again
while a cohort of it may live (the package README, "An engine uid per execution"); DIR is the allocator's
private state directory (mode 0700), shared by every controller that allocates from the range; without them
the engine runs as the one engine account. It serves until SIGINT, SIGTERM or SIGHUP; then it force stops the
engine as a client would (takeover, confirmation, force stop) and, the stop proven, the claim is
released, the cohort let go and everything it made removed. An engine a client already force stopped with
a proof is not stopped again: serve says so in one line and exits 0. Signals that arrive while it starts
are answered once the start is done (a start is a few seconds), never half-way through a launch.

Recover and launch again: a client's recover (the terminal's Ctrl-R) reserves the session for a new
eligibility record and launches nothing. serve prints the exact command that launches from it, the same
serve line with `--eligibility ID` (the recover's reply carries it too, so the terminal shows it): stop
this serve, then run that. `serve` without `--eligibility` on a session reserved for a record refuses in
one line naming that command (and `mosaic-claims release-reservation`, the way to give the record up): it
never launches from a record it was not given, because the record is a single-use grant a person confirmed
for that recovery.

Output: progress on stdout, one line each; refusals, errors and the library's log on stderr, one line per
event in plain words. A log record's traceback is shown only with `--debug`; `--log FILE` writes every
record, with its traceback, to FILE (the stderr line says so).

Options are accepted before or after the subcommand. Paths are arguments; the only derived ones are the
claim root (`<fixture root>/claims`) and the engine's `HOME` and `PI_CODING_AGENT_DIR` (`<fixture
root>/home`, `<fixture root>/agent`), all inside the fixture root the guard holds every path to; `--home`
(whose ~/.pi, ~/.claude and ~/.mosaic-dev are live, and refused) is the invoking user's home by default.

Exit status: 0 done (served, then stopped with a proof, or found already stopped with one; or the fixture
made); 1 refused (one line: a refusal's code and plain message, a missing path, the engine account, no
cohort route); 2 a usage error (one line); 3 the engine could not be proven stopped (its claim stays held,
uncertain; serve the same session again to force stop it); 70 a crash (a bug: one line; --debug or
MOSAIC_TRACEBACK=1 shows the traceback).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import pwd
import secrets
import shlex
import shutil
import signal
import sys
import tempfile
import traceback
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # imported where serve needs them, so --help and --version stay quick
    from .lifecycle._eligibility import EligibilityRecord
    from .lifecycle._launching import LaunchingController

__all__ = [
    "EXIT_CRASH",
    "EXIT_NOT_STOPPED",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "main",
]

PROG = "mosaic-controller"
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_NOT_STOPPED = 3
EXIT_CRASH = 70
SOCKET_NAME = "controller.sock"
STOP_WAIT = 60.0
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class CliRefused(Exception):
    """An expected way not to run (a missing path, the engine account, no route): one line. `command` (a
    command line to copy) is printed after it whole, never shortened."""

    def __init__(self, message: str, command: str = "") -> None:
        super().__init__(message)
        self.command = command


def version() -> str:
    try:
        return metadata.version("mosaic-controller")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def say(text: str, *, exact: str = "", err: bool = False) -> None:
    """One line for a person: `text` with its ids shortened, then `exact` whole (a command line to copy);
    on stdout, or stderr for a refusal or an error (`err`)."""
    from .plain import shorten  # noqa: PLC0415 - after argument parsing: --help and --version stay quick

    stream = sys.stderr if err else sys.stdout
    try:
        print(shorten(text) + exact, file=stream, flush=True)
    except OSError:  # a closed terminal (EIO) or pipe is not an error: nothing more is shown on it
        quiet(stream)


def quiet(stream: Any) -> None:
    """Point `stream`'s descriptor at /dev/null once its terminal or pipe is gone, so the lines still in its
    buffer and every later one go nowhere instead of failing again (at exit, Python reports a failed flush
    of stdout as status 120)."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, stream.fileno())
        finally:
            os.close(null)


def tell(text: str, *, exact: str = "") -> None:
    """A refusal or an error: one line on stderr."""
    say(text, exact=exact, err=True)


class _OneLine(logging.Formatter):
    """A log record as one line in plain words: `mosaic-controller: <message>`, an exception as its type and
    first line, and where its traceback is (`hint`); no traceback."""

    def __init__(self, hint: str) -> None:
        super().__init__()
        self.hint = hint

    def format(self, record: logging.LogRecord) -> str:
        from .plain import plain_message, shorten  # noqa: PLC0415

        text = record.getMessage()
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            text += f": {type(exc).__name__}" + (f": {first}" if first else "") + self.hint
        return f"{PROG}: " + shorten(plain_message(" ".join(text.split())))


def _logging(args: argparse.Namespace) -> None:
    """The log handlers (module docstring "Output"): stderr, one line per record at WARNING and above (with
    --debug every record from INFO up, the packages' from DEBUG, with tracebacks); --log FILE, every record
    from INFO up with its traceback.
    Raises CliRefused when FILE cannot be opened."""
    debug, log = getattr(args, "debug", False), getattr(args, "log", None)
    handlers: list[logging.Handler] = []
    stderr = logging.StreamHandler(sys.stderr)
    if debug:
        stderr.setFormatter(logging.Formatter(f"{PROG}: %(levelname)s %(name)s: %(message)s"))
    else:
        stderr.setLevel(logging.WARNING)
        stderr.setFormatter(_OneLine(f" (its traceback is in {log})" if log else " (--debug shows the traceback)"))
    handlers.append(stderr)
    if log:
        try:
            to_file = logging.FileHandler(log, encoding="utf-8")
        except OSError as e:
            raise CliRefused(f"--log {log}: {(e.strerror or str(e)).lower()}") from None
        to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handlers.append(to_file)
    logging.basicConfig(level=logging.INFO if debug or log else logging.WARNING, handlers=handlers, force=True)
    if debug:
        logging.getLogger("mosaic").setLevel(logging.DEBUG)  # the packages' own detail, not asyncio's


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """A usage error in one line (argparse prints the whole usage first)."""
        self.exit(EXIT_USAGE, f"{PROG}: {message} (see {PROG} --help)\n")


def _parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--version", action="version", version=f"{PROG} {version()}")
    # SUPPRESS: given before or after the subcommand, neither place's default undoes the other's value.
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show each log record's traceback on stderr (and log every record)")
    common.add_argument("--log", metavar="FILE", default=argparse.SUPPRESS,
                        help="also write every log record, with its traceback, to FILE")
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
    serve.add_argument("--engine-uids", metavar="FIRST:COUNT",
                       help="run each execution's engine as its own uid from this range (needs --engine-uid-state)")
    serve.add_argument("--engine-uid-state", metavar="DIR",
                       help="the engine uid allocator's private state directory (mode 0700; made when missing)")
    serve.add_argument("--answer-dialogs", action="store_true",
                       help="answer the engine's confirm and select dialogs (issue 33, opt-in; default: every dialog is "
                            "shown disabled and never answered, P3)")
    serve.add_argument("--fixture-extension", action="store_true",
                       help="load pi-rpc's fixture extension (test seats only: it raises dialogs on the scripted "
                            "model's DIALOG cue; the seal checks its path and sha256)")
    serve.add_argument("--eligibility", metavar="ID",
                       help="launch from this eligibility record (a client's recover issued it, and printed this "
                            "command with it)")
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
    # The engine group's to write (directories 2775, files 0664): engines of several uids in that group share
    # it when serve runs each execution as its own uid (--engine-uids); the one engine account too.
    tree.make((engine.uid, engine.gid), group_writable=True)
    tree.root.chmod(0o755)  # the engine account traverses it
    say(f"fixture tree {root}: session {tree.session}, claim root {tree.claims} (owned by uid {engine.uid}, "
        f"group {engine.gid})")
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


def _engine_uid_range(args: argparse.Namespace) -> tuple[int, int] | None:
    """`--engine-uids FIRST:COUNT` checked before anything is made (both options or neither)."""
    if args.engine_uids is None and args.engine_uid_state is None:
        return None
    if args.engine_uids is None or args.engine_uid_state is None:
        raise CliRefused("--engine-uids FIRST:COUNT and --engine-uid-state DIR go together")
    first, sep, count = args.engine_uids.partition(":")
    if not (sep and first.isdigit() and count.isdigit() and int(first) > 0 and int(count) > 0):
        raise CliRefused(f"--engine-uids {args.engine_uids!r} is not FIRST:COUNT (two positive integers, "
                         "e.g. 61000:1000)")
    return int(first), int(count)


def _engine_uid_state(path: str) -> str:
    """The allocator's state directory, made 0700 when missing (kept: its leases outlive this serve)."""
    path = os.path.abspath(path)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    return path


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


def proven_stop(controller: LaunchingController) -> str | None:
    """What to say when the engine's claim is already stopped with a proof (a client's force stop, or a stop
    this controller continued), from the claim the lifecycle published; None otherwise."""
    from mosaic.writer_claim import State  # noqa: PLC0415

    execution = controller.execution
    if execution is None or execution.claim.state is not State.STOPPED:
        return None
    head = execution.claim.head("session")
    stop = head.stop.stop_id if head.stop is not None else None
    proof = f"proof {head.proof.digest}" if head.proof is not None else "proof recorded"
    return (f"the engine was already proven stopped (force stop {stop}; {proof}): every process it started has "
            "ended, nothing is left to stop")


async def _stop_engine(controller: LaunchingController) -> tuple[bool, str]:
    """Force stop the engine as a client does: take control (or recovery control), a confirmation, the
    force stop, its end. A client's force stop still running is waited for; an engine already proven
    stopped is not stopped again (its claim is released with the proof: nothing is left to publish).
    (stopped with a proof?, what to say)."""
    from mosaic.safe_open import Refusal  # noqa: PLC0415

    from .client import ControllerClient  # noqa: PLC0415
    from .plain import plain_message  # noqa: PLC0415

    runtime = controller.runtime
    if runtime is not None and runtime.core.binding_state == "stopping":
        with contextlib.suppress(TimeoutError):  # a client's stop is running: its end decides
            await runtime.wait_core(lambda core: core.binding_state != "stopping", STOP_WAIT)
    already = proven_stop(controller)
    if already is not None:
        return True, already
    client = await ControllerClient.connect(controller.socket_path)
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


def relaunch_command(args: argparse.Namespace, paths: dict[str, str], eligibility: str) -> str:
    """The exact command line that launches from `eligibility`: this serve's own, its paths absolute, with
    `--eligibility ID` (inside the loopback-only namespace when this one runs in it)."""
    program = [sys.argv[0]] if os.path.basename(sys.argv[0]) == PROG else [sys.executable, "-m", "mosaic.controller"]
    argv = [*program, "serve", "--fixture-root", paths["root"], "--session", paths["session"],
            "--socket", paths["socket"], "--pi-dir", paths["pi_dir"]]
    for flag, value in (("--claim-root", args.claim_root), ("--home", args.home), ("--grants", args.grants),
                        ("--engine-uid-state", args.engine_uid_state), ("--log", getattr(args, "log", None))):
        if value:
            argv += [flag, os.path.abspath(value)]
    if args.engine_uids:
        argv += ["--engine-uids", args.engine_uids]
    if args.scripted_model:
        argv.append("--scripted-model")
    for flag, on in (("--answer-dialogs", getattr(args, "answer_dialogs", False)),
                     ("--fixture-extension", getattr(args, "fixture_extension", False))):
        if on:  # the fixture extension is in the sealed argv, so its pin: a relaunch without it would not match
            argv.append(flag)
    if (args.provider, args.model) != ("fakeprov", "fake-model-1"):
        argv += ["--provider", args.provider, "--model", args.model]
    if getattr(args, "debug", False):
        argv.append("--debug")
    argv += ["--eligibility", eligibility]
    with contextlib.suppress(OSError):
        if os.environ.get("MOSAIC_NETNS") == str(os.stat("/proc/self/ns/net").st_ino):
            argv = [sys.executable, "-m", "mosaic.pi_rpc.testing.netns", "--", *argv]
    return shlex.join(argv)


async def serve(args: argparse.Namespace) -> int:
    from mosaic.cgroup_cohort import FixtureVerifier  # noqa: PLC0415
    from mosaic.cgroup_cohort.testing.account import EngineAccountError, engine_account  # noqa: PLC0415
    from mosaic.pi_rpc.seal import FIXTURE_EXTENSION_ENV  # noqa: PLC0415
    from mosaic.pi_rpc.testing import ModelServer, models_json  # noqa: PLC0415
    from mosaic.safe_open import Refusal  # noqa: PLC0415

    from .core._access import Grants  # noqa: PLC0415
    from .engines.pi._spec import PiSpec  # noqa: PLC0415
    from .lifecycle._eligibility import ELIGIBILITY_ID_RE  # noqa: PLC0415
    from .lifecycle._engine_uids import EngineUids  # noqa: PLC0415
    from .lifecycle._launching import LaunchingController, Placement  # noqa: PLC0415
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
    if args.eligibility is not None and not ELIGIBILITY_ID_RE.fullmatch(args.eligibility):
        raise CliRefused(f"--eligibility {args.eligibility!r} is not an eligibility ID (elig- and 32 hex digits, "
                         "as the recover printed it)")
    grants = Grants.load(args.grants) if args.grants else None  # refused before anything is made
    uid_range = _engine_uid_range(args)
    made = _Made()
    controller: LaunchingController | None = None
    recovered: list[str] = []

    def on_recovered(record: EligibilityRecord) -> str:
        """A client's recover wrote its record: say the command that launches from it (and give it to the
        client, whose reply carries it)."""
        command = relaunch_command(args, paths, record.id)
        recovered.append(command)
        say(f"a client recovered the conversation: eligibility {record.id} (new claim {record.claim_id}, generation "
            f"{record.generation}); to launch from it, stop this serve (Ctrl-C), then run:")
        say("  ", exact=command)
        return f"stop this controller's serve (Ctrl-C there), then run: {command}"
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
        home = os.path.join(paths["root"], "home")
        env = {"HOME": home, "PATH": "/usr/bin:/bin", "PI_CODING_AGENT_DIR": agent}
        if args.fixture_extension:
            env.update(FIXTURE_EXTENSION_ENV)  # jiti's transpile cache off (pi-rpc `check_fixture_env`)
        engine_uids = None
        if uid_range is not None:
            engine_uids = EngineUids(uid_range[0], uid_range[1], engine.gid, _engine_uid_state(args.engine_uid_state))
        controller = LaunchingController(
            Placement(fixture_root=paths["root"], claim_root=paths["claims"], session_file=paths["session"],
                      socket_dir=socket_dir, home=paths["home"]),
            PiSpec(env=env, pi_dir=pi_dir, provider=args.provider, model=args.model,
                       state_dirs=(agent, home) if engine_uids is not None else (),
                       fixture_extension=args.fixture_extension),
            made.route.launcher, verifier=FixtureVerifier(), manager=made.route.manager, grants=grants,
            eligibility=args.eligibility, on_recovered=on_recovered, engine_uids=engine_uids,
            dialogs=args.answer_dialogs)
        try:
            await controller.start()
        except Refusal as e:
            waiting = controller.reserved_for
            if waiting is None:
                raise
            raise CliRefused(f"refused: {e.code}: the session is reserved for eligibility {waiting} (a client's "
                             "recover issued it); launch from it with: ",
                             command=relaunch_command(args, paths, waiting) + "  (or give it up: mosaic-claims "
                             f"release-reservation --claim-root {paths['claims']} {waiting})") from None
        execution = controller.execution
        assert execution is not None
        ref = execution.ref
        uid = engine.uid if execution.claim.engine_uid is None else execution.claim.engine_uid
        where = f"in {ref.unit} (engine pid {ref.engine.pid}, uid {uid})" if ref is not None else \
            "with no engine attached"
        say(f"serving {controller.socket_path}: claim {execution.claim.claim_id} ({controller.mode}) {where}; "
            "SIGINT, SIGTERM or SIGHUP force stops the engine and exits")
        await stop.wait()
        name = signal.Signals(got[0]).name
        if proven_stop(controller) is None:
            say(f"{name}: force stopping the engine")
        else:
            say(f"{name}: stopping")
        stopped, said = await _stop_engine(controller)
        say(said, err=not stopped)
        if recovered:
            say("the recovery waits for its launch: ", exact=recovered[-1])
        return 0 if stopped else EXIT_NOT_STOPPED
    finally:
        if controller is not None:
            await controller.aclose()
        left = made.close()
        if left:
            tell(f"left in place: {'; '.join(left)}; serve the same session again to force stop it")


def main(argv: Sequence[str] | None = None) -> int:
    """Run mosaic-controller; returns the exit status (see the module docstring)."""
    args = _parser().parse_args(argv)
    try:
        _logging(args)
        if args.command == "fixture":
            return make_fixture(args)
        return asyncio.run(serve(args))
    except CliRefused as e:
        tell(f"{PROG}: {e}", exact=e.command)
        return EXIT_REFUSED
    except KeyboardInterrupt:  # before the loop's own handlers were in place: nothing was made yet
        tell(f"{PROG}: interrupted")
        return 128 + signal.SIGINT
    except Exception as e:  # noqa: BLE001 - a refusal is one line; anything else is a crash, said in one line
        from mosaic.safe_open import Refusal  # noqa: PLC0415

        from .plain import plain_message  # noqa: PLC0415

        if isinstance(e, Refusal):
            tell(f"{PROG}: refused: {e.code}: {plain_message(e.message)}")
            return EXIT_REFUSED
        first = str(e).splitlines()[0] if str(e) else ""
        debug = getattr(args, "debug", False) or bool(os.environ.get("MOSAIC_TRACEBACK"))
        tell(f"{PROG}: crashed (a bug): {type(e).__name__}: {first}"
             + ("; the traceback follows" if debug else "; --debug (or MOSAIC_TRACEBACK=1) shows the traceback"))
        if debug:
            traceback.print_exc()
        return EXIT_CRASH


if __name__ == "__main__":
    sys.exit(main())
