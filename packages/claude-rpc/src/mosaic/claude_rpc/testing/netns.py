"""Run a command in a fresh network namespace whose only interface is loopback, up.

``python -m mosaic.claude_rpc.testing.netns -- CMD [ARGS...]`` unshares this process's network namespace
(``unshare(CLONE_NEWNET)``; where that is not permitted, a new user namespace with it, mapping the caller's
uid and gid), brings ``lo`` up (pyroute2 when installed, else ``ip link set lo up``), checks that ``lo`` is
the only interface, that 127.0.0.1 accepts a connection and that an outside address is unreachable, then
``exec``s the command with ``MOSAIC_NETNS`` set to the namespace's inode (``/proc/self/ns/net``), so a test
can assert it runs inside the namespace this tool made. Exit 3 with one line when no such namespace can be
made; the command never runs then.

claude-rpc keeps its own copy of this small tool (the layers rule lets it import safe-open only); pi-rpc's
``mosaic.pi_rpc.testing.netns`` is the same idea for the Pi suites.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["enter_fresh_netns", "interfaces", "main", "outside_unreachable"]

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000


def _unshare(flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(ctypes.c_int(flags)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def interfaces() -> list[str]:
    """The interfaces of this process's network namespace, from the kernel's ``/proc/self/net/dev``."""
    with open("/proc/self/net/dev") as f:
        rows = f.read().splitlines()[2:]
    return sorted(row.split(":", 1)[0].strip() for row in rows if ":" in row)


def outside_unreachable(address: str = "192.0.2.1", port: int = 9) -> bool:
    """True when a TCP connect to an outside address (TEST-NET-1 by default) fails at once for want of a
    route."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2.0)
    try:
        s.connect((address, port))
    except OSError as exc:
        return exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EACCES, errno.EPERM)
    finally:
        s.close()
    return False


def _loopback_accepts() -> bool:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        socket.create_connection(srv.getsockname(), timeout=2.0).close()
        return True
    except OSError:
        return False
    finally:
        srv.close()


def _lo_up() -> None:
    try:
        from pyroute2 import IPRoute  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        return
    with IPRoute() as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")


def enter_fresh_netns() -> str:
    """Move this process into a fresh network namespace with only ``lo``, up; return how (``"netns"`` or
    ``"userns+netns"``). ``OSError`` when neither is permitted, ``RuntimeError`` when the result is not
    loopback-only."""
    try:
        _unshare(CLONE_NEWNET)
        how = "netns"
    except OSError as first:
        uid, gid = os.getuid(), os.getgid()
        try:
            _unshare(CLONE_NEWUSER | CLONE_NEWNET)
        except OSError as second:
            raise OSError(second.errno, f"unshare(CLONE_NEWNET): {first}; with a user namespace: {second}") \
                from None
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1\n"), ("gid_map", f"{gid} {gid} 1\n")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        how = "userns+netns"
    _lo_up()
    if interfaces() != ["lo"]:
        raise RuntimeError(f"the fresh namespace has interfaces {interfaces()}, expected only lo")
    if not outside_unreachable():
        raise RuntimeError("an outside address is reachable from the fresh namespace")
    if not _loopback_accepts():
        raise RuntimeError("127.0.0.1 does not accept connections: lo is not up")
    return how


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        print("usage: python -m mosaic.claude_rpc.testing.netns -- CMD [ARGS...]", file=sys.stderr)
        return 2
    try:
        how = enter_fresh_netns()
    except (OSError, RuntimeError) as exc:
        print(f"netns: cannot make a loopback-only network namespace: {exc}", file=sys.stderr)
        return 3
    os.environ["MOSAIC_NETNS"] = str(os.stat("/proc/self/ns/net").st_ino)
    os.environ["MOSAIC_NETNS_HOW"] = how
    os.execvp(args[0], args)


def __dir__() -> list[str]:
    return sorted(__all__)


if __name__ == "__main__":
    raise SystemExit(main())
