"""The cost of a parse is bounded by the bytes, with a small constant, for hostile shapes too.

Each shape of the pathological corpus is generated at test time in a temporary directory, then parsed in a
child process that only imports the package, reads the file in one read, and parses it. The child resets its
peak RSS to its current RSS just before the parse (/proc/self/clear_refs; if that fails the peak includes
everything before, which only overstates) and reports the peak (VmHWM) after it minus that RSS; the file's
own bytes are already held before the parse, so "peak within 2x the file" is "growth at most 1x the file". A fixed allowance of 8 MiB absorbs the
allocator's arenas, which are not per byte.

The line index keeps its records as columns (flat arrays and a compact id table that reads each id again
from its line, no Python object per entry and no copy of an id), so every shape is within 2x, the million
tiny entries too (issue 34: their bound was 3x while the table held a copy of each id; 53-byte lines now
peak at about 1.7x). The dense
shapes are also measured at a fifth of their size: the parse keeps far fewer interpreter objects than
entries (`sys.getallocatedblocks`, exact: not one object per entry that the bigger file only hides), and the
growth per byte added between the two sizes stays within the bound's growth with a margin of half of it
(LINEAR_MARGIN): the figure moves with the Python build and its allocator (0.74 to 1.09 bytes per byte for
the roots on three machines, against 1), so the test holds the bound where that noise cannot cross it, and
the tight figure, the growth per byte added as a ratio to the bound's, is pi-format's benchmark
(bench/bench_memory.py, `nox -s bench`). The README's table has the figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

HEADER = b'{"type":"session","id":"s1","version":3,"timestamp":"2026-01-01T00:00:00Z","cwd":"/p"}\n'
SLACK = 8 << 20
LINEAR_MARGIN = 1.5  # the growth per byte added may reach 1.5x the bound's (bound - 1): see the docstring

CHILD = r"""
import gc, json, os, sys
from mosaic.pi_format import parse
from mosaic.safe_open.testing import reset_peak, vm_bytes
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
data = os.read(fd, size)  # one allocation of the file's size
os.close(fd)
assert len(data) == size
gc.collect()
blocks = sys.getallocatedblocks()
before = reset_peak()
result = parse(data, project="/p")
after = vm_bytes("VmHWM")
gc.collect()
blocks = sys.getallocatedblocks() - blocks  # the interpreter's objects the parse keeps (arrays are a few)
runs = list(result.unreadable_runs())
main = result.branches[result.default_branch]
print(json.dumps({"size": size, "growth": after - before, "blocks": blocks, "branches": len(result.branches),
                  "entries": len(result.entries), "runs": runs[:4], "run_count": len(runs),
                  "unreadable": len(result.unreadable_lines), "items": main.item_count,
                  "first": [i.id for i in main.items_from(0, 3)]}))
