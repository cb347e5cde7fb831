"""The cost of a parse is bounded by the bytes, with a small constant, for hostile shapes too (pi-format's
corpus, in Claude's lines: blank, malformed, deep nesting, one huge line, many roots, many forks, a
million tiny entries; and a parentUuid cycle through all of them).

Each shape is generated at test time in a temporary directory and parsed in a child process that only
imports the package, reads the file in one read and parses it. The child resets its peak RSS to its
current RSS just before the parse (/proc/self/clear_refs) and reports the peak (VmHWM) after it minus that
RSS; the file's bytes are held before the parse, so "peak within 2x the file" is "growth at most 1x the
file". 8 MiB of slack absorbs the allocator's arenas. The dense shapes are also measured at a fifth of
their size: the growth per byte added must stay within the bound too (linear, not one object per entry a
small file's slack would hide). The README's "Hostile input" has the figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SLACK = 8 << 20
V = b'"version":"2.1.283"'

CHILD = r"""
import json, os, sys
from mosaic.claude_format import parse
from mosaic.safe_open.testing import reset_peak, vm_bytes
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
data = os.read(fd, size)
os.close(fd)
assert len(data) == size
before = reset_peak()
result = parse(data, project="/p")
after = vm_bytes("VmHWM")
runs = list(result.unreadable_runs())
main = result.branches[result.default_branch]
print(json.dumps({"size": size, "growth": after - before, "branches": len(result.branches),
                  "entries": result.entry_count, "runs": runs[:4], "run_count": len(runs),
                  "unreadable": len(result.unreadable_lines), "items": main.item_count,
                  "first": [i.id for i in main.items_from(0, 3)]}))
"""


def _write(path: Path, chunks: Iterator[bytes]) -> Path:
    with path.open("wb") as f:
        for chunk in chunks:
            f.write(chunk)
    return path


def _entry(uuid: bytes, parent: bytes | None, body: bytes = b'"message":{"role":"user","content":"hi"}') -> bytes:
    p = b"null" if parent is None else b'"' + parent + b'"'
    return b'{"type":"user","uuid":"' + uuid + b'","parentUuid":' + p + b"," + V + b',"cwd":"/p",' + body + b"}\n"


def _blank(n: int) -> Iterator[bytes]:
    yield _entry(b"a", None)
    yield b"\n" * n


def _malformed(n: int) -> Iterator[bytes]:
    yield _entry(b"a", None)
    for _ in range(n // 10_000):
        yield b"{x}\n" * 10_000


def _roots(n: int) -> Iterator[bytes]:
    for i in range(n):
        yield _entry(b"r%d" % i, None)


def _forks(n: int) -> Iterator[bytes]:
    yield _entry(b"a", None)
    for i in range(n):
        yield _entry(b"f%d" % i, b"a")


def _tiny(n: int) -> Iterator[bytes]:
    yield b'{"type":"attachment","uuid":"t0","parentUuid":null,' + V + b',"cwd":"/p"}\n'
    for i in range(1, n):
        yield b'{"type":"attachment","uuid":"t%d","parentUuid":"t%d",' % (i, i - 1) + V + b"}\n"


def _cycle(n: int) -> Iterator[bytes]:
    # One parentUuid loop through every entry: cut once, never walked.
    for i in range(n):
        yield _entry(b"c%d" % i, b"c%d" % ((i - 1) % n))


def _long_line(n: int) -> Iterator[bytes]:
    yield _entry(b"a", None, b'"message":{"role":"user","content":"' + b"x" * n + b'"}')


def _deep(n: int) -> Iterator[bytes]:
    yield _entry(b"a", None)
    for i in range(n):
        yield b'{"type":"user","uuid":"d%d","x":' % i + b"[" * 20_000 + b"]" * 20_000 + b"}\n"


SHAPES: dict[str, tuple[Callable[[int], Iterator[bytes]], int, int]] = {
    # name: (generator, size argument, bound on the peak as a multiple of the file)
    "blank-lines": (_blank, 8 << 20, 2),
    "malformed-lines": (_malformed, 500_000, 2),
    "deep-nesting": (_deep, 100, 2),
    "one-50MB-line": (_long_line, 50 << 20, 2),
    "100000-roots": (_roots, 100_000, 3),
    "100000-forks": (_forks, 100_000, 3),
    "a-loop-of-100000": (_cycle, 100_000, 3),
    "1000000-tiny-entries": (_tiny, 1_000_000, 4),
}
#: The shapes whose cost is per entry: measured again at a fifth of the size (linear).
DENSE = ("100000-roots", "100000-forks", "a-loop-of-100000", "1000000-tiny-entries")


def _measure(path: Path) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=600,
                         check=False)
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


def _growth(path: Path, bound: int, shape: str) -> tuple[int, int]:
    got = _measure(path)
    file_size, growth = got["size"], got["growth"]
    assert isinstance(file_size, int) and isinstance(growth, int)
    print(f"{shape}: file {file_size / 1e6:.1f} MB, parse growth {growth / 1e6:.1f} MB "
          f"(peak {(file_size + growth) / file_size:.2f}x the file, bound {bound}x)")
    return file_size, growth


@pytest.mark.parametrize("shape", [name for name in SHAPES if name not in DENSE])
def test_peak_memory_of_a_parse_stays_within_2x_the_file(shape: str, tmp_path: Path) -> None:
    make, size, bound = SHAPES[shape]
    file_size, growth = _growth(_write(tmp_path / f"{shape}.jsonl", make(size)), bound, shape)
    assert file_size + growth <= bound * file_size + SLACK, f"{shape}: peak {(file_size + growth) / file_size:.2f}x"


@pytest.mark.parametrize("shape", DENSE)
def test_peak_memory_of_a_dense_shape_is_within_its_bound_and_linear(shape: str, tmp_path: Path) -> None:
    make, size, bound = SHAPES[shape]
    small, g_small = _growth(_write(tmp_path / f"{shape}-fifth.jsonl", make(size // 5)), bound, shape)
    big, g_big = _growth(_write(tmp_path / f"{shape}.jsonl", make(size)), bound, shape)
    assert big + g_big <= bound * big + SLACK, f"{shape}: peak {(big + g_big) / big:.2f}x"
    marginal = (g_big - g_small) / (big - small)
    print(f"{shape}: {marginal:.2f} bytes of growth per byte more")
    assert marginal <= bound - 1, f"{shape}: {marginal:.2f} bytes of growth per byte more"


def test_a_run_of_blank_or_malformed_lines_is_one_notice_whatever_its_length(tmp_path: Path) -> None:
    blank = _measure(_write(tmp_path / "blank.jsonl", _blank(1 << 20)))
    assert blank["runs"] == [[2, 1 << 20]] and blank["run_count"] == 1 and blank["unreadable"] == 1 << 20
    assert blank["items"] == 2 and blank["first"] == ["n.a", "x.line-2"]
    bad = _measure(_write(tmp_path / "bad.jsonl", _malformed(100_000)))
    assert bad["runs"] == [[2, 100_000]] and bad["items"] == 2
    deep = _measure(_write(tmp_path / "deep.jsonl", _deep(10)))
    assert deep["runs"] == [[2, 10]] and deep["entries"] == 1
    loop = _measure(_write(tmp_path / "loop.jsonl", _cycle(1000)))
    assert loop["branches"] == 1 and loop["items"] == 1001 and loop["first"][0] == "x.loop-c0"
