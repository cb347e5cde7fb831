"""The shared identities (README "Shared identities"): one form of a host, a process and a digest."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mosaic.safe_open as so
from mosaic.safe_open import (
    HostIdentity,
    ProcessRef,
    Refusal,
    SafeOpenRefusal,
    canonical_json,
    current_host,
    process_ref,
    read_stat,
    sha256_digest,
)
from mosaic.safe_open.identity import boot_id, machine_id, parse_stat

STAT = "1234 (a ) (b) c) S 1 1234 1234 0 -1 4194624 0 0 0 0 0 0 0 0 20 0 1 0 98765 0 0"


def test_parse_stat_takes_the_command_up_to_the_last_paren() -> None:
    st_ = parse_stat(STAT)
    assert (st_.pid, st_.comm, st_.state, st_.ppid, st_.pgid, st_.sid) == (1234, "a ) (b) c", "S", 1, 1234, 1234)
    assert st_.start_time == 98765 and st_.flags == 4194624
    assert st_.ref == ProcessRef(1234, 98765)
    assert not st_.exiting and not st_.dead


@pytest.mark.parametrize("text", ["", "1234", "1234 (x) S 1 2", "x (y) S" + " 0" * 25, "(x) S" + " 0" * 25])
def test_parse_stat_refuses_what_is_not_a_stat_line(text: str) -> None:
    with pytest.raises(ValueError):
        parse_stat(text)


def test_read_stat_of_this_process_and_of_no_process(tmp_path: os.PathLike[str]) -> None:
    me = read_stat("self")
    assert me is not None and me.pid == os.getpid()
    assert process_ref(os.getpid()) == me.ref
    assert read_stat(os.getpid(), proc=str(tmp_path)) is None  # no such entry: absent, not an error


def test_host_identity_is_32_lowercase_hex_both_ways() -> None:
    host = current_host()
    assert host == HostIdentity(machine_id(), boot_id())
    assert len(host.boot_id) == 32 and "-" not in host.boot_id
    assert HostIdentity.from_dict(host.to_dict()) == host
    for bad in ("", "ABCDEF" * 6, "0" * 31, "0" * 8 + "-" + "0" * 23, "0" * 32 + "\n"):
        with pytest.raises(ValueError):
            HostIdentity(bad, "0" * 32)
        with pytest.raises(ValueError):
            HostIdentity("0" * 32, bad)


def test_boot_id_file_with_dashes_reads_without(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "boot_id")
    with open(path, "w") as f:
        f.write("5A915FEF-074B-4213-A709-D74B003931BA\n")
    assert boot_id(path) == "5a915fef074b4213a709d74b003931ba"
    with open(path, "w") as f:
        f.write("not-a-boot-id\n")
    with pytest.raises(ValueError):
        boot_id(path)


def test_process_ref_checks_its_fields_and_round_trips() -> None:
    assert ProcessRef.from_dict({"pid": 7, "startTime": 0}) == ProcessRef(7, 0)
    assert ProcessRef(7, 3).to_dict() == {"pid": 7, "startTime": 3}
    for pid, start in ((0, 1), (1, -1), (True, 1), (1.0, 1)):
        with pytest.raises(ValueError):
            ProcessRef(pid, start)  # type: ignore[arg-type]
    assert sorted([ProcessRef(2, 1), ProcessRef(1, 9)]) == [ProcessRef(1, 9), ProcessRef(2, 1)]


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(), c, max_size=3), max_leaves=10))
def test_digest_is_sha256_prefixed_over_canonical_json(value: object) -> None:
    data = canonical_json(value)
    digest = sha256_digest(data)
    assert so.DIGEST_RE.match(digest)
    assert canonical_json(value) == data  # deterministic
    assert not so.DIGEST_RE.match(digest + "\n") and not so.DIGEST_RE.match(" " + digest)


def test_canonical_json_sorts_keys_and_refuses_nan() -> None:
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()
    with pytest.raises(ValueError):
        canonical_json(float("nan"))


def test_refusals_are_values() -> None:
    a = SafeOpenRefusal("unsafe-path", "m")
    assert a == SafeOpenRefusal("unsafe-path", "m") and hash(a) == hash(SafeOpenRefusal("unsafe-path", "m"))
    assert a != SafeOpenRefusal("unsafe-path", "other")
    assert a != SafeOpenRefusal("unsafe-path", "m", reconcile=True)
    assert pickle.loads(pickle.dumps(a)) == a
    assert isinstance(a, Refusal)


def test_importing_the_package_loads_no_cffi() -> None:
    # The refusal base and the identities are what every layer imports; the bindings load on first use.
    # The bindings are cffi's out-of-line ABI mode (_ffi_abi), so what loads is cffi's backend: never its
    # Python part or the C parser (tests/test_bindings.py).
    code = ("import sys, mosaic.safe_open; print('_cffi_backend' in sys.modules); mosaic.safe_open.Root; "
            "print('_cffi_backend' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]


def test_importing_the_package_loads_only_the_refusal_base() -> None:
    # A client that needs only `Refusal` (the controller's client library) pays for neither the identities'
    # imports nor cffi; the first use of an identity loads its module, and only it.
    code = ("import sys, mosaic.safe_open as s; m = lambda: [n in sys.modules for n in "
            "('mosaic.safe_open._identity', 'hashlib', '_cffi_backend')]; print(*m()); "
            "s.current_host; print(*m()); print(type(s.Refusal).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False", "False", "True", "True", "False", "type"]