"""


def _write(path: Path, chunks: Iterator[bytes]) -> Path:
    with path.open("wb") as f:
        f.write(HEADER)
        for chunk in chunks:
            f.write(chunk)
    return path


def _blank(n: int) -> Iterator[bytes]:
    yield b"\n" * n


def _malformed(n: int) -> Iterator[bytes]:
    for _ in range(n // 10_000):
        yield b"{x}\n" * 10_000


def _roots(n: int) -> Iterator[bytes]:
    for i in range(n):
        yield b'{"type":"message","id":"r%d","parentId":null,"message":{"role":"user","content":"hi"}}\n' % i


def _forks(n: int) -> Iterator[bytes]:
    yield b'{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"hi"}}\n'
    for i in range(n):
        yield b'{"type":"message","id":"f%d","parentId":"a","message":{"role":"user","content":"hi"}}\n' % i


def _tiny(n: int) -> Iterator[bytes]:
    yield b'{"type":"label","id":"t0","parentId":null}\n'
    for i in range(1, n):
        yield b'{"type":"label","id":"t%d","parentId":"t%d"}\n' % (i, i - 1)


def _long_line(n: int) -> Iterator[bytes]:
    yield b'{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"'
    yield b"x" * n
    yield b'"}}\n'


def _deep(n: int) -> Iterator[bytes]:
    # Nesting far deeper than Python's json can decode: each line is unreadable, never a crash.
    for i in range(n):
        yield b'{"type":"message","id":"d%d","parentId":null,"x":' % i + b"[" * 20_000 + b"]" * 20_000 + b"}\n"


SHAPES: dict[str, tuple[Callable[[int], Iterator[bytes]], int, int]] = {
    # name: (generator, size argument, bound on the peak as a multiple of the file)
    "blank-lines": (_blank, 8 << 20, 2),
    "malformed-lines": (_malformed, 500_000, 2),
    "deep-nesting": (_deep, 100, 2),
    "one-50MB-line": (_long_line, 50 << 20, 2),
    "100000-roots": (_roots, 100_000, 2),
    "100000-forks": (_forks, 100_000, 2),
    "1000000-tiny-entries": (_tiny, 1_000_000, 2),  # 53-byte lines: about 1.7x measured (module docstring)
}
#: The shapes whose cost is per entry: measured again at a fifth of the size (linear, test below).
DENSE = ("100000-roots", "100000-forks", "1000000-tiny-entries")


def _measure(path: Path) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=300,
                         check=False)
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


def _growth(path: Path, bound: int, shape: str) -> tuple[int, int, dict[str, object]]:
    """(file size, parse growth, everything the child reported)."""
    got = _measure(path)
    file_size, growth = got["size"], got["growth"]
    assert isinstance(file_size, int) and isinstance(growth, int)
    print(f"{shape}: file {file_size / 1e6:.1f} MB, parse growth {growth / 1e6:.1f} MB "
          f"(peak {(file_size + growth) / file_size:.2f}x the file, bound {bound}x)")
    return file_size, growth, got


@pytest.mark.parametrize("shape", [name for name in SHAPES if name not in DENSE])
def test_peak_memory_of_a_parse_stays_within_2x_the_file(shape: str, tmp_path: Path) -> None:
    make, size, bound = SHAPES[shape]
    file_size, growth, _ = _growth(_write(tmp_path / f"{shape}.jsonl", make(size)), bound, shape)
    assert file_size + growth <= bound * file_size + SLACK, f"{shape}: peak {(file_size + growth) / file_size:.2f}x"


@pytest.mark.parametrize("shape", DENSE)
def test_peak_memory_of_a_dense_shape_is_within_its_bound_and_linear(shape: str, tmp_path: Path) -> None:
    # The peak at the full size is within the bound, and what each byte more costs between a fifth of the size
    # and the full size (the marginal growth, which the allocator's reused arenas cannot hide) is within it
    # too: memory linear in the file, not one object per entry that a small file's slack would cover.
    make, size, bound = SHAPES[shape]
    small, g_small, _ = _growth(_write(tmp_path / f"{shape}-fifth.jsonl", make(size // 5)), bound, shape)
    big, g_big, kept = _growth(_write(tmp_path / f"{shape}.jsonl", make(size)), bound, shape)
    assert big + g_big <= bound * big + SLACK, f"{shape}: peak {(big + g_big) / big:.2f}x"
    # Not one interpreter object per entry (exact, whatever the allocator): the records are columns.
    assert isinstance(kept["blocks"], int) and isinstance(kept["entries"], int) and kept["entries"] >= size
    assert kept["blocks"] < kept["entries"] // 100, f"{shape}: {kept['blocks']} objects kept for {kept['entries']} entries"
    marginal = (g_big - g_small) / (big - small)
    print(f"{shape}: {marginal:.2f} bytes of growth per byte more")
    assert marginal <= (bound - 1) * LINEAR_MARGIN, f"{shape}: {marginal:.2f} bytes of growth per byte more"


def test_a_run_of_blank_or_malformed_lines_is_one_notice_whatever_its_length(tmp_path: Path) -> None:
    blank = _measure(_write(tmp_path / "blank.jsonl", _blank(1 << 20)))
    assert blank["runs"] == [[2, 1 << 20]] and blank["run_count"] == 1 and blank["unreadable"] == 1 << 20
    assert blank["items"] == 1 and blank["first"] == ["x.line-2"]
    bad = _measure(_write(tmp_path / "bad.jsonl", _malformed(100_000)))
    assert bad["runs"] == [[2, 100_000]] and bad["items"] == 1
    deep = _measure(_write(tmp_path / "deep.jsonl", _deep(10)))
    assert deep["runs"] == [[2, 10]] and deep["entries"] == 0
    long = _measure(_write(tmp_path / "long.jsonl", _long_line(1 << 20)))
    assert long["entries"] == 1 and long["first"] == ["n.a"]
