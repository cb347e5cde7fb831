"""Run a command in a fresh network namespace whose only interface is loopback, up.

``python -m mosaic.pi_rpc.testing.netns -- CMD [ARGS...]`` unshares the network namespace of this process
(``unshare(CLONE_NEWNET)``; when that is not permitted, a new user namespace with it, mapping the caller's
uid and gid), brings ``lo`` up (pyroute2 when installed, else ``ip link set lo up``), checks that ``lo`` is
the only interface and that an outside address is unreachable, then ``exec``s the command. The smoke suite
runs inside it, so the sealed Pi and the scripted model server talk over 127.0.0.1 and nothing can leave the
machine even by mistake. Exit 3 with a message when no namespace can be made; the command never runs then.

``MOSAIC_NETNS`` in the command's environment holds the namespace's inode (``/proc/self/ns/net``), so a test
can assert it runs inside the namespace this tool made.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["enter_fresh_netns", "interfaces", "loopback_works", "main", "outside_unreachable"]

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000


def _unshare(flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(ctypes.c_int(flags)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def interfaces() -> list[str]:
    """The network interfaces of this process's namespace (``/sys/class/net`` is per namespace only after
    a remount, so the kernel's own list, ``/proc/self/net/dev``, is read)."""
    with open("/proc/self/net/dev") as f:
        rows = f.read().splitlines()[2:]
    return sorted(row.split(":", 1)[0].strip() for row in rows if ":" in row)


def _lo_up() -> None:
    try:
        from pyroute2 import IPRoute  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        return
    with IPRoute() as ipr:
        idx = ipr.link_lookup(ifname="lo")[0]
        ipr.link("set", index=idx, state="up")


def outside_unreachable(address: str = "192.0.2.1", port: int = 9) -> bool:
    """True when a TCP connect to an address outside the machine fails at once for want of a route (the
    default, 192.0.2.1, is TEST-NET-1: never routed even where a network exists)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2.0)
    try:
        s.connect((address, port))
    except OSError as exc:
        return exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EACCES, errno.EPERM)
    finally:
        s.close()
    return False


def enter_fresh_netns() -> str:
    """Move this process into a fresh network namespace with only ``lo``, up; return how (``"netns"`` or
    ``"userns+netns"``). Raises ``OSError`` when neither is permitted, ``RuntimeError`` when the result
    is not loopback-only."""
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
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1\n")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1\n")
        how = "userns+netns"
    _lo_up()
    found = interfaces()
    if found != ["lo"]:
        raise RuntimeError(f"the fresh namespace has interfaces {found}, expected only lo")
    if not outside_unreachable():
        raise RuntimeError("an outside address is reachable from the fresh namespace")
    if not loopback_works():
        raise RuntimeError("127.0.0.1 does not accept connections: lo is not up")
    return how


def loopback_works() -> bool:
    """True when a TCP connection to a listener on 127.0.0.1 succeeds (``lo`` is up)."""
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


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        print("usage: python -m mosaic.pi_rpc.testing.netns -- CMD [ARGS...]", file=sys.stderr)
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
