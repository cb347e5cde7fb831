"""mosaic-read: the reader on the command line (catalogue, open, next, follow, serve).

Output is JSON lines (one API result per line, exactly what the API returns) or readable text with --text.
Roots come from --spec DIR SEAT and --claude-spec DIR SEAT CLAUDE_DIR (repeatable) or a --config JSON
file; nothing has a default path. With --url
the commands ask a running `mosaic-read serve` over HTTP instead of reading in-process (cursors live in the
memory of the process that issued them, so `next` needs --url, or use `open --all` / `follow`). The
options before the command may also come after it.

An expected error (a bad --config, a missing file, an unreachable --url, output closed by `| head`,
Ctrl-C) ends with one line on stderr, `mosaic-read: ...`, and its exit status in EXIT_CODES; only a bug
prints a traceback, and it has an exit status of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from ._jsonout import dumps

if TYPE_CHECKING:  # imported where a command needs them, so `mosaic-read --help` stays fast
    from ._reader import Reader
    from ._sources import Roots

# What the public modules show of this module; the rest is the package's own.
__all__ = ["EXIT_CODES", "TOKEN_ENV", "main"]

PROG = "mosaic-read"
DISTRIBUTION = "mosaic-chat-pages"

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_OUTPUT_CLOSED = 4
EXIT_INTERNAL = 70  # sysexits.h EX_SOFTWARE: an internal software error
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command ended by Ctrl-C

#: Every exit status of mosaic-read: (name, meaning). The README's table is checked against this.
EXIT_CODES: Mapping[int, tuple[str, str]] = MappingProxyType({
    EXIT_OK: ("ok", "the last result was ok; serve: stopped by SIGINT, SIGTERM or SIGHUP"),
    EXIT_REFUSED: ("refused", "the last result was a refusal (the reader's, or the server guard's over --url); "
                              "catalogue: a root given (--spec, --config) was refused, said in one line"),
    EXIT_USAGE: ("usage", "bad arguments; a --spec PROJECT_ROOT that is not an absolute path; a missing or bad "
                          "--config (the line names the field); a missing or unsafe --token-file; a --url that carries a token; "
                          "a --host that is not loopback"),
    EXIT_UNREACHABLE: ("network", "--url could not be reached or did not answer with the routes' JSON; serve "
                                  "could not listen on its address"),
    EXIT_OUTPUT_CLOSED: ("output closed", "the output was closed before everything was written (a broken pipe, "
                                          "e.g. piped into `head`)"),
    EXIT_INTERNAL: ("internal error", "a bug in mosaic-read: the only case that prints a traceback"),
    EXIT_INTERRUPTED: ("interrupted", "Ctrl-C (SIGINT), e.g. a `follow` stopped by hand"),
})

# Controls, bidi and invisible characters are shown escaped in --text, so session content cannot drive
# or spoof the terminal (the seed's terminal rules, "The terminal").
_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028\u2029\u202a-\u202e"
                     "\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f\ud800-\udfff]")


class Failure(Exception):
    """An expected error: one line on stderr and its exit status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Stop(Exception):
    """serve was asked to stop by a signal (SIGTERM, SIGHUP)."""


def _safe(text: str) -> str:
    return _UNSAFE.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


class _Api:
    """The reader API in-process, or over HTTP against a running server (with its token, if any)."""

    def __init__(self, reader: Reader | None, url: str | None, token: str | None = None) -> None:
        self.reader = reader
        self.url = url.rstrip("/") if url else None
        self.token = token

    def _get(self, path: str, params: dict[str, str | None]) -> dict[str, Any]:
        import http.client  # noqa: PLC0415 - only --url needs HTTP (start-up cost)
        import urllib.error  # noqa: PLC0415
        import urllib.parse  # noqa: PLC0415
        import urllib.request  # noqa: PLC0415

        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        target = f"{self.url}{path}" + (f"?{query}" if query else "")
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        request = urllib.request.Request(target, headers=headers)
        try:
            try:
                with urllib.request.urlopen(request, timeout=60) as resp:
                    status, raw = resp.status, resp.read()
            except urllib.error.HTTPError as e:
                status, raw = e.code, e.read()
        except urllib.error.URLError as e:
            raise Failure(EXIT_UNREACHABLE, f"cannot reach {self.url}: {_reason(e.reason)}") from None
        except (OSError, http.client.HTTPException) as e:  # reset, timed out, a broken HTTP answer
            raise Failure(EXIT_UNREACHABLE, f"cannot reach {self.url}: {_reason(e)}") from None
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict) or "ok" not in body:
            raise Failure(EXIT_UNREACHABLE, f"{self.url} answered {status} without the routes' JSON "
                                            "(is it a mosaic-read server?)")
        return body

    def catalogue(self) -> dict[str, Any]:
        if self.reader is not None:
            return self.reader.catalogue()
        return self._get("/conversations", {})

    def open(self, conversation: str, branch: str | None) -> dict[str, Any]:
        if self.reader is not None:
            return self.reader.open(conversation=conversation, branch=branch)
        return self._get("/conversations/" + _quote(conversation), {"branch": branch})

    def next(self, cursor: str, conversation: str, branch: str | None) -> dict[str, Any]:
        if self.reader is not None:
            return self.reader.next(cursor=cursor, conversation=conversation, branch=branch)
        return self._get("/conversations/" + _quote(conversation), {"cursor": cursor, "branch": branch})


