"""The compiled core's sources (dpcore/): C lives only in headers, and the shared bit helpers.

* No Cython source holds C in a Python string: no ``cdef extern from *`` (or from a header) block
  opening with a verbatim-C string; C goes into a ``dpcore/*.h`` header named by the block.
* Every header a kernel or a header includes is in dpcore/ and shipped by MANIFEST.in.
* ``dpc_clz64``/``dpc_ctz64`` (dpc_bits.h) and their portable loops (the fallback for compilers
  other than GCC, Clang and MSVC) count the zero bits of nonzero words exactly.
"""
import pathlib
import re

import numpy as np
import pytest

from dpcore import _random

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNEL_DIR = ROOT / "dpcore"

requires_sources = pytest.mark.skipif(
    not KERNEL_DIR.is_dir(), reason="dpcore/ is not beside the tests (tests copied out of the tree)")

EXTERN = re.compile(r"^(?P<indent>[ \t]*)cdef\s+extern\s+from\s+(?P<spec>\*|\"[^\"]*\"|'[^']*')")
STRING_START = re.compile(r"^[rRbBuUfF]{0,2}(\"|')")
INCLUDE = re.compile(r'^\s*#\s*include\s+"(?P<name>[^"]+)"', re.MULTILINE)


def verbatim_c_blocks(text):
    """(line number, extern line) of every ``cdef extern from`` block whose body opens with a
    string literal (Cython's verbatim C)."""
    lines = text.splitlines()
    found = []
    for number, line in enumerate(lines):
        match = EXTERN.match(line)
        if match is None:
            continue
        for body in lines[number + 1:]:
            stripped = body.strip()
            if not stripped or stripped.startswith("#"):
                continue
            indented = len(body) - len(body.lstrip()) > len(match["indent"])
            if indented and STRING_START.match(stripped):
                found.append((number + 1, line.strip()))
            break
    return found


def named_headers(text):
    """The headers named by the ``cdef extern from "x.h"`` blocks of a Cython source."""
    return [m["spec"][1:-1] for m in map(EXTERN.match, text.splitlines())
            if m is not None and m["spec"] != "*"]


def kernel_sources():
    return sorted(KERNEL_DIR.glob("*.pyx")) + sorted(KERNEL_DIR.glob("*.pxd"))


def test_scanner_finds_verbatim_c():
    """The scanner flags both spellings of verbatim C and passes ordinary declarations."""
    source = '\n'.join([
        'cdef extern from *:',
        '    """',
        '    static inline int f(int x) { return x; }',
        '    """',
        '    int f(int x)',
        '',
        "cdef extern from \"a.h\" nogil:",
        '',
        "    # a comment first",
        "    r'''static int g(void) { return 0; }'''",
        '    int g()',
        '',
        'cdef extern from "b.h" nogil:',
        '    int h(int x)',
        'cdef extern from "c.h":',
        '    pass',
        '"""a module docstring after the block, not inside it"""',
    ])
    assert verbatim_c_blocks(source) == [(1, "cdef extern from *:"),
                                         (7, 'cdef extern from "a.h" nogil:')]
    assert named_headers(source) == ["a.h", "b.h", "c.h"]


@requires_sources
def test_no_c_in_python_strings():
    sources = kernel_sources()
    assert len(sources) >= 10, sources   # the scan found the kernels
    offenders = {path.name: blocks for path in sources
                 if (blocks := verbatim_c_blocks(path.read_text(encoding="utf-8")))}
    assert offenders == {}, f"move this C into a dpcore/*.h header: {offenders}"


@requires_sources
def test_headers_are_in_the_tree_and_the_sdist():
    """Every header named by a kernel, or included by a header, is in dpcore/ and matched by a
    ``recursive-include dpcore`` pattern of MANIFEST.in (so the sdist builds)."""
    headers = set()
    for path in kernel_sources():
        headers.update(named_headers(path.read_text(encoding="utf-8")))
    for path in KERNEL_DIR.glob("*.h"):
        headers.add(path.name)
        headers.update(m["name"] for m in INCLUDE.finditer(path.read_text(encoding="utf-8")))
    assert {"dpc_bits.h", "dpc_cpu.h", "tree_walk.h"} <= headers
    missing = sorted(h for h in headers if not (KERNEL_DIR / h).is_file())
    assert missing == [], f"headers not in dpcore/: {missing}"
    manifest = (ROOT / "MANIFEST.in").read_text(encoding="utf-8").splitlines()
    patterns = [p for line in manifest if line.split()[:2] == ["recursive-include", "dpcore"]
                for p in line.split()[2:]]
    unshipped = sorted(h for h in headers if not any(pathlib.PurePath(h).match(p) for p in patterns))
    assert unshipped == [], f"MANIFEST.in does not ship: {unshipped}"


def zero_count_words():
    rng = np.random.default_rng(26)
    singles = [1 << i for i in range(64)]
    pairs = [(1 << i) | (1 << j) for i in range(64) for j in range(i, 64)]
    below = [(1 << i) - 1 for i in range(1, 65)]          # low runs of ones
    above = [((1 << 64) - 1) ^ ((1 << i) - 1) for i in range(64)]  # high runs of ones
    drawn = [int(w) for w in rng.integers(1, 2**64, size=2000, dtype=np.uint64, endpoint=False)]
    shifted = [int(w) >> int(s) for w, s in zip(drawn, rng.integers(0, 64, size=2000))]
    words = singles + pairs + below + above + drawn + [w for w in shifted if w != 0]
    return np.array(words, dtype=np.uint64)


def test_zero_counts_of_nonzero_words():
    """clz(w) = 64 - bit_length(w), ctz(w) = bit_length(w & -w) - 1: the build's helpers
    (builtins here) and the portable loops alike."""
    words = zero_count_words()
    clz = np.array([64 - int(w).bit_length() for w in words])
    ctz = np.array([(int(w) & -int(w)).bit_length() - 1 for w in words])
    got_clz, got_ctz, loop_clz, loop_ctz = _random._zero_counts(words)
    np.testing.assert_array_equal(got_clz, clz)
    np.testing.assert_array_equal(got_ctz, ctz)
    np.testing.assert_array_equal(loop_clz, clz)
    np.testing.assert_array_equal(loop_ctz, ctz)
    assert set(clz) == set(ctz) == set(range(64))   # every count reached


def test_zero_counts_refuse_zero():
    with pytest.raises(ValueError, match="nonzero"):
        _random._zero_counts(np.array([1, 0], dtype=np.uint64))


@requires_sources
def test_every_kernel_sharing_the_neglog_decisions_fills_its_tables():
    """A kernel that cimports _noise_neglog.pxd has its own bracket tables (static storage in
    noise_bounds.h) and must fill them at import: init_brackets() at module level."""
    users = [p for p in KERNEL_DIR.glob("_*.pyx")
             if re.search(r"dpcore\._noise_neglog cimport", p.read_text())]
    assert {p.stem for p in users} >= {"_noise", "_noise_grid", "_noise_snapping", "_noise_planar"}
    for path in users:
        assert re.search(r"^init_brackets\(\)$", path.read_text(), re.MULTILINE), path.name
