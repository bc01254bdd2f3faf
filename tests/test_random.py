"""The secure-randomness kernel (dpcore._random) and dpcore.random.

Known-answer vectors for ChaCha20 (RFC 8439), the generator's plumbing (state, pickling, spawn,
fork, threads, random_state rules), the exact map from bits to values of each C sampler (by
replaying chosen words), and the laws of the samplers against their exact distributions at a
stated alpha, each with a power test that feeds the same test a wrong law.
"""
import copy
import math
import os
import pickle
import signal
import subprocess
import sys
import threading
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from _gof import ALPHA, chisquare_pvalue, z_critical

import dpcore.random as dprandom
from dpcore import _random
from dpcore.random import ChaCha20, check_random_state, default_bit_generator, default_rng

U64 = 2**64
requires_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


# ------------------------------------------------------------------------------------------------
# ChaCha20 known answers (RFC 8439)

def test_rfc8439_section_2_3_2_block():
    key = bytes(range(32))
    nonce = bytes.fromhex("000000090000004a00000000")
    expected = bytes.fromhex(
        "10f1e7e4d13b5915500fdd1fa32071c4"
        "c7d1f4c733c068030422aa9ac3d46c4e"
        "d2826446079faa0914c2d705d98b02a2"
        "b5129cd1de164eb9cbd083e8a2503c4e"
    )
    assert _random._chacha20_block(key, 1, nonce) == expected


@pytest.mark.parametrize(
    "key, counter, nonce, expected",
    [
        (bytes(32), 0, bytes(12),  # A.1 test vector #1
         "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
         "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586"),
        (bytes(32), 1, bytes(12),  # #2
         "9f07e7be5551387a98ba977c732d080dcb0f29a048e3656912c6533e32ee7aed"
         "29b721769ce64e43d57133b074d839d531ed1f28510afb45ace10a1f4b794d6f"),
        (bytes(31) + b"\x01", 1, bytes(12),  # #3
         "3aeb5224ecf849929b9d828db1ced4dd832025e8018b8160b82284f3c949aa5a"
         "8eca00bbb4a73bdad192b5c42f73f2fd4e273644c8b36125a64addeb006c13a0"),
        (b"\x00\xff" + bytes(30), 2, bytes(12),  # #4
         "72d54dfbf12ec44b362692df94137f328fea8da73990265ec1bbbea1ae9af0ca"
         "13b25aa26cb4a648cb9b9d1be65b2c0924a66c54d545ec1b7374f4872e99f096"),
        (bytes(32), 0, bytes(11) + b"\x02",  # #5
         "c2c64d378cd536374ae204b9ef933fcd1a8b2288b3dfa49672ab765b54ee27c7"
         "8a970e0e955c14f3a88e741b97c286f75f8fc299e8148362fa198a39531bed6d"),
    ],
)
def test_rfc8439_appendix_a1_blocks(key, counter, nonce, expected):
    assert _random._chacha20_block(key, counter, nonce) == bytes.fromhex(expected)


def reference_words(key, first_block, n_blocks):
    """The generator's words from the RFC block function: block n has the 64-bit counter n in
    words 12-13, i.e. RFC counter n mod 2**32 and nonce = (n >> 32) as 4 bytes + 8 zero bytes."""
    key_bytes = key.to_bytes(32, "little")
    blocks = []
    for n in range(first_block, first_block + n_blocks):
        nonce = (n >> 32).to_bytes(4, "little") + bytes(8)
        blocks.append(_random._chacha20_block(key_bytes, n & 0xFFFFFFFF, nonce))
    return np.frombuffer(b"".join(blocks), dtype="<u8").astype(np.uint64)


@pytest.fixture
def restore_lanes():
    lanes = _random._simd_lanes()
    yield
    _random._simd_lanes(lanes)


