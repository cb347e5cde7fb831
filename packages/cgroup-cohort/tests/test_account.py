"""The engine account (README "Tests"): a system account with no home and no login shell, created when
missing, never modified when it exists as something else (one line instead). The creation itself, as
root, is in tests_cohort/test_account_created.py."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from mosaic.cgroup_cohort.testing import account
from mosaic.cgroup_cohort.testing.account import (
    EngineAccountError,
    account_problems,
    engine_account,
    engine_user_name,
    sys_uid_max,
)


def entry(uid: int = 998, home: str = "/nonexistent", shell: str = "/usr/sbin/nologin") -> pwd.struct_passwd:
    return pwd.struct_passwd(("cohorttest", "x", uid, uid, "", home, shell))


def test_a_system_account_with_no_home_and_no_login_shell_has_no_problem() -> None:
    assert account_problems(entry(), uid_max=999) == []
    assert account_problems(entry(shell="/bin/false", home="/home/gone-for-good-21"), uid_max=999) == []


def test_a_login_account_made_by_useradd_m_has_every_problem_named(tmp_path: Path) -> None:
    problems = account_problems(entry(uid=1001, home=str(tmp_path), shell="/bin/sh"), uid_max=999)
    assert problems == ["uid 1001 is not a system uid (1-999)", f"its home {tmp_path} exists",
                        "its shell /bin/sh allows a login"]
    assert account_problems(entry(uid=0), uid_max=999) == ["uid 0 is not a system uid (1-999)"]


def test_sys_uid_max_reads_login_defs_and_falls_back_as_shadow_does(tmp_path: Path) -> None:
    defs = tmp_path / "login.defs"
    defs.write_text("UID_MIN 1000\n#SYS_UID_MAX 999\n")
    assert sys_uid_max(str(defs)) == 999
    defs.write_text("UID_MIN 500\nSYS_UID_MAX 400\n")
    assert sys_uid_max(str(defs)) == 400
    defs.write_text("UID_MIN 2000\n")
    assert sys_uid_max(str(defs)) == 1999
    assert sys_uid_max(str(tmp_path / "missing")) == 999


def test_the_name_is_cohorttest_unless_MOSAIC_ENGINE_USER_names_another(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MOSAIC_ENGINE_USER", raising=False)
    assert engine_user_name() == "cohorttest"
    monkeypatch.setenv("MOSAIC_ENGINE_USER", "mosaic-engine")
    assert engine_user_name() == "mosaic-engine"


def test_a_missing_account_as_non_root_refuses_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(account.os, "geteuid", lambda: 1000)
    with pytest.raises(EngineAccountError) as caught:
        engine_account("mosaic-no-such-account-21")
    assert caught.value.kind == "cannot-create" and caught.value.exit_status == 4
    assert str(caught.value) == ("the engine account mosaic-no-such-account-21 does not exist and only root can "
                                 "create it: run as root")


def test_an_existing_account_with_other_properties_is_refused_and_left_unchanged() -> None:
    before = pwd.getpwnam("root")
    with pytest.raises(EngineAccountError) as caught:
        engine_account("root")
    assert caught.value.kind == "other-properties" and caught.value.exit_status == 3
    message = str(caught.value)
    assert "\n" not in message and "uid 0 is not a system uid" in message
    assert "left unchanged" in message and "userdel root" in message and "MOSAIC_ENGINE_USER" in message
    assert pwd.getpwnam("root") == before


def run_account(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mosaic.cgroup_cohort.testing.account", *args],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "LC_ALL": "C"})


def test_the_command_refuses_an_account_with_other_properties_in_one_line_exit_3() -> None:
    done = run_account("--check", "root")
    assert done.returncode == 3, done
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("engine account: the account root exists but is not a system "
                                                   "account with no home and no login shell"), done.stderr


def test_the_command_with_check_never_creates_a_missing_account_exit_4() -> None:
    done = run_account("--check", "mosaic-no-such-account-21")
    assert done.returncode == 4, done
    assert done.stderr == ("engine account: the engine account mosaic-no-such-account-21 does not exist yet (it is "
                           "created as a system account on the first run as root)\n")
    with pytest.raises(KeyError):
        pwd.getpwnam("mosaic-no-such-account-21")
