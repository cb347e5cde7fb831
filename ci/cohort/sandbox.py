#!/usr/bin/env python3
"""A private systemd user manager for the cohort suite (docs/cgroup-facts.md §2.1 and §8).

Brings up ``systemd --user`` as root or as an unprivileged user inside its own mount and cgroup
namespaces, rooted at a cgroup this harness creates under the host's cgroup2 mount, and tears it down by
the exact name it recorded (cgroup.kill, wait for populated 0, rmdir depth first).

Rules (facts §2.4, §7, §8):
* the cgroup2 mount is discovered from /proc/self/mountinfo (last cgroup2 entry with root "/");
* cgroup2 is mounted ONLY inside the new cgroup namespace (``unshare -m -C``), over a fresh tmpfs so that
  it never lands on the root of an existing cgroup2 mount (EBUSY); the host's mounts are never touched;
* ``/run/systemd/system`` must exist in the sandbox or the manager exits;
* every client (systemd-run, systemctl) first moves itself into ``<sandbox>/harness`` (inside the
  delegated tree), then enters the namespaces with nsenter;
* an unprivileged manager gets the same files chowned that systemd chowns for Delegate=yes.

Standalone (stdlib only) so the CI scripts can run it too:
    python3 ci/cohort/sandbox.py up [--user root|cohorttest]   -> prints a JSON record
    python3 ci/cohort/sandbox.py exec NAME -- systemctl --user is-system-running
    python3 ci/cohort/sandbox.py down NAME
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import secrets
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

STATE_DIR = os.path.join(tempfile.gettempdir(), "mosaic-cohort-sandboxes")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

INNER = r"""
set -eu
U="$1"; G="$2"; HOMEDIR="$3"; USERNAME="$4"; SYSTEMD="$5"
# Inside the new mount + cgroup namespace only. A tmpfs first, so cgroup2 never lands on the root of a
# mount of the same superblock (EBUSY on unified hosts, facts §7.5).
mount -t tmpfs -o mode=755,nosuid,nodev,noexec tmpfs /sys/fs/cgroup
mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /run
mkdir -p /run/systemd/system "/run/user/$U"
chown "$U:$G" "/run/user/$U"
chmod 700 "/run/user/$U"
ENVS="HOME=$HOMEDIR USER=$USERNAME LOGNAME=$USERNAME PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin XDG_RUNTIME_DIR=/run/user/$U"
if [ "$U" = 0 ]; then
  exec env -i $ENVS "$SYSTEMD" --user
else
  exec setpriv --reuid="$U" --regid="$G" --init-groups env -i $ENVS "$SYSTEMD" --user
