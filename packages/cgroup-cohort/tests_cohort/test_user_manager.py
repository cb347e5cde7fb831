"""The brief's own K13 design on this host: a user-owned systemd --user scope, the shim and the engine
as that same user, the engine in a cgroup namespace rooted at engine/, and no nsdelegate (facts §4.1).

The escape is NOT refused here, so K1 must end uncertain, recorded (brief §6 K13: "If not refused,
stopped is unavailable for real cohorts, and K1 expects uncertain").
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import tempfile

from mosaic.cgroup_cohort import ScopeLauncher, StopRequest, UserManager, force_stop
from mosaic.cgroup_cohort.testing import alive, kill_member, populated
from mosaic.safe_open import ProcessRef


def _line(fd: int, timeout: float = 30.0) -> dict:
    buf = b""
    while not buf.endswith(b"\n"):
        r, _, _ = select.select([fd], [], [], timeout)
        assert r, f"no line within {timeout}s"
        chunk = os.read(fd, 1)
        assert chunk, f"stream closed after {buf!r}"
        buf += chunk
    return json.loads(buf)


def test_K13_brief_design_same_uid_user_scope_escapes_and_K1_is_uncertain(
    user_manager, vendored_shim, stage, engine_credentials, run_marker
):
    sockets = tempfile.mkdtemp(prefix=f"mosaic-cohort-usock-{run_marker}-")
    os.chown(sockets, engine_credentials.uid, engine_credentials.gid)
    os.chmod(sockets, 0o700)
    manager = UserManager(user_manager.prefix())
    launcher = ScopeLauncher(manager, sockets, engine=None, cgroupns=True, shim_python="/usr/bin/python3",
                             shim_path=vendored_shim, shim_uid=engine_credentials.uid)
    unit = f"cohort-claim-{os.urandom(16).hex()}.scope"
    unit_view = f"/sys/fs/cgroup/app.slice/{unit}"
    spec = {"setsid_daemon": True, "term_ignorers": 1,
            "escape": [os.path.join(unit_view, "supervisor", "cgroup.procs")]}
    handle = launcher.launch(unit, ["/usr/bin/python3", os.path.join(stage, "misbehaving_tree.py"), json.dumps(spec)],
                             env={"PATH": "/usr/bin:/bin", "MOSAIC_COHORT_RUN": run_marker}, cwd=stage)
    started = [handle.ref.engine]
    stdin_fd, stdout_fd = handle.take_stdio()
    try:
        ready = _line(stdout_fd)
        started += [ProcessRef(m["pid"], m["startTime"]) for m in ready["members"]]
        hello = handle.hello
        assert hello["engineUid"] == engine_credentials.uid and hello["engineUserns"] is True
        assert hello["invocationId"] and hello["invocationId"] == hello["invocationIdEnv"]
        assert hello["nsdelegate"] is False
        # The launch canary escaped: containment does not hold on this host for this design.
        assert not handle.ref.containment.held
        assert handle.ref.containment.attempts[-1][1] == "MOVED"
        (esc,) = [m for m in ready["members"] if m["role"] == "escaper"]
        assert esc["results"][-1][1] == "MOVED"
        escaper = ProcessRef(esc["pid"], esc["startTime"])
        result = force_stop(handle.ref, StopRequest("stop-u", "pi-u", "exec-u", {"confirmation": "c"}),
                            manager=manager, grace=0.3)
        assert result.outcome.state == "uncertain" and result.proof is None
        assert result.outcome.reason == "containment-not-held"
        engine_host = os.path.join(user_manager.cgroup, "app.slice", unit, "engine")
        assert populated(engine_host) is False  # engine/ reads empty ...
        assert alive(escaper)  # ... and a member of the cohort is alive in supervisor/: stopped would be false
    finally:
        for m in started:
            kill_member(m)
        os.close(stdin_fd)
        os.close(stdout_fd)
        handle.release(force=True, timeout=15)
        shutil.rmtree(sockets, ignore_errors=True)


def test_vendored_shim_boots_under_the_system_python(vendored_shim, tmp_path):
    """The unprivileged shim runs /usr/bin/python3 (no cffi, no Mosaic of its own) on the vendored copy:
    its whole import graph, mosaic.safe_open included (the rest of the shim, ``_shim_ops``, imports it once
    the engine runs), must resolve from that one directory. Without safe_open in the copy the shim's
    parser still answers but the rest of the shim cannot start (so this would catch a vendoring that
    forgot it)."""
    # The boot line (mosaic.cgroup_cohort.shim): checking it boots is the point here.
    from mosaic.cgroup_cohort.internals import SHIM_CODE, shim_boot  # noqa: PLC0415

    def boot(root: str, *args: str, code: str | None = None) -> subprocess.CompletedProcess[str]:
        argv = shim_boot(root) if code is None else ["-I", "-c", code, root]
        return subprocess.run(["/usr/bin/python3", *argv, *args], capture_output=True, text=True, env={},
                              cwd=tmp_path, timeout=60)

    rest = SHIM_CODE.replace("from mosaic.cgroup_cohort._shim import main; sys.exit(main())",
                             "import mosaic.cgroup_cohort._shim_ops")
    ok = boot(vendored_shim, "--help")
    assert ok.returncode == 0 and "--engine-uid" in ok.stdout, ok.stderr
    assert boot(vendored_shim, code=rest).returncode == 0
    partial = tmp_path / "partial"
    shutil.copytree(vendored_shim, partial, ignore=shutil.ignore_patterns("safe_open"))
    missing = boot(str(partial), code=rest)
    assert missing.returncode != 0 and "mosaic.safe_open" in missing.stderr


def _helper(root: str, request: dict, cwd: str) -> tuple[int, str, str]:
    """The spawn helper booted from ``root`` on /usr/bin/python3 as the launchers boot it, given ``request``
    on its socket; (exit status, report, stderr)."""
    # The helper's boot line (mosaic.cgroup_cohort.internals): checking it boots is the point here.
    from mosaic.cgroup_cohort.internals import HELPER_CODE  # noqa: PLC0415

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proc = subprocess.Popen(["/usr/bin/python3", "-I", "-c", HELPER_CODE, root, "30", "shim"],
                            stdin=theirs.fileno(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={}, cwd=cwd)
    theirs.close()
    try:
        ours.sendall(json.dumps(request).encode())
        ours.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # it could not start: its stderr says why
    out, err = proc.communicate(timeout=60)
    ours.close()
    return proc.returncode, out, err


def test_vendored_copy_boots_the_spawn_helper_under_the_system_python(vendored_shim, tmp_path):
    """The vendored copy also carries everything the spawn helper imports (README "Threads": ``_spawner``,
    the bindings and cffi's ``_cffi_backend``, the shim's start): booted from it on /usr/bin/python3, the
    helper spawns for real, handing this process its child, and every module it loads beyond the standard
    library comes from the copy (not, say, the system's own ``_cffi_backend``)."""
    # The helper's boot line (mosaic.cgroup_cohort.internals): checking it boots is the point here.
    from mosaic.cgroup_cohort.internals import HELPER_CODE  # noqa: PLC0415

    code, out, err = _helper(vendored_shim, {"argv": ["/bin/true"], "env": {}}, str(tmp_path))
    assert code == 0, err
    report = json.loads(out)
    assert report["ok"] is True
    _, status = os.waitpid(report["pid"], 0)  # the child is ours (CLONE_PARENT), not the helper's
    assert os.waitstatus_to_exitcode(status) == 0
    probe = HELPER_CODE.replace(
        "from mosaic.cgroup_cohort._spawner import main; os._exit(main())",
        "import mosaic.cgroup_cohort._spawner, mosaic.cgroup_cohort._shim; print('\\n'.join(sorted("
        "getattr(m, '__file__', None) or '' for n, m in sys.modules.items() "
        "if n.startswith('mosaic.cgroup_cohort.') or n == '_cffi_backend')))")
    r = subprocess.run(["/usr/bin/python3", "-I", "-c", probe, vendored_shim], capture_output=True, text=True,
                       env={}, cwd=tmp_path, timeout=60)
    files = r.stdout.split()
    assert r.returncode == 0 and any("_cffi_backend" in f for f in files), r.stderr
    assert all(f.startswith(vendored_shim + "/") for f in files), files
