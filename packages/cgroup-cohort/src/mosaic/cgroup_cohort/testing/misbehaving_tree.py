"""A small misbehaving process tree standing in for the engine (stdlib only; runs under /usr/bin/python3).

Run as:  python3 misbehaving_tree.py '<spec JSON>'

The spec (all keys optional):
  sleepers        n processes that sleep (default SIGTERM kills them)
  term_ignorers   n processes that ignore SIGTERM
  setsid_daemon   a double-forked setsid() daemon that ignores SIGTERM (it leaves the engine's session and
                  process group; K1, K2)
  fork_loop       a TERM-ignoring process forking short-lived children in a loop (K12); "fork_cap"
                  bounds its live children; a fork the kernel refuses (EAGAIN at a limit) is tried again
  fork_storm      a tool call's fork storm (README "Limits"): a TERM-ignoring process forking children that live
                  on, as fast as it can, until a fork fails; it reports how many it made, the errno and
                  each child (pid, start time), then goes on trying every 2 ms. "storm_ceiling" (default
                  1024) is where it stops by itself, reporting errno null: a limit that does not hold
                  fails the test instead of filling the host's pid space
  subcgroup       an absolute cgroup path: one TERM-ignoring member mkdirs it and moves itself into it
                  (the recursive enumeration, K12)
  escape          a list of cgroup.procs paths: one TERM-ignoring member tries to write its own pid into each, in
                  order, stopping at the first that works, then stays alive wherever it is (K13)
  ack_term        on SIGTERM the engine prints {"type":"term-ack"} and exits, leaving its members (K3)
  ignore_term     the engine itself ignores SIGTERM
  fanout          n extra sleepers started by a helper (for the benchmark: many members quickly);
                  with "fanout_ignore_term" they and the helper ignore SIGTERM
  exit_on_eof     the engine exits when its stdin closes (otherwise it stays until killed)

Protocol on stdin/stdout (JSON lines, a tiny subset of Pi's RPC): {"type":"get_state"} answers
{"type":"response","command":"get_state","success":true,"data":{"pid":...}} (K4). Once every member has
reported (pid, start time, role and results) the engine prints {"type":"ready","members":[...]}.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

Body = Callable[[int, str], None]


def start_time(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    return int(text[text.rfind(")") + 1:].split()[19])


def report(fd: int, role: str, **extra: Any) -> None:
    line = json.dumps({"pid": os.getpid(), "startTime": start_time(), "role": role, **extra}) + "\n"
    os.write(fd, line.encode())


def sleep_forever() -> None:
    while True:
        signal.pause()


def member(fd: int, role: str, body: Body | None = None) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:
        if body is not None:
            body(fd, role)
        else:
            report(fd, role)
        os.close(fd)
        sleep_forever()
    finally:
        os._exit(0)


def term_ignorer(fd: int, role: str) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    report(fd, role)


def daemon(fd: int, role: str) -> None:
    # Classic double fork: the grandchild is in a new session, re-parented when its parent exits.
    if os.fork():
        os._exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a daemon that shrugs off TERM: only the kill phase ends it
    report(fd, role, sid=os.getsid(0), pgid=os.getpgid(0))
    os.close(fd)
    sleep_forever()


def fork_loop(cap: int) -> Body:
    def body(fd: int, role: str) -> None:
        # It forks on through SIGTERM (so it is still forking when the freeze comes) and so do its children.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        report(fd, role)
        os.close(fd)
        live = 0
        forks = 0
        while True:
            if live < cap:
                try:
                    child = os.fork()
                except BlockingIOError:  # EAGAIN: a task limit; reap and try again
                    child = -1
                if child == 0:
                    time.sleep(0.02 + (forks % 7) * 0.005)
                    os._exit(0)
                if child > 0:
                    live += 1
                    forks += 1
            while live:
                r, _ = os.waitpid(-1, os.WNOHANG)
                if r == 0:
                    break
                live -= 1
            if live >= cap:
                os.waitpid(-1, 0)
                live -= 1
    return body


def fork_storm(ceiling: int) -> Body:
    def body(fd: int, role: str) -> None:
        # Children that live on: the storm only grows. SIGTERM is ignored, so the freeze finds it still trying.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        children: list[list[int]] = []
        error = None
        while len(children) < ceiling:
            try:
                child = os.fork()
            except OSError as e:
                error = errno.errorcode.get(e.errno or 0, str(e.errno))
                break
            if child == 0:
                sleep_forever()
            children.append([child, start_time(child)])
        report(fd, role, forked=len(children), errno=error, children=children)
        os.close(fd)
        while error is not None:  # only a storm the kernel stopped goes on trying
            time.sleep(0.002)
            try:
                if os.fork() == 0:
                    sleep_forever()
            except OSError:
                pass
        sleep_forever()
    return body


def subcgroup(path: str) -> Body:
    def body(fd: int, role: str) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write("0")
        with open("/proc/self/cgroup") as f:
            now = [line[3:].strip() for line in f if line.startswith("0::")][0]
        report(fd, role, cgroup=now)
    return body


def escaper(targets: list[str]) -> Body:
    def body(fd: int, role: str) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        results = []
        for target in targets:
            try:
                with open(target, "w") as f:
                    f.write("0")
                results.append([target, "MOVED"])
                break
            except OSError as e:
                results.append([target, errno.errorcode.get(e.errno or 0, str(e.errno))])
        with open("/proc/self/cgroup") as f:
            now = [line[3:].strip() for line in f if line.startswith("0::")][0]
        report(fd, role, results=results, cgroup=now)
    return body


def fanout(n: int, ignore_term: bool) -> Body:
    def body(fd: int, role: str) -> None:
        if ignore_term:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for _ in range(n):
            if os.fork() == 0:
                report(fd, "fanout")
                os.close(fd)
                sleep_forever()
        report(fd, role)
    return body


def main() -> None:
    spec = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    r, w = os.pipe()
    expected = 0
    for i in range(spec.get("sleepers", 0)):
        member(w, f"sleeper{i}")
        expected += 1
    for i in range(spec.get("term_ignorers", 0)):
        member(w, f"term-ignorer{i}", term_ignorer)
        expected += 1
    if spec.get("setsid_daemon"):
        member(w, "setsid-daemon", daemon)
        expected += 1
    if spec.get("fork_loop"):
        member(w, "fork-loop", fork_loop(int(spec.get("fork_cap", 40))))
        expected += 1
    if spec.get("subcgroup"):
        member(w, "subcgroup", subcgroup(spec["subcgroup"]))
        expected += 1
    if spec.get("escape"):
        member(w, "escaper", escaper(spec["escape"]))
        expected += 1
    if spec.get("fanout"):
        member(w, "fanout-parent", fanout(int(spec["fanout"]), bool(spec.get("fanout_ignore_term"))))
        expected += 1 + int(spec["fanout"])
    if spec.get("fork_storm"):  # last: the members above have their tasks before the storm takes the rest
        member(w, "fork-storm", fork_storm(int(spec.get("storm_ceiling", 1024))))
        expected += 1
    os.close(w)
    buf = b""
    members: list[dict[str, Any]] = []
    while len(members) < expected:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            members.append(json.loads(line))
    os.close(r)

    def out(obj: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    if spec.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif spec.get("ack_term"):
        def on_term(*_: object) -> None:
            out({"type": "term-ack"})
            os._exit(0)
        signal.signal(signal.SIGTERM, on_term)
    # The engine never reaps: a member that dies stays a zombie until the engine dies, then re-parents to
    # the shim (a subreaper), which records how it died.
    out({"type": "ready", "pid": os.getpid(), "startTime": start_time(), "members": members})
    for text in sys.stdin:
        try:
            msg = json.loads(text)
        except ValueError:
            continue
        if msg.get("type") == "get_state":
            out({"type": "response", "command": "get_state", "success": True,
                 "data": {"pid": os.getpid(), "isStreaming": False}})
    if spec.get("exit_on_eof"):
        os._exit(0)
    sleep_forever()


if __name__ == "__main__":
    main()
