"""Plain words (`.plain`) and the cohort route's reasons: what a person reads carries no Pi source
line numbers, no raw D-Bus text and no 32-hex id in full."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from mosaic.cgroup_cohort import Credentials
from mosaic.cgroup_cohort.cgroupfs import Cgroup2Mount
from mosaic.controller import route
from mosaic.controller.plain import plain_message, shorten
from mosaic.controller.route import RouteUnavailable, choose_route, user_manager_answers
from mosaic.controller.tables import check_text


def test_the_text_policy_refusal_reads_without_its_pi_source_citation() -> None:
    refused = check_text("/help")
    assert refused is not None and refused[0] == "text-policy"
    assert ".js" not in refused[1] and not any(ch.isdigit() for ch in refused[1])  # no Pi source lines
    assert plain_message(refused[1]) == refused[1]  # already plain


def test_plain_message_keeps_parentheses_that_cite_no_source() -> None:
    assert plain_message("busy (a prompt holds the slot)") == "busy (a prompt holds the slot)"
    assert plain_message("x (sdk.js 80-83) and (agent-session.js 1 (a), 2)") == "x and"


def test_shorten_cuts_long_ids_and_keeps_short_ones() -> None:
    claim = "claim-3d603806acf0d321acee94ff0ef81924"
    assert shorten(claim) == "claim-3d60…"
    assert shorten(f"cohort-{claim}.scope") == "cohort-claim-3d60….scope"
    assert shorten("sha256:" + "e4b67d3b" + "0" * 56) == "sha256:e4b67d3b…"
    assert shorten("leaf cff5eb19, node n.14a71bc5, /sys/fs/cgroup/unified/mosaic-demo-c010242c") == \
        "leaf cff5eb19, node n.14a71bc5, /sys/fs/cgroup/unified/mosaic-demo-c010242c"


def fake_systemctl(tmp_path: Path, body: str) -> str:
    path = tmp_path / "systemctl"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_systemctls_dbus_error_becomes_no_systemd_user_manager(tmp_path: Path) -> None:
    systemctl = fake_systemctl(tmp_path, "echo 'Failed to connect to bus: No medium found' >&2; exit 1")
    assert user_manager_answers(systemctl=systemctl) == (False, "no systemd user manager")


def test_the_other_ways_a_user_manager_does_not_answer_are_plain_too(tmp_path: Path) -> None:
    assert user_manager_answers(systemctl=str(tmp_path / "absent")) == (
        False, "no systemctl (systemd is not installed)")
    assert user_manager_answers(systemctl=fake_systemctl(tmp_path, "echo 'weird failure' >&2; exit 3")) == (
        False, "no systemd user manager (systemctl --user exit 3)")
    assert user_manager_answers(systemctl=fake_systemctl(tmp_path, "exec sleep 30"), timeout=0.3) == (
        False, "the systemd user manager did not answer within 0 s")
    assert user_manager_answers(systemctl=fake_systemctl(tmp_path, "exit 0")) == (
        True, "a systemd user manager answers")


NO_MANAGER = "echo 'Failed to connect to bus: No medium found' >&2; exit 1"


def test_no_cgroup2_mount_and_no_user_manager_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_mount() -> None:
        raise RuntimeError("cgroup-unavailable: no cgroup2 mount with root / in mountinfo")

    monkeypatch.setattr(route, "find_cgroup2", no_mount)
    with pytest.raises(RouteUnavailable) as caught:
        choose_route(str(tmp_path), Credentials(999, 999), "mosaic-route-test",
                     systemctl=fake_systemctl(tmp_path, NO_MANAGER))
    assert str(caught.value) == ("no cgroup2 mount in /proc/self/mountinfo and no systemd user manager: the "
                                 "engine cannot be contained here (run on a host or VM with cgroup v2)")


@pytest.mark.parametrize("err,said", [
    (errno.EROFS, "is read-only here and no systemd user manager answers: run on a host or VM, or with a "
                  "writable cgroup2 mount"),
    (errno.EACCES, f"is not writable by uid {os.geteuid()} and no systemd user manager answers: run as root"),
])
def test_a_cgroup2_mount_that_cannot_be_written_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, err: int, said: str) -> None:
    mount = tmp_path / "cgroup"
    mount.mkdir()
    monkeypatch.setattr(route, "find_cgroup2", lambda: Cgroup2Mount(str(mount), False, "rw"))

    def refused(path: str, mode: int = 0o777) -> None:
        raise OSError(err, os.strerror(err), path)

    monkeypatch.setattr(route.os, "mkdir", refused)
    with pytest.raises(RouteUnavailable) as caught:
        choose_route(str(tmp_path), Credentials(999, 999), "mosaic-route-test",
                     systemctl=fake_systemctl(tmp_path, NO_MANAGER))
    assert str(caught.value) == f"the cgroup2 mount {mount} {said}"