def _reason(error: object) -> str:
    """A short, plain reason for a connection failure (no exception class names)."""
    if isinstance(error, ConnectionRefusedError):
        return "connection refused (is `mosaic-read serve` running there?)"
    if isinstance(error, TimeoutError):
        return "timed out"
    if isinstance(error, OSError) and error.strerror:
        return str(error.strerror).lower()
    return str(error) or type(error).__name__


def _quote(segment: str) -> str:
    import urllib.parse  # noqa: PLC0415 - only --url needs it

    return urllib.parse.quote(segment, safe="")


def _read_file(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise Failure(EXIT_USAGE, f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise Failure(EXIT_USAGE, f"{what} {path}: is a directory") from None
    except OSError as e:
        raise Failure(EXIT_USAGE, f"{what} {path}: {(e.strerror or str(e)).lower()}") from None


def _roots(args: argparse.Namespace) -> Callable[[], Roots]:
    from ._sources import (  # noqa: PLC0415 - see the imports
        CLAUDE_HARNESS,
        RepositorySpec,
        SeatRegistration,
        roots_from_specs,
    )

    specs = [RepositorySpec(d, s, d) for d, s in (args.spec or [])]
    specs += [RepositorySpec(d, s, d, CLAUDE_HARNESS, c) for d, s, c in (args.claude_spec or [])]
    regs: list[SeatRegistration] = []
    if args.config:
        from ._config import ConfigError, load_config  # noqa: PLC0415 - msgspec only for --config

        try:
            more, regs = load_config(_read_file(args.config, "--config"))
        except ConfigError as e:
            raise Failure(EXIT_USAGE, f"--config {args.config}: {e}") from None
        specs += more
    return lambda: roots_from_specs(specs, regs)


# -- tokens ----------------------------------------------------------------------------------------------


def _read_token(path: str) -> str:
    """The token in `path` (surrounding whitespace ignored). The file must be a regular file of this user
    that no other user may read or write (mode 0600 or stricter), as ssh asks of a private key."""
    from ._guard import check_token_text  # noqa: PLC0415

    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise Failure(EXIT_USAGE, f"--token-file {path}: no such file") from None
    except OSError as e:
        raise Failure(EXIT_USAGE, f"--token-file {path}: {(e.strerror or str(e)).lower()}") from None
    import stat  # noqa: PLC0415

    if not stat.S_ISREG(st.st_mode):
        raise Failure(EXIT_USAGE, f"--token-file {path}: not a regular file")
    if st.st_uid != os.geteuid():
        raise Failure(EXIT_USAGE, f"--token-file {path}: owned by uid {st.st_uid}, not by this user")
    if st.st_mode & 0o077:
        raise Failure(EXIT_USAGE, f"--token-file {path}: other users may read it (mode "
                                  f"{stat.S_IMODE(st.st_mode):04o}); chmod 600 it")
    try:
        return check_token_text(_read_file(path, "--token-file").decode("ascii", "replace").strip())
    except ValueError as e:
        raise Failure(EXIT_USAGE, f"--token-file {path}: {e}") from None


def _runtime_dir() -> str:
    """$XDG_RUNTIME_DIR when it is a directory of this user that only this user may enter, else the
    system's temporary directory (the file itself is created 0600 there, exclusively)."""
    import tempfile  # noqa: PLC0415

    run = os.environ.get("XDG_RUNTIME_DIR", "")
    try:
        st = os.stat(run) if os.path.isabs(run) else None
    except OSError:
        st = None
    if st is not None and st.st_uid == os.geteuid() and not st.st_mode & 0o077:
        return run
    return tempfile.gettempdir()


def _write_token(token: str) -> str:
    """A new file holding `token`, mode 0600, created exclusively (mkstemp: O_CREAT|O_EXCL, 0600)."""
    import tempfile  # noqa: PLC0415

    fd, path = tempfile.mkstemp(prefix="mosaic-read-", suffix=".token", dir=_runtime_dir())
    try:
        os.write(fd, token.encode("ascii") + b"\n")
    except OSError:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)
    return path


#: The environment variable `--url` takes the server's token from when no --token-file is given. A process's
#: environment (/proc/<pid>/environ) is readable by its own uid and root only; its command line
#: (/proc/<pid>/cmdline) by every local uid, so a token never travels in argv.
TOKEN_ENV = "MOSAIC_READ_TOKEN"

_TOKEN_IN_URL = (f"--url carries a token, and a command line is readable by every local user (/proc/<pid>/cmdline): "
                 f"give the base URL, with the token in --token-file FILE or in the {TOKEN_ENV} environment variable")


def _split_url(url: str) -> str:
    """The base URL of --url: `http://host:port`, optionally with the path `/conversations`. A URL that carries
    a token (the `token` query parameter, or a user or password before the host) is refused: a secret never
    travels in argv. Raises Failure(usage) for that and for anything else; the message never repeats the URL's
    query or user part."""
    import urllib.parse  # noqa: PLC0415

    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.netloc:
        raise Failure(EXIT_USAGE, "--url: give the http:// base URL `mosaic-read serve` printed as \"serving\"")
    query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
    if TOKEN_PARAM_NAME in query or "@" in parts.netloc:
        raise Failure(EXIT_USAGE, _TOKEN_IN_URL)
    if parts.query or parts.fragment:
        raise Failure(EXIT_USAGE, "--url: give the base URL, with no query or fragment")
    path = parts.path.rstrip("/")
    path = path.removesuffix("/conversations")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _url_token(args: argparse.Namespace) -> str | None:
    """The token --url sends: --token-file's, else the TOKEN_ENV environment variable's (checked as a token
    file's is), else None."""
    if args.token_file:
        return _read_token(args.token_file)
    from_env = os.environ.get(TOKEN_ENV)
    if from_env is None:
        return None
    from ._guard import check_token_text  # noqa: PLC0415

    try:
        return check_token_text(from_env.strip())
    except ValueError as e:
        raise Failure(EXIT_USAGE, f"{TOKEN_ENV}: {e}") from None


#: The query parameter a browser URL carries the token in (`_guard.TOKEN_PARAM`; named here so that --help
#: does not import the guard).
TOKEN_PARAM_NAME = "token"


# -- output ----------------------------------------------------------------------------------------------


def _emit(result: dict[str, Any], text: bool, out: TextIO) -> None:
    _write(result, text, out)
    out.flush()  # each result as it comes: a follow streams, and a closed pipe shows at once


def _write(result: dict[str, Any], text: bool, out: TextIO) -> None:
    if not text:
        out.write(dumps(result) + "\n")
        return
    if not result.get("ok"):
        r = result.get("refusal") or result
        out.write(f"refused: {r.get('code', r.get('error'))} (reconcile: {r.get('reconcile')}) "
                  f"{_safe(str(r.get('message')))}\n")
        return
    if "conversations" in result:
        for row in result["conversations"]:
            where = f"{_safe(row['project'])}/{_safe(row['seat'])}"
            if row["kind"] == "unsupported":
                out.write(f"{row['id']}  {where}  unsupported-harness ({_safe(row['harness'])})\n")
                continue
            state = "ok" if row["refusal"] is None else f"refused: {row['refusal']['code']}"
            harness = f"  ({_safe(row['harness'])})" if row.get("harness", "pi") != "pi" else ""
            out.write(f"{row['id']}  {where}/{_safe(row['file'])}  {row['size']} bytes  {state}{harness}\n")
        for bad in result["refusedRoots"]:
            out.write(f"root refused: {_safe(bad['projectRoot'])} seat {_safe(bad['seat'])}: "
                      f"{bad['refusal']['code']}\n")
        return
    page = result["page"]
    view = result["view"]
    out.write(f"== {page['conversation']} branch {page['branch']} (default {view['defaultBranch']}; "
              f"{view['branchCount']} branches{'; incomplete' if view['incomplete'] else ''})\n")
    for part in page["parts"]:
        label = f"{part['kind']} {part['item']}" + (f" (part {part['index'] + 1})" if part["index"] else "")
        out.write(f"-- line {part['line']}: {label}\n")
        if part.get("notice"):
            out.write(f"   notice {part['notice']['code']}: {_safe(part['notice']['message'])}\n")
        for block in part["blocks"]:
            kind = block["kind"]
            body = block.get("value") if kind == "fragment" else (
                block.get("text") or block.get("arguments") or block.get("mimeType") or block.get("type") or "")
            name = f" {block['name']}" if kind == "toolCall" and block.get("name") else ""
            shown = _safe(str(body)).replace("<U+000A>", "\n   ")
            out.write(f"   [{kind}{name}] {shown}\n")
    tail = "more: " + result["cursor"]["id"] if result["cursor"] else "end; follow: " + result["follow"]["id"]
    out.write(f"== {tail}\n")


# -- the parser ------------------------------------------------------------------------------------------


class _Version(argparse.Action):
    """--version: the installed distribution's version, looked up only when asked (importlib.metadata
    costs start-up time every other command would pay)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> NoReturn:
        from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

        try:
            number = version(DISTRIBUTION)
        except PackageNotFoundError:
            number = "unknown (not installed)"
        sys.stdout.write(f"{PROG} {number} ({DISTRIBUTION})\n")
        parser.exit(0)


#: The options that may stand before or after the command: (flags, argparse keywords).
_SHARED: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("--spec",), {"nargs": 2, "action": "append", "metavar": ("PROJECT_ROOT", "SEAT"),
                   "help": "an approved root: <PROJECT_ROOT>/.pi/state/<SEAT>/sessions (repeatable)"}),
    (("--claude-spec",), {"nargs": 3, "action": "append", "metavar": ("PROJECT_ROOT", "SEAT", "CLAUDE_DIR"),
                          "help": "an approved Claude Code seat: the sessions its launcher receipts "
                                  "(<PROJECT_ROOT>/.pi/state/<SEAT>/session-id, launches/*/session-id) name, read "
                                  "under <CLAUDE_DIR>/projects/ (its config directory; repeatable)"}),
    (("--config",), {"metavar": "FILE",
                     "help": 'JSON file: {"specs": [{"projectRoot", "seat", "layoutRepo", "harness", "claudeRoot"}], '
                             '"registrations": [{"seat", "harness", "layoutRepo", "project", "sessionsDir", '
                             '"startedAt"}]}'}),
    (("--url",), {"metavar": "URL", "help": "use a running `mosaic-read serve` at this base URL (the \"serving\" it printed); the "
                          f"token comes from --token-file or ${TOKEN_ENV}, never from the URL"}),
    (("--token-file",), {"metavar": "FILE", "help": "the server's token (a file of yours, mode 0600): serve "
                                                    f"uses it, --url sends it (else ${TOKEN_ENV})"}),
    (("--text",), {"action": "store_true", "help": "readable text instead of JSON lines"}),
)
_LATE = "late_"

#: The GIL hand-over interval `serve` sets for its own process (CPython's default is 5 ms). A thread back
#: from a system call waits up to one interval for the GIL while another thread parses (pure Python), and
#: the catalogue makes dozens of system calls: with 5 ms it ran at 3-5x its idle time beside a slow parse,
#: with 1 ms within about 2x (README, "Lanes"; bench_load.py). The library never changes it: it is the
#: host process's setting.
SERVE_SWITCH_INTERVAL = 0.001


def _add_shared(parser: argparse.ArgumentParser, late: bool) -> None:
    """The shared options; after the command they land in `late_<name>` (argparse would otherwise let the
    command's defaults overwrite what was given before it)."""
    for flags, kw in _SHARED:
        dest = flags[0].removeprefix("--").replace("-", "_")
        if late:
            parser.add_argument(*flags, dest=_LATE + dest, default=argparse.SUPPRESS, **kw)
        else:
            parser.add_argument(*flags, dest=dest, **kw)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Read Pi and Claude Code session histories, read-only.",
                                epilog="exit status: " + ", ".join(f"{k} {name}" for k, (name, _) in EXIT_CODES.items()))
    p.add_argument("--version", action=_Version, help="print the version and exit")
    _add_shared(p, late=False)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help, description=help)
        _add_shared(c, late=True)
        return c

    command("catalogue", "list the approved conversations")
    o = command("open", "the first page (--all: every page) of a conversation")
    o.add_argument("conversation")
    o.add_argument("--branch")
    o.add_argument("--all", action="store_true")
    n = command("next", "the next page for a cursor (needs --url: cursors live in the server)")
    n.add_argument("cursor")
    n.add_argument("conversation")
    n.add_argument("branch")
    f = command("follow", "read every page, then poll the follow cursor for appended parts")
    f.add_argument("conversation")
    f.add_argument("--branch")
    f.add_argument("--polls", type=int, default=0, help="stop after this many polls (0: until interrupted)")
    f.add_argument("--interval", type=float, default=1.0)
    s = command("serve", "serve the two GET routes on loopback (a token is required unless --no-token)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8765)
    s.add_argument("--no-token", action="store_true",
                   help="serve without a token: every local user may then read what this user can")
    return p


def _merge_late(args: argparse.Namespace) -> None:
    """Fold the options given after the command into those given before it: --spec adds up, the others
    take the later value."""
    for name, value in list(vars(args).items()):
        if not name.startswith(_LATE):
            continue
        base = name.removeprefix(_LATE)
        if base in ("spec", "claude_spec"):
            setattr(args, base, (getattr(args, base) or []) + value)
        elif base == "text":
            args.text = args.text or value
        else:
            setattr(args, base, value)
        delattr(args, name)


# -- main ------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run mosaic-read; returns the exit status (EXIT_CODES). An expected error prints one line on stderr;
    a bug prints its traceback and returns EXIT_INTERNAL."""
    stream = sys.stdout if out is None else out
    try:
        return _main(argv, stream)
    except Failure as e:
        return _fail(e.status, e.message)
    except KeyboardInterrupt:
        return _fail(EXIT_INTERRUPTED, "interrupted")
    except BrokenPipeError:
        if stream is sys.stdout:
            _silence_stdout()
        return _fail(EXIT_OUTPUT_CLOSED, "output closed before the end (broken pipe)")
    except Exception:
        import traceback  # noqa: PLC0415

        traceback.print_exc()
        return _fail(EXIT_INTERNAL, "internal error: this is a bug in mosaic-read; the traceback above is the report")


def _fail(status: int, message: str) -> int:
    """Say `message` as mosaic-read's one line on stderr; returns `status`."""
    try:
        print(f"{PROG}: {message}", file=sys.stderr, flush=True)
    except OSError:
        pass  # stderr is gone too: the status still says it
    return status


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of what is still buffered does not
    raise a second BrokenPipeError at exit (the Python documentation's advice for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _main(argv: Sequence[str] | None, out: TextIO) -> int:
    p = _parser()
    args = p.parse_args(argv)
    _merge_late(args)
    if args.command == "serve":
        if args.url is not None:
            p.error("serve reads in-process: give --spec, --claude-spec or --config, not --url")
        if args.no_token and args.token_file:
            p.error("--no-token and --token-file contradict each other")
    if args.url is None and not (args.spec or args.claude_spec or args.config):
        p.error("give --spec PROJECT_ROOT SEAT (or --claude-spec, or --config FILE), or --url of a running server")
    for root, seat in args.spec or []:
        if not os.path.isabs(root):
            raise Failure(EXIT_USAGE, f"--spec {root} {seat}: PROJECT_ROOT must be an absolute path (the project "
                                      f"directory, e.g. {os.path.abspath(root)})")
    if args.url is None:
        from ._reader import create_reader  # noqa: PLC0415 - a command runs: now the reader is needed

        reader: Reader | None = create_reader(_roots(args))
        api = _Api(reader, None)
    else:
        api = _Api(None, _split_url(args.url), _url_token(args))

    if args.command == "serve":
        assert api.reader is not None
        return _serve(api.reader, args, out)
    if args.command == "catalogue":
        result = api.catalogue()
        _emit(result, args.text, out)
        refused = (result.get("refusedRoots") or []) if result.get("ok") else []
        if refused:  # a root given that cannot be read: a wrong or missing project directory, or seat
            first = refused[0]
            more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
            raise Failure(EXIT_REFUSED, f"root {_safe(str(first['projectRoot']))} seat {_safe(str(first['seat']))} "
                                        f"refused: {first['refusal']['code']}: "
                                        f"{_safe(str(first['refusal']['message']))}{more}")
        return EXIT_OK if result.get("ok") else EXIT_REFUSED
    if args.command == "next":
        result = api.next(args.cursor, args.conversation, args.branch)
        _emit(result, args.text, out)
        return EXIT_OK if result.get("ok") else EXIT_REFUSED

    result = api.open(args.conversation, args.branch)
    _emit(result, args.text, out)
    read_all = args.command == "follow" or args.all
    while read_all and result.get("ok") and result["cursor"] is not None:
        result = api.next(result["cursor"]["id"], args.conversation, result["page"]["branch"])
        _emit(result, args.text, out)
    if args.command == "follow":
        polls = 0
        while result.get("ok") and (args.polls == 0 or polls < args.polls):
            time.sleep(args.interval)  # polling the file for growth; not test synchronisation
            polls += 1
            cursor = result["follow"] or result["cursor"]
            result = api.next(cursor["id"], args.conversation, result["page"]["branch"])
            if not result.get("ok") or result["page"]["parts"]:
                _emit(result, args.text, out)
    return EXIT_OK if result.get("ok") else EXIT_REFUSED


def _serve(reader: Reader, args: argparse.Namespace, out: TextIO) -> int:
    """Serve until SIGINT, SIGTERM or SIGHUP; then close, remove the token file it made, and return 0.
    Prints one JSON line: {"serving": base URL, "tokenFile": the token's file, "browserUrl": the catalogue's
    URL with the token, for a browser only (README "mosaic-read")}.

    The stop is one-shot: the first of those signals ends serving and every later one is ignored from then
    on, for the rest of the process (which is ending), so a second signal while the server closes (`timeout`
    signals its child, then the child's group) cannot turn the clean stop into a traceback."""
    from ._guard import new_token  # noqa: PLC0415
    from ._server import ReaderServer  # noqa: PLC0415 - only `serve` needs the server (asyncio)

    made: str | None = None
    if args.no_token:
        token: str | None = None
    elif args.token_file:
        token = _read_token(args.token_file)
    else:
        token = new_token()
        try:
            made = _write_token(token)
        except OSError as e:
            raise Failure(EXIT_USAGE, f"cannot write the token file: {(e.strerror or str(e)).lower()}") from None
    sys.setswitchinterval(SERVE_SWITCH_INTERVAL)  # this process is the server (see SERVE_SWITCH_INTERVAL)
    stop = _OneShotStop()
    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    # Only this thread takes the stop signals: the server's threads, started while they are blocked here,
    # keep them blocked (a thread inherits its creator's mask); this thread lets them in once it waits.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        try:
            try:
                server = ReaderServer(reader, args.host, args.port, token=token, require_token=not args.no_token)
            except ValueError as e:
                raise Failure(EXIT_USAGE, f"--host {args.host}: {e}") from None
            except OSError as e:
                raise Failure(EXIT_UNREACHABLE, f"cannot listen on {args.host}:{args.port}: "
                                                f"{(e.strerror or str(e)).lower()}") from None
            try:
                server.start()
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                out.write(json.dumps({"serving": server.url, "tokenFile": made or args.token_file,
                                      "browserUrl": server.token_url}) + "\n")
                out.flush()
                while True:
                    signal.pause()
            finally:
                server.close()
        except (KeyboardInterrupt, _Stop) as e:
            name = "SIGINT" if isinstance(e, KeyboardInterrupt) else str(e)
            _fail(EXIT_OK, f"stopped serving ({name})")  # the normal end of serve: status 0
    finally:
        if stop.fired:
            # Stopped by a signal: the later ones stay ignored while the process ends (a Python handler would
            # be reset to the default one when the interpreter finalizes). Safe only now: every thread blocks
            # them, so none is caught between the C handler and this handler (CPython then prints "Signal N
            # ignored due to race condition"), and the pending ones are discarded.
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)
        else:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if made is not None:
            os.unlink(made)
    return EXIT_OK


#: The signals that stop `serve`.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _OneShotStop:
    """serve's handler of STOP_SIGNALS: the first one raises `_Stop` and blocks all of them from then on
    (serve ignores them once the server is closed); a later one already caught when the first was handled
    (delivered before the block took effect) does nothing. Either way the close the first began runs to its
    end. The handler is never swapped for SIG_IGN while a signal may be in flight: CPython reports a caught
    signal whose handler became SIG_IGN as an unraisable OSError on stderr."""

    def __init__(self) -> None:
        self.fired = False

    def __call__(self, signum: int, frame: object) -> None:
        if self.fired:
            return
        self.fired = True
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        raise _Stop(signal.Signals(signum).name)