fi
"""

OUTER = r"""
echo $$ > "$1/cgroup.procs"
shift
exec unshare -m -C --propagation private bash -c "$@"
"""


def cgroup2_mount() -> str:
    """The last cgroup2 mount whose root is "/" (facts §7.1). Raises RuntimeError if there is none."""
    found = None
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            if parts[sep + 1] == "cgroup2" and parts[3] == "/":
                found = parts[4].encode().decode("unicode_escape")
    if found is None:
        raise RuntimeError("no cgroup2 mount with root / in /proc/self/mountinfo")
    return found


def systemd_binary() -> str | None:
    for p in ("/lib/systemd/systemd", "/usr/lib/systemd/systemd"):
        if os.access(p, os.X_OK):
            return p
    return None


def available() -> str | None:
    """None when a sandbox can be started here, else the reason it cannot."""
    if os.geteuid() != 0:
        return "the sandbox needs root (it creates a cgroup under the cgroup2 root and mounts in a new namespace)"
    if systemd_binary() is None:
        return "no systemd binary (/lib/systemd/systemd)"
    for tool in ("unshare", "nsenter", "setpriv", "systemd-run", "systemctl"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    try:
        root = cgroup2_mount()
    except RuntimeError as e:
        return str(e)
    if not os.access(os.path.join(root, "cgroup.procs"), os.W_OK):
        return f"cgroup2 root {root} is not writable"
    return None


@dataclass
class Sandbox:
    name: str
    user: str
    uid: int
    gid: int
    home: str
    cgroup: str  # absolute host path of the sandbox's cgroup
    mpid: int  # the manager (same pid from setsid bash through unshare and setpriv to systemd)
    log: str

    @property
    def harness(self) -> str:
        return os.path.join(self.cgroup, "harness")

    @property
    def runtime_dir(self) -> str:
        return f"/run/user/{self.uid}"

    def prefix(self) -> list[str]:
        """argv prefix running a command as the manager's client: harness cgroup, its namespaces, its uid."""
        argv = ["bash", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.harness,
                "nsenter", "-t", str(self.mpid), "-m", "-C", "--"]
        if self.uid != 0:
            argv += ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups"]
        argv += ["env", "-i", f"HOME={self.home}", f"USER={self.user}", f"PATH={PATH}",
                 f"XDG_RUNTIME_DIR={self.runtime_dir}"]
        return argv

    def run(self, argv: list[str], *, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.prefix(), *argv], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def alive(self) -> bool:
        try:
            with open(f"/proc/{self.mpid}/cgroup", encoding="ascii"):
                pass
        except OSError:
            return False
        return os.path.isdir(self.cgroup)

    def save(self) -> str:
        os.makedirs(STATE_DIR, mode=0o700, exist_ok=True)
        path = os.path.join(STATE_DIR, f"{self.name}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(asdict(self), f)
        return path


def _events(cgroup: str) -> dict[str, str]:
    with open(os.path.join(cgroup, "cgroup.events"), encoding="ascii") as f:
        return dict(line.split(" ", 1) for line in f.read().split("\n") if line)


def _wait_unpopulated(cgroup: str, timeout: float) -> bool:
    fd = os.open(os.path.join(cgroup, "cgroup.events"), os.O_RDONLY | os.O_CLOEXEC)
    try:
        p = select.poll()
        p.register(fd, select.POLLPRI | select.POLLERR)
        deadline = time.monotonic() + timeout
        while True:
            os.lseek(fd, 0, os.SEEK_SET)
            text = os.read(fd, 4096).decode()
            if "populated 0" in text:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            p.poll(int(min(left, 0.05) * 1000) + 1)
    finally:
        os.close(fd)


def remove_cgroup(path: str, timeout: float = 10.0) -> None:
    """cgroup.kill, wait for populated 0, rmdir depth first. Missing is fine. Raises on failure."""
    if not os.path.isdir(path):
        return
    if _events(path).get("populated", "0").strip() == "1":
        with open(os.path.join(path, "cgroup.kill"), "w", encoding="ascii") as f:
            f.write("1")
        if not _wait_unpopulated(path, timeout):
            raise TimeoutError(f"{path}: still populated {timeout}s after cgroup.kill")
    for dirpath, _dirs, _files in list(os.walk(path, topdown=False)):
        for attempt in range(100):
            try:
                os.rmdir(dirpath)
                break
            except FileNotFoundError:
                break
            except OSError as e:
                if e.errno != 16 or attempt == 99:  # EBUSY while the last tasks are released
                    raise
                time.sleep(0.01)


def up(user: str = "root", *, name: str | None = None, timeout: float = 15.0) -> Sandbox:
    """Start a sandboxed user manager; returns when ``systemctl --user is-system-running`` says running."""
    reason = available()
    if reason is not None:
        raise RuntimeError(reason)
    pw = pwd.getpwnam(user)
    name = name or f"mosaic-cohort-sbx-{secrets.token_hex(4)}"
    root = cgroup2_mount()
    cg = os.path.join(root, name)
    os.mkdir(cg)  # EEXIST: never reuse a name
    logdir: str | None = None
    try:
        os.mkdir(os.path.join(cg, "harness"))
        if pw.pw_uid != 0:
            # What systemd chowns for Delegate=yes; cgroup.freeze/kill of the sandbox root stay root's.
            for rel in (".", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control",
                        "harness", "harness/cgroup.procs", "harness/cgroup.threads",
                        "harness/cgroup.subtree_control"):
                os.chown(os.path.join(cg, rel), pw.pw_uid, pw.pw_gid)
        logdir = tempfile.mkdtemp(prefix=f"{name}-")
        log = os.path.join(logdir, "manager.log")
        with open(log, "wb") as logf:
            proc = subprocess.Popen(
                ["bash", "-c", OUTER, "sandbox-outer", cg, INNER, "sandbox-inner",
                 str(pw.pw_uid), str(pw.pw_gid), pw.pw_dir, user, systemd_binary() or ""],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, start_new_session=True,
                env={"PATH": PATH},
            )
        sb = Sandbox(name, user, pw.pw_uid, pw.pw_gid, pw.pw_dir, cg, proc.pid, log)
        _PROCS[name] = proc
        sb.save()
        marker = f"/proc/{proc.pid}/root/run/user/{pw.pw_uid}/systemd/private"
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"manager exited rc={proc.returncode}: {open(log).read()[-2000:]}")
            if os.path.exists(marker):
                r = sb.run(["systemctl", "--user", "is-system-running"], timeout=10)
                state = r.stdout.strip()
                if state in ("running", "degraded"):
                    return sb
            time.sleep(0.02)
        with open(log, encoding="utf-8", errors="replace") as f:
            tail = f.read()[-2000:]
        raise TimeoutError(f"manager not running after {timeout}s (state {state!r}); log: {tail}")
    except BaseException:
        down_by_name(name, cgroup=cg)
        if logdir is not None:
            shutil.rmtree(logdir, ignore_errors=True)
        raise


