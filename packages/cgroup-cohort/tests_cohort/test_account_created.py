"""The engine account as root: a missing account is created as a system account with no
home and no login shell, the next call uses it unchanged. The account is made under a name of its own for
this test and removed by that exact name afterwards."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from mosaic.cgroup_cohort.testing.account import NO_HOME, account_problems, engine_account


@pytest.fixture
def fresh_name() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.fail("creating the engine account needs root (this suite runs as root)")
    if shutil.which("userdel") is None:
        pytest.fail("userdel is not installed (passwd): the test could not remove the account it makes")
    name = f"mosaic-t{secrets.token_hex(4)}"
    yield name
    subprocess.run(["userdel", name], capture_output=True, check=False)
    subprocess.run(["groupdel", name], capture_output=True, check=False)  # --user-group made it


def test_a_missing_engine_account_is_created_as_a_system_account_and_then_reused(fresh_name: str) -> None:
    done = subprocess.run([sys.executable, "-m", "mosaic.cgroup_cohort.testing.account", fresh_name],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done
    made = pwd.getpwnam(fresh_name)
    assert done.stdout == f"{fresh_name} {made.pw_uid} {made.pw_gid}\n"
    assert made.pw_dir == NO_HOME and not os.path.exists(NO_HOME)
    assert made.pw_shell == "/usr/sbin/nologin"
    assert account_problems(made) == []
    again = engine_account(fresh_name)
    assert (again.uid, again.gid) == (made.pw_uid, made.pw_gid)
    assert pwd.getpwnam(fresh_name) == made