@pytest.mark.parametrize("lanes", [1, 4, 8, 16])
def test_generator_words_are_the_rfc_keystream(lanes, restore_lanes):
    """Every code path (scalar, 4, 8 and 16 blocks per step, buffered and bulk draws) gives the
    keystream of the RFC block function, across the 2**32 boundary of the low counter word."""
    if _random._simd_lanes(lanes) != lanes:
        pytest.skip(f"{lanes} blocks per step are not supported by this CPU or build")
    bg = ChaCha20(2024)
    key = bg.state["state"]["key"]
    start = 2**32 - 11
    bg.state = {"bit_generator": "ChaCha20", "state": {"key": key, "counter": start, "word": 0}}
    sizes = [3, 1, 5, 7 * 8, 123, 1, 8 * 13 + 2, 0, 8 * 37, 64, 9]
    got = []
    for size in sizes:
        got.append(bg.random_raw(size))
        got.append(np.array([bg.random_raw()], dtype=np.uint64))
    got = np.concatenate(got)
    expected = reference_words(key, start, len(got) // 8 + 1)[: len(got)]
    np.testing.assert_array_equal(got, expected)


def test_32_and_double_outputs_follow_numpy_conventions():
    words = ChaCha20(3).random_raw(3)
    bg = ChaCha20(3)
    c = bg.ctypes
    halves = [c.next_uint32(c.state) for _ in range(4)]
    assert halves == [int(words[0]) & 0xFFFFFFFF, int(words[0]) >> 32,
                      int(words[1]) & 0xFFFFFFFF, int(words[1]) >> 32]
    assert c.next_double(c.state) == (int(words[2]) >> 11) * 2.0**-53


# ------------------------------------------------------------------------------------------------
# Generator plumbing

def test_seed_determinism_and_difference():
    a = ChaCha20(12345).random_raw(100)
    np.testing.assert_array_equal(a, ChaCha20(12345).random_raw(100))
    np.testing.assert_array_equal(a, ChaCha20(np.random.SeedSequence(12345)).random_raw(100))
    assert not np.array_equal(a, ChaCha20(12346).random_raw(100))
    assert not np.array_equal(ChaCha20([1, 2]).random_raw(8), ChaCha20([1, 3]).random_raw(8))
    key_words = np.random.SeedSequence(12345).generate_state(8, np.uint32)
    assert ChaCha20(12345).state["state"]["key"] == sum(
        int(w) << (32 * i) for i, w in enumerate(key_words))


def test_os_keyed_generators_differ():
    a, b = ChaCha20(), ChaCha20()
    assert a.os_keyed and b.os_keyed and not ChaCha20(1).os_keyed
    assert a.state["state"]["key"] != b.state["state"]["key"]
    assert not np.array_equal(a.random_raw(8), b.random_raw(8))


def test_numpy_generator_over_chacha20():
    g = np.random.Generator(ChaCha20(1))
    x = g.normal(2.0, 3.0, size=1000)
    assert x.shape == (1000,) and np.isfinite(x).all()
    assert g.integers(0, 10, size=50).max() < 10
    assert 0 <= g.random() < 1
    assert sorted(g.permutation(10)) == list(range(10))
    assert g.choice([1, 2, 3]) in (1, 2, 3)
    assert g.integers(0, 2**32, dtype=np.uint32, size=4).dtype == np.uint32
    h = np.random.Generator(ChaCha20(1))
    np.testing.assert_array_equal(h.normal(2.0, 3.0, size=1000), x)
    children = g.spawn(2)
    assert all(isinstance(c.bit_generator, ChaCha20) for c in children)


def test_default_rng():
    assert isinstance(default_rng().bit_generator, ChaCha20)
    assert default_rng().bit_generator.os_keyed
    np.testing.assert_array_equal(default_rng(5).random(10), default_rng(5).random(10))


_COPIES = {
    "pickle": lambda x: pickle.loads(pickle.dumps(x)),
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
}


@pytest.mark.parametrize("how", sorted(_COPIES))
@pytest.mark.parametrize("seed", [77, [1, 2], np.random.SeedSequence(5)])
@pytest.mark.parametrize("skip", [0, 5, 8, 100])
def test_copies_of_a_seeded_generator_continue_the_stream(how, seed, skip):
    dup = _COPIES[how]
    bg = ChaCha20(seed)
    bg.random_raw(skip)
    bg.ctypes.next_uint32(bg.ctypes.state)  # leaves a buffered half word
    clone = dup(bg)
    assert clone is not bg and clone.state == bg.state and not clone.os_keyed
    assert clone.ctypes.next_uint32(clone.ctypes.state) == bg.ctypes.next_uint32(bg.ctypes.state)
    np.testing.assert_array_equal(clone.random_raw(77), bg.random_raw(77))
    g = np.random.Generator(bg)
    g2 = pickle.loads(pickle.dumps(g)) if how == "pickle" else copy.deepcopy(g)
    np.testing.assert_array_equal(g2.normal(size=10), g.normal(size=10))


@pytest.mark.parametrize("how", sorted(_COPIES))
@pytest.mark.parametrize("make", [ChaCha20, default_bit_generator], ids=["new", "default"])
def test_copies_of_an_os_keyed_generator_are_rekeyed(how, make):
    """A pickled or copied secure generator (e.g. sent to a joblib worker) must not emit the
    original's words: it is a new OS-keyed generator."""
    bg = make()
    bg.random_raw(5)
    twin = _COPIES[how](bg)
    assert isinstance(twin, ChaCha20) and twin is not bg and twin.os_keyed and bg.os_keyed
    assert twin.state["state"]["key"] != bg.state["state"]["key"]
    assert not np.array_equal(twin.random_raw(16), bg.random_raw(16))
    assert default_bit_generator() is not twin


def test_pickle_of_an_os_keyed_generator_holds_no_key():
    bg = default_bit_generator()
    key = bg.state["state"]["key"].to_bytes(32, "little")
    data = pickle.dumps(bg) + pickle.dumps(np.random.Generator(bg))
    assert key[:16] not in data and key[16:] not in data


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_copies_of_a_secure_numpy_generator_are_rekeyed(how):
    g = default_rng()
    g.random(3)
    twin = _COPIES[how](g)
    assert isinstance(twin.bit_generator, ChaCha20) and twin.bit_generator.os_keyed
    assert not np.array_equal(twin.random(16), g.random(16))
    # the process-wide generator behind random_state=None
    g = check_random_state(None)
    twin = _COPIES[how](g)
    assert twin.bit_generator is not default_bit_generator() and twin.bit_generator.os_keyed
    assert not np.array_equal(twin.integers(0, 2**62, 16), g.integers(0, 2**62, 16))


def test_old_pickles_of_os_keyed_generators_are_rekeyed():
    """A pickle that still carries an OS-keyed state (the format before rekeying) loads as a
    fresh OS-keyed generator, not as a copy of the stream."""
    bg = ChaCha20()
    twin = _random._chacha20_unpickle(bg.state, None)
    assert twin.os_keyed and twin.state["state"]["key"] != bg.state["state"]["key"]
    seeded = ChaCha20(3)
    seeded.random_raw(9)
    again = _random._chacha20_unpickle(seeded.state, seeded.seed_seq)
    np.testing.assert_array_equal(again.random_raw(8), seeded.random_raw(8))


def test_state_setter_still_copies_an_os_keyed_stream_on_purpose():
    bg = ChaCha20()
    twin = ChaCha20()
    twin.state = bg.state
    assert twin.os_keyed
    np.testing.assert_array_equal(twin.random_raw(8), bg.random_raw(8))


def test_state_setter_round_trip_and_validation():
    bg = ChaCha20(8)
    bg.random_raw(13)
    state = bg.state
    assert state["state"]["counter"] == 1 and state["state"]["word"] == 5
    ahead = bg.random_raw(20)
    bg.state = state
    np.testing.assert_array_equal(bg.random_raw(20), ahead)
    with pytest.raises(ValueError, match="bit_generator"):
        bg.state = {"bit_generator": "PCG64", "state": state["state"]}
    for bad in ({"key": -1, "counter": 0}, {"key": 2**256, "counter": 0},
                {"key": 1, "counter": 2**64}, {"key": 1, "counter": 0, "word": 8}):
        with pytest.raises(ValueError):
            bg.state = {"bit_generator": "ChaCha20", "state": bad}
    with pytest.raises(TypeError):
        bg.state = [1, 2]


def test_spawn():
    parent = ChaCha20(99)
    kids = parent.spawn(3)
    again = ChaCha20(99).spawn(3)
    for k, a in zip(kids, again):
        assert not k.os_keyed
        np.testing.assert_array_equal(k.random_raw(8), a.random_raw(8))
    keys = {k.state["state"]["key"] for k in kids} | {parent.state["state"]["key"]}
    assert len(keys) == 4
    # later spawns continue the SeedSequence's children, also after pickling
    clone = pickle.loads(pickle.dumps(parent))
    np.testing.assert_array_equal(parent.spawn(1)[0].random_raw(4), clone.spawn(1)[0].random_raw(4))
    os_kids = ChaCha20().spawn(2)
    assert all(k.os_keyed for k in os_kids)
    assert not np.array_equal(os_kids[0].random_raw(4), os_kids[1].random_raw(4))
    with pytest.raises(ValueError, match="n_children"):
        parent.spawn(-1)


def test_random_raw_shapes_and_output_flag():
    bg = ChaCha20(4)
    ref = ChaCha20(4).random_raw(30)
    assert isinstance(bg.random_raw(), int)
    assert bg.random_raw(output=False) is None
    out = bg.random_raw((2, 3))
    assert out.shape == (2, 3) and out.dtype == np.uint64
    assert bg.random_raw(5, output=False) is None
    np.testing.assert_array_equal(out.ravel(), ref[2:8])
    np.testing.assert_array_equal(bg.random_raw(3), ref[13:16])


def test_default_bit_generator_is_one_os_keyed_instance():
    bg = default_bit_generator()
    assert isinstance(bg, ChaCha20) and bg.os_keyed
    assert default_bit_generator() is bg
    assert check_random_state(None).bit_generator is bg
    assert _random.bitgen_handle(None).bit_generator is bg


def test_default_bit_generator_creation_is_thread_safe():
    """In a fresh interpreter, 16 threads racing to create the default get one instance."""
    code = (
        "import threading\n"
        "from dpcore.random import default_bit_generator\n"
        "barrier = threading.Barrier(16); got = []\n"
        "def run():\n"
        "    barrier.wait(); got.append(default_bit_generator())\n"
        "ts = [threading.Thread(target=run) for _ in range(16)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "assert len(got) == 16 and len({id(g) for g in got}) == 1, got\n"
        "print('ok')\n"
    )
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(dprandom.__file__)))
    env = dict(os.environ, PYTHONPATH=package_root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


# ------------------------------------------------------------------------------------------------
# random_state rules

def test_bitgen_handle_accepts():
    bg = ChaCha20(1)
    h = _random.bitgen_handle(bg)
    assert h.bit_generator is bg and h.lock is bg.lock
    assert _random.bitgen_handle(np.random.Generator(bg)).bit_generator is bg
    pcg = np.random.PCG64(3)
    assert _random.bitgen_handle(pcg).bit_generator is pcg
    rs = np.random.RandomState(3)
    assert _random.bitgen_handle(rs).bit_generator is rs._bit_generator
    for seed in (5, np.int64(5), [5], (5,), np.array([5]), np.random.SeedSequence(5)):
        h = _random.bitgen_handle(seed)
        assert isinstance(h.bit_generator, ChaCha20) and not h.bit_generator.os_keyed
        np.testing.assert_array_equal(h.bit_generator.random_raw(4), ChaCha20(5).random_raw(4))


def test_check_random_state():
    g = np.random.Generator(ChaCha20(1))
    assert check_random_state(g) is g
    pcg = np.random.PCG64(1)
    assert check_random_state(pcg).bit_generator is pcg
    rs = np.random.RandomState(1)
    assert check_random_state(rs).bit_generator is rs._bit_generator
    np.testing.assert_array_equal(check_random_state(3).random(5), default_rng(3).random(5))


@pytest.mark.parametrize("bad", [1.5, "seed", True, np.bool_(False), {}, object(), [1.0],
                                 [True], np.array([0.5]), b"abc"])
@pytest.mark.parametrize("fn", [_random.bitgen_handle, check_random_state])
def test_invalid_random_state_raises_type_error(fn, bad):
    with pytest.raises(TypeError, match="random_state"):
        fn(bad)


@pytest.mark.parametrize("fn", [_random.bitgen_handle, check_random_state])
def test_negative_seed_raises_value_error(fn):
    with pytest.raises(ValueError, match="random_state"):
        fn(-1)


@pytest.mark.parametrize("empty", [[], (), np.array([], dtype=np.int64), np.array([]),
                                   np.random.SeedSequence([])],
                         ids=["list", "tuple", "int-array", "float-array", "SeedSequence"])
def test_empty_seed_raises_value_error(empty):
    """numpy turns an empty entropy sequence into a fixed, publicly known stream: refused."""
    for fn in (ChaCha20, default_rng):
        with pytest.raises(ValueError, match="seed must be non-empty; use None for the secure"):
            fn(empty)
    for fn in (check_random_state, _random.bitgen_handle):
        with pytest.raises(ValueError, match="random_state must be non-empty; use None"):
            fn(empty)


# ------------------------------------------------------------------------------------------------
# Fork and threads

def _in_child(draw, timeout=20):
    """Fork; the child runs draw() -> bytes and sends them through a pipe. Returns the bytes
    (empty if the child failed or hung)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            os.close(r)
            signal.alarm(timeout)  # a deadlocked child dies instead of hanging the test
            data = draw()
            while data:
                data = data[os.write(w, data):]
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    while True:
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child failed: {status}"
    return b"".join(chunks)


@requires_fork
def test_fork_rekeys_the_default_generator():
    bg = default_bit_generator()
    bg.random_raw(3)
    twin = ChaCha20()
    twin.state = bg.state  # what bg would emit without a rekey
    child = np.frombuffer(_in_child(lambda: bg.random_raw(64).tobytes()), dtype=np.uint64)
    parent = bg.random_raw(64)
    np.testing.assert_array_equal(parent, twin.random_raw(64))  # the parent is untouched
    assert len(child) == 64
    assert not np.array_equal(child, parent)
    assert len(np.intersect1d(child, parent)) == 0
    # through the kernels' entry point too
    child = _in_child(lambda: _random._ustar(None, 16).tobytes())
    assert child != _random._ustar(None, 16).tobytes()


@requires_fork
def test_fork_rekeys_os_keyed_generators_created_before_the_fork():
    bg = ChaCha20()
    g = np.random.Generator(bg)
    child = _in_child(lambda: bg.random_raw(32).tobytes() + g.random(8).tobytes())
    parent = bg.random_raw(32).tobytes() + g.random(8).tobytes()
    assert len(child) == len(parent) and child != parent
    assert _in_child(lambda: bytes([bg.os_keyed])) == b"\x01"


@requires_fork
def test_fork_keeps_seeded_generators_reproducible():
    bg = ChaCha20(31)
    child = _in_child(lambda: bg.random_raw(16).tobytes())
    assert child == bg.random_raw(16).tobytes()


@requires_fork
@pytest.mark.filterwarnings("ignore:.*multi-threaded.*fork:DeprecationWarning")
def test_fork_while_another_thread_holds_the_lock():
    """A lock held by another thread at fork time is reset in the child (else: deadlock),
    also for numpy Generators, which keep their own reference to the lock."""
    bg = ChaCha20()
    g = np.random.Generator(bg)
    held, release = threading.Event(), threading.Event()

    def hold():
        with bg.lock:
            held.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(10)
        child = _in_child(lambda: g.random(4).tobytes() + bg.random_raw(4).tobytes(), timeout=10)
    finally:
        release.set()
        t.join()
    assert len(child) == 64


def test_threads_match_serial_draws():
    seeds = list(range(8))

    def draw(seed):
        return np.concatenate([
            _random._ustar(seed, 20_000),
            _random._bounded(seed, 1000, 20_000).astype(float),
            np.random.Generator(ChaCha20(seed)).normal(size=20_000),
        ])

    serial = [draw(s) for s in seeds]
    threaded = [None] * len(seeds)

    def run(i):
        threaded[i] = draw(seeds[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(seeds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(serial, threaded):
        np.testing.assert_array_equal(a, b)


def test_shared_generator_across_threads_never_repeats_words():
    """Threads drawing from one generator at once: the lock makes every word a distinct
    position of the stream (a race would duplicate words or corrupt the buffer)."""
    bg = ChaCha20(17)
    out = [None] * 4

    def run(i):
        out[i] = np.concatenate([bg.random_raw(s) for s in (1, 7, 300, 8, 5000, 3) * 20])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    allw = np.concatenate(out)
    np.testing.assert_array_equal(np.sort(allw), np.sort(ChaCha20(17).random_raw(len(allw))))


# ------------------------------------------------------------------------------------------------
# U*: the exact map from bits to doubles

def ustar_reference(words):
    """Mironov 2012, Section 5.2, as exact rationals: (value, words used)."""
    words = [int(w) for w in words]
    i, zeros = 0, 0
    while True:
        w = words[i]
        i += 1
        if w:
            break
        zeros += 64
        if zeros >= 1022:
            break
    if w:
        lz = 64 - w.bit_length()
        zeros += lz
    if zeros < 1022:
        if lz <= 11:
            m = (w >> (11 - lz)) & (2**52 - 1)
        else:
            m = words[i] >> 12
            i += 1
        return Fraction(2**52 + m, 2 ** (53 + zeros)), i
    while True:  # subnormal: k * 2**-1074, k uniform on [1, 2**52)
        k = words[i] >> 12
        i += 1
        if k:
            return Fraction(k, 2**1074), i


def test_ustar_bits_to_value():
    rng = np.random.default_rng(11)
    cases = [np.concatenate([rng.integers(0, U64, size=2, dtype=np.uint64) >> np.uint64(s),
                             rng.integers(0, U64, size=2, dtype=np.uint64)]) for s in range(64)]
    cases += [np.array(c, dtype=np.uint64) for c in (
        [U64 - 1], [1 << 63], [1 << 52, 0], [(1 << 51) | 5, 123 << 12],
        [0, 0, 2**63 + 2**40], [0] * 16 + [5 << 12], [0] * 15 + [1, 0, 0, 7 << 12],
        [0] * 15 + [4, (2**52 - 1) << 12], [0] * 15 + [3, 1 << 12],
    )]
    for words in cases:
        value, used = _random._replay("ustar", words)
        ref, ref_used = ustar_reference(words)
        assert Fraction(value) == ref and used == ref_used, (words, value, ref)
        assert 0 < value < 1
    # one word suffices when the first 1 is among the top 12 bits: the value is the word read as
    # a binary fraction, truncated to 53 significant bits
    for w in rng.integers(1 << 52, U64, size=200, dtype=np.uint64):
        w = int(w)
        lz = 64 - w.bit_length()
        value, used = _random._replay("ustar", [w])
        assert used == 1 and Fraction(value) == Fraction(w >> (11 - lz), 2 ** (53 + lz))
    # the subnormal grid and the boundary at 2**-1022
    assert _random._replay("ustar", [0] * 16 + [1 << 12])[0] == 5e-324
    assert _random._replay("ustar", [0] * 15 + [1 << 2, 0])[0] == 2.0**-1022
    assert _random._replay("ustar", [0] * 15 + [3, U64 - 1])[0] == np.nextafter(2.0**-1022, 0)


def test_ustar_is_built_from_bit_fields_exactly():
    """The double is assembled from exponent and mantissa bits (no ldexp): it equals
    ldexp(2**52 + m, -(53 + zeros)) bit for bit, across every exponent down to the last normal
    binade and on the subnormal grid below."""
    rng = np.random.default_rng(12)
    for zeros in list(range(0, 140)) + list(range(1000, 1022)):
        full, lz = divmod(zeros, 64)
        for _ in range(3):
            m = int(rng.integers(0, 2**52, dtype=np.uint64))
            if lz <= 11:
                word = (1 << (63 - lz)) | (m << (11 - lz)) | int(rng.integers(0, 2 ** (11 - lz)))
                words = [0] * full + [word]
            else:
                words = [0] * full + [1 << (63 - lz), (m << 12) | 0xABC]
            value, used = _random._replay("ustar", words)
            assert used == len(words)
            assert value == math.ldexp(2**52 + m, -(53 + zeros)), (zeros, m)
            assert value >= 2.0**-1022
    for k in (1, 2, 12345, 2**52 - 1):  # 1022 or more leading zeros: k 2**-1074
        value, _ = _random._replay("ustar", [0] * 15 + [1 << 1] + [k << 12])
        assert value == math.ldexp(k, -1074)


def test_ustar_spare_bits():
    """dpc_ustar also returns the bits of its last word below the ones it used, which the noise
    kernel uses to refine the draw's cell: the low 11 - lz bits of a word with lz <= 11 leading
    zeros, else the low 12 bits of the mantissa word (and of the subnormal grid word)."""
    rng = np.random.default_rng(13)
    for lz in range(64):
        w = (1 << (63 - lz)) | (int(rng.integers(0, 2**63, dtype=np.uint64)) >> lz)
        m2 = int(rng.integers(0, U64, dtype=np.uint64))
        (value, extra, nextra), used = _random._replay("ustar_extra", [w, m2])
        assert value == _random._replay("ustar", [w, m2])[0]
        if lz <= 11:
            assert used == 1 and nextra == 11 - lz and extra == w & ((1 << nextra) - 1)
        else:
            assert used == 2 and nextra == 12 and extra == m2 & 0xFFF
    (value, extra, nextra), used = _random._replay("ustar_extra", [0] * 16 + [(5 << 12) | 0x123])
    assert (value, extra, nextra, used) == (5e-324 * 5, 0x123, 12, 17)


def test_word_reader_reads_the_stream_in_order():
    """The kernels' inline reader gives exactly the generator's words: for ChaCha20 by reading its
    buffer directly (interleaved with ordinary draws, across buffer refills), for other bit
    generators through their callback."""
    gen = ChaCha20(77)
    parts = [_random._words(gen, 5), gen.random_raw(200), _random._words(gen, 300),
             np.array([gen.random_raw()], dtype=np.uint64), _random._words(gen, 1)]
    np.testing.assert_array_equal(np.concatenate(parts), ChaCha20(77).random_raw(507))
    np.testing.assert_array_equal(_random._words(np.random.PCG64(3), 100),
                                  np.random.PCG64(3).random_raw(100))


def test_inline_floor_rint_ulp():
    """The libm-free helpers of the kernels agree with numpy exactly (floor for |x| < 2**62)."""
    rng = np.random.default_rng(14)
    x = np.concatenate([
        rng.normal(scale=10.0, size=2000), rng.normal(scale=1e15, size=500),
        np.arange(-20, 20) + 0.5, np.arange(-20, 20).astype(float), -np.arange(-20, 20) - 0.5,
        [0.0, -0.0, 0.49999999999999994, -0.49999999999999994, 2.0**52 - 0.5, -(2.0**52) + 0.5,
         2.0**52, 2.0**53 + 2, 2.0**61 + 2**10, -(2.0**62) + 2**12, 1e300, -1e300, 5e-324,
         -5e-324, 2.2250738585072014e-308],
    ])
    fl, ri, ul = _random._bit_helpers(x)
    small = np.abs(x) < 2.0**62
    np.testing.assert_array_equal(fl[small], np.floor(x[small]))
    np.testing.assert_array_equal(ri, np.rint(x))
    assert np.array_equal(np.signbit(ri), np.signbit(np.rint(x)))
    pos = x > 0
    np.testing.assert_array_equal(ul[pos], np.spacing(x[pos]))


def test_ustar_draws_in_open_unit_interval():
    x = _random._ustar(1, 1_000_000)
    assert (x > 0).all() and (x < 1).all()


N_USTAR = 2_000_000


@pytest.fixture(scope="module")
def ustar_draws():
    return _random._ustar(20240601, N_USTAR)


def test_ustar_tail_probabilities(ustar_draws):
    """P(U* < 2**-k) = 2**-k, k = 1..20: exact binomial tests (the z-test without the normal
    approximation, which fails for the small counts at large k), Bonferroni over 20."""
    for k in range(1, 21):
        count = int(np.sum(ustar_draws < 2.0**-k))
        p = stats.binomtest(count, N_USTAR, 2.0**-k).pvalue
        assert p > ALPHA / 20, (k, count, N_USTAR * 2.0**-k)


def exponent_counts(x, max_e=30):
    """Counts of the binade e (x in [2**-e, 2**-(e-1))), e = 1..max_e, the rest in one cell."""
    e = -np.frexp(x)[1] + 1  # frexp: x = f 2**p with f in [0.5, 1) -> e = 1 - p
    counts = np.bincount(np.minimum(e, max_e + 1), minlength=max_e + 2)[1:]
    probs = np.array([2.0**-j for j in range(1, max_e + 1)] + [2.0**-max_e])
    return counts, probs


def test_ustar_binades_chisquare(ustar_draws):
    counts, probs = exponent_counts(ustar_draws)
    assert chisquare_pvalue(counts, probs) > ALPHA


def test_ustar_binades_power(ustar_draws):
    """The same test against a geometric exponent law with ratio 0.5 * 1.05 rejects."""
    counts, _ = exponent_counts(ustar_draws)
    q = 0.5 * 1.05
    wrong = np.array([(1 - q) * q ** (j - 1) for j in range(1, 31)] + [q**30])
    assert chisquare_pvalue(counts, wrong) < ALPHA


def test_ustar_ks_uniform(ustar_draws):
    assert stats.kstest(ustar_draws, "uniform").pvalue > ALPHA
    # power: the same test against Uniform(0, 1.01) rejects
    assert stats.kstest(ustar_draws, "uniform", args=(0, 1.01)).pvalue < ALPHA


def test_ustar_mantissa_bits(ustar_draws):
    """Each of the 52 stored mantissa bits is Bernoulli(1/2) (z-tests, Bonferroni over 52)."""
    bits = ustar_draws.view(np.uint64)
    z = z_critical(ALPHA, 52)
    for j in range(52):
        ones = int(np.count_nonzero((bits >> np.uint64(j)) & np.uint64(1)))
        assert abs(ones - N_USTAR / 2) / math.sqrt(N_USTAR / 4) < z, j


def fraction_on_53_bit_grid(x):
    small = x[x < 2.0**-10]
    on_grid = np.count_nonzero(np.floor(small * 2.0**53) == small * 2.0**53)
    return on_grid, len(small)


def test_ustar_resolution(ustar_draws):
    """Below 2**-10 U* has its full 52-bit mantissa, so a multiple of 2**-53 is rare (probability
    <= 2**-10 per draw); a sampler on the grid k 2**-53 gives 100%."""
    on_grid, n_small = fraction_on_53_bit_grid(ustar_draws)
    assert n_small > 1000
    limit = stats.binom.isf(ALPHA, n_small, 2.0**-10)
    assert on_grid <= limit, (on_grid, n_small)
    # power: the usual 53-bit uniform fails the same check
    naive = (ChaCha20(5).random_raw(N_USTAR) >> np.uint64(11)) * 2.0**-53
    on_grid, n_small = fraction_on_53_bit_grid(naive)
    assert on_grid > stats.binom.isf(ALPHA, n_small, 2.0**-10)


# ------------------------------------------------------------------------------------------------
# Uniform integers

def lemire_reference(words, n):
    threshold = U64 % n
    for i, x in enumerate(int(w) for w in words):
        product = x * n
        if product % U64 >= threshold:
            return product >> 64, i + 1
    raise AssertionError("ran out of words")


def test_bounded_bits_to_value():
    rng = np.random.default_rng(3)
    for n in (2, 3, 10, 1000, 2**32 + 15, 3 * 2**62, 2**63 + 1, U64 - 1):
        for _ in range(200):
            words = rng.integers(0, U64, size=40, dtype=np.uint64)
            assert _random._replay("bounded", words, n) == lemire_reference(words, n)
    # n = 3 * 2**62: 2**64 mod n = 2**62, so x = 0 (low half 0) is rejected, x = 1 accepted
    assert _random._replay("bounded", [0, 1], 3 * 2**62) == (0, 2)
    assert _random._replay("bounded", [U64 - 1], 3 * 2**62) == (3 * 2**62 - 1, 1)
    assert _random._replay("bounded", [], 1) == (0, 0)  # n = 1 draws nothing


@pytest.mark.parametrize("n", [2, 3, 7, 10, 1000])
def test_bounded_small_chisquare(n):
    x = _random._bounded(n + 100, n, 300_000)
    assert x.max() < n
    counts = np.bincount(x.astype(np.int64), minlength=n)
    assert chisquare_pvalue(counts, np.full(n, 1 / n)) > ALPHA


def residue_probs(n, m):
    return np.array([(n // m + (r < n % m)) / n for r in range(m)])


def block_probs(n, width):
    edges = list(range(0, n, width)) + [n]
    return np.array([(b - a) / n for a, b in zip(edges[:-1], edges[1:])])


@pytest.mark.parametrize("n", [2**32 + 15, 3 * 2**62, 2**63 - 1, 2**63 + 1, 2**63 + 2**61 + 12345,
                               U64 - 1])
def test_bounded_large_chisquare(n):
    """Three views, exact cell probabilities, Bonferroni over 3: residues mod 3 (where the bias
    of a multiply-shift without rejection shows: for n = 3 * 2**62 it gives multiples of 3 half
    the mass), residues mod 64 (low bits) and 64 blocks of consecutive values (high bits)."""
    x = _random._bounded(n % 1000, n, 400_000)
    assert int(x.max()) < n
    width = -(-n // 64)
    views = [
        (np.bincount((x % np.uint64(3)).astype(np.int64), minlength=3), residue_probs(n, 3)),
        (np.bincount((x % np.uint64(64)).astype(np.int64), minlength=64), residue_probs(n, 64)),
        (np.bincount((x // np.uint64(width)).astype(np.int64), minlength=64), block_probs(n, width)),
    ]
    for counts, probs in views:
        assert chisquare_pvalue(counts, probs) > ALPHA / 3


def test_bounded_power():
    """The mod-3 test rejects the law of a multiply-shift without rejection for n = 3 * 2**62,
    and the small-n test rejects a 5% tilt."""
    n = 3 * 2**62
    x = _random._bounded(1, n, 400_000)
    counts = np.bincount((x % np.uint64(3)).astype(np.int64), minlength=3)
    assert chisquare_pvalue(counts, [0.5, 0.25, 0.25]) < ALPHA
    x = _random._bounded(2, 10, 300_000)
    tilted = np.full(10, 0.1)
    tilted[0], tilted[1] = 0.105, 0.095
    assert chisquare_pvalue(np.bincount(x.astype(np.int64), minlength=10), tilted) < ALPHA


def test_bernoulli_ratio():
    n = 400_000
    z = z_critical(ALPHA, 3)
    for a, b in [(1, 3), (7, 10), (2**62, 3 * 2**62 + 1)]:
        p = a / b
        got = _random._bernoulli_ratio(a + b, a, b, n).mean()
        assert abs(got - p) / math.sqrt(p * (1 - p) / n) < z
    assert _random._bernoulli_ratio(1, 0, 5, 1000).sum() == 0
    assert _random._bernoulli_ratio(1, 5, 5, 1000).all()


# ------------------------------------------------------------------------------------------------
# Bernoulli(exp(-a/b)) and the geometric

def test_bernoulli_exp_reference_values():
    assert abs(math.exp(-1 / 3) - 0.7165313) < 1e-7
    assert abs(math.exp(-5 / 2) - 0.0820850) < 1e-7


BERN_CASES = [
    (1, 3),                        # 0.7165313
    (5, 2),                        # 0.0820850
    (1, 1),
    (7, 7 * 10**15),               # a tiny gamma with a large denominator
    (3 * 10**15 + 1, 7 * 10**15),  # large numerator and denominator, gamma < 1
    (2**62 + 12345, 2**61),        # big numerator: gamma just above 2
    (2**62, 2**63 + 5),            # b * k overflows 64 bits from k = 2: the split draw
]


@pytest.mark.parametrize("a, b", BERN_CASES)
def test_bernoulli_exp_law(a, b):
    n = 400_000
    p = math.exp(-Fraction(a, b))
    got = _random._bernoulli_exp(a % 9973 + b % 7919, a, b, n).mean()
    assert abs(got - p) / math.sqrt(p * (1 - p) / n) < z_critical(ALPHA, len(BERN_CASES))


def test_bernoulli_exp_zero_is_certain():
    assert _random._bernoulli_exp(1, 0, 1, 10_000).all()
    assert _random._bernoulli_exp(1, 0, 2**60, 10_000).all()
    assert _random._replay("bernoulli_exp", [], 0, 17) == (True, 0)


def test_bernoulli_exp_power():
    n = 400_000
    got = _random._bernoulli_exp(3, 1, 3, n).mean()
    wrong = math.exp(-1 / 3 * 1.05)
    assert abs(got - wrong) / math.sqrt(wrong * (1 - wrong) / n) > z_critical(ALPHA)


def geometric_cells(s, t, n_cells=60):
    """Cells [k_j, k_{j+1}) of roughly equal mass and their probabilities q**k_j - q**k_{j+1},
    q = exp(-s/t) (the last cell is open)."""
    lam = s / t
    cuts = sorted({0} | {math.ceil(-math.log1p(-j / n_cells) / lam) for j in range(1, n_cells)})
    probs = [math.exp(-a * lam) - math.exp(-b * lam) for a, b in zip(cuts[:-1], cuts[1:])]
    probs.append(math.exp(-cuts[-1] * lam))
    return np.array(cuts, dtype=np.uint64), np.array(probs)


def geometric_counts(x, cuts):
    cells = np.searchsorted(cuts, x, side="right") - 1
    return np.bincount(cells, minlength=len(cuts))


GEOM_CASES = [(1, 1), (1, 3), (2, 7), (5, 2), (3, 1000), (1, 2**39 + 7), (2**38, 2**39 + 7)]


@pytest.mark.parametrize("s, t", GEOM_CASES)
def test_geometric_exp_law(s, t):
    x = _random._geometric_exp(s * 31 + t % 1009, s, t, 200_000)
    cuts, probs = geometric_cells(s, t)
    assert chisquare_pvalue(geometric_counts(x, cuts), probs) > ALPHA / len(GEOM_CASES)


def test_geometric_exp_power():
    """The same chi-square against the rate s/t * 1.05 rejects."""
    s, t = 2, 7
    x = _random._geometric_exp(5, s, t, 200_000)
    cuts, _ = geometric_cells(s, t)
    lam = s / t * 1.05
    edges = [int(c) for c in cuts]
    wrong = [math.exp(-a * lam) - math.exp(-b * lam) for a, b in zip(edges[:-1], edges[1:])]
    wrong.append(math.exp(-edges[-1] * lam))
    assert chisquare_pvalue(geometric_counts(x, cuts), wrong) < ALPHA


def test_geometric_quotient_is_exact_in_128_bits():
    rng = np.random.default_rng(8)
    for _ in range(2000):
        u, t, v, s = (int(rng.integers(1, U64, dtype=np.uint64)) >> int(rng.integers(0, 64))
                      for _ in range(4))
        s = max(s, 1)
        expected = min((u + t * v) // s, U64 - 1)
        assert _random._scaled_quotient(u, t, v, s) == expected
    assert _random._scaled_quotient(U64 - 1, U64 - 1, U64 - 1, 1) == U64 - 1  # saturates
    assert _random._scaled_quotient(5, 2**40, 2**30, 2**20) == (5 + 2**70) // 2**20


def test_samplers_accept_other_bit_generators():
    """Kernels draw from any numpy BitGenerator given (tests only): the same words give the
    same values."""
    words = np.random.PCG64(9).random_raw(64)
    x = _random._ustar(np.random.PCG64(9), 5)
    i = 0
    for value in x:
        ref, used = ustar_reference(words[i:])
        assert Fraction(float(value)) == ref
        i += used


def test_module_all():
    for name in dprandom.__all__:
        assert hasattr(dprandom, name), name
    assert dprandom.default_bit_generator is _random.default_bit_generator
    assert "secure" in dprandom.check_random_state.__doc__
    assert "tests" in ChaCha20.__doc__