_PROCS: dict[str, subprocess.Popen[bytes]] = {}


def down_by_name(name: str, *, cgroup: str | None = None) -> None:
    """Tear down the sandbox ``name`` (exact name): cgroup.kill its cgroup, wait, rmdir, reap."""
    state_path = os.path.join(STATE_DIR, f"{name}.json")
    if cgroup is None:
        try:
            with open(state_path, encoding="utf-8") as f:
                cgroup = json.load(f)["cgroup"]
        except FileNotFoundError:
            cgroup = os.path.join(cgroup2_mount(), name)
    assert cgroup is not None and os.path.basename(cgroup) == name
    remove_cgroup(cgroup)
    proc = _PROCS.pop(name, None)
    if proc is not None:
        proc.wait(timeout=10)
    log = None
    try:
        with open(state_path, encoding="utf-8") as f:
            log = json.load(f).get("log")
        os.unlink(state_path)
    except FileNotFoundError:
        pass
    if log and os.path.basename(os.path.dirname(log)).startswith(name + "-"):
        shutil.rmtree(os.path.dirname(log), ignore_errors=True)
    try:
        os.rmdir(STATE_DIR)  # only when no other sandbox is recorded there
    except OSError:
        pass


def down(sb: Sandbox) -> None:
    down_by_name(sb.name, cgroup=sb.cgroup)


def load(name: str) -> Sandbox:
    with open(os.path.join(STATE_DIR, f"{name}.json"), encoding="utf-8") as f:
        return Sandbox(**json.load(f))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up")
    p_up.add_argument("--user", default="root")
    p_up.add_argument("--name")
    p_exec = sub.add_parser("exec")
    p_exec.add_argument("name")
    p_exec.add_argument("argv", nargs=argparse.REMAINDER)
    p_down = sub.add_parser("down")
    p_down.add_argument("name")
    sub.add_parser("check")
    a = ap.parse_args(argv)
    if a.cmd == "check":
        reason = available()
        print(reason or "ok")
        return 0 if reason is None else 1
    if a.cmd == "up":
        sb = up(a.user, name=a.name)
        print(json.dumps(asdict(sb)))
        return 0
    if a.cmd == "exec":
        sb = load(a.name)
        args = a.argv[1:] if a.argv and a.argv[0] == "--" else a.argv
        return subprocess.call([*sb.prefix(), *args])
    down_by_name(a.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
