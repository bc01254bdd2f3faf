"""Selection (dpcore.selection over the _select kernel): the exact laws of the exponential
mechanism, permute-and-flip and one-shot top-k for every method, on arrays and streams; the exact
mode's fallback; extreme utilities; errors; the accountant; bounded memory on long streams."""
import itertools
import math
import threading
import tracemalloc
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from _gof import ALPHA, chisquare_pvalue, exact_path, z_critical
from _generators import GENERATOR_KINDS, generator

import dpcore
from dpcore import _select
from dpcore.selection import METHODS, ExponentialMechanism

EM_METHODS = ["exact", "gumbel", "inverse-cdf"]  # the exponential mechanism's law
N = 40_000  # draws per law test
# Ten utilities with scores 0.3 to 4 (epsilon = 1, sensitivity = 1): every probability >= 0.012,
# so every expected count is >= 490.
UTIL = np.random.default_rng(2024).uniform(0.0, 8.0, 10)
UTIL[6] = -np.inf  # one excluded candidate


# ------------------------------------------------------------------------------------------------
# Exact laws (computed independently of the kernel)


def em_law(u, scale):
    """P(r) = exp(scale u_r) / sum exp(scale u), from exact differences to the maximum."""
    u = np.asarray(u, dtype=float)
    top = max(x for x in u if x != -math.inf)
    s = np.array([float(scale * (Fraction(x) - Fraction(top))) if x != -math.inf else -math.inf
                  for x in u])
    w = np.exp(s)
    return w / w.sum()


def pf_law(u, scale):
    """Permute-and-flip's law by enumerating every order of the candidates (n <= 7): walk the
    order, accept r with probability exp(scale (u_r - max u))."""
    u = np.asarray(u, dtype=float)
    live = [i for i in range(len(u)) if u[i] != -math.inf]
    top = max(u[i] for i in live)
    accept = {i: math.exp(scale * (u[i] - top)) for i in live}
    p = np.zeros(len(u))
    perms = list(itertools.permutations(live))
    for order in perms:
        reach = 1.0
        for i in order:
            p[i] += reach * accept[i]
            reach *= 1.0 - accept[i]
    return p / len(perms)


def peel_law(u, scale, k):
    """Ordered top-k law of k rounds of the exponential mechanism (peeling), as a dict."""
    u = np.asarray(u, dtype=float)
    live = [i for i in range(len(u)) if u[i] != -math.inf]
    law = {}
    for seq in itertools.permutations(live, k):
        p, left = 1.0, list(live)
        for i in seq:
            w = np.exp(scale * (u[left] - u[left].max()))
            p *= w[left.index(i)] / w.sum()
            left.remove(i)
        law[seq] = p
    return law


def counts_of(draws, n):
    return np.bincount(np.asarray(draws), minlength=n)


def power(p_true, p_null, n_draws):
    """Chance that the chi-square test at ALPHA rejects p_null when p_true is the law."""
    p_true, p_null = np.asarray(p_true), np.asarray(p_null)
    keep = p_null > 0
    lam = n_draws * np.sum((p_true[keep] - p_null[keep]) ** 2 / p_null[keep])
    df = keep.sum() - 1
    return stats.ncx2.sf(stats.chi2.isf(ALPHA, df), df, lam)


def scale_of(epsilon=1.0, sensitivity=1.0, monotonic=False, k=None):
    method = "exact" if k is None else "gumbel"
    return ExponentialMechanism.calibrate(
        sensitivity=sensitivity, epsilon=epsilon, monotonic=monotonic, method=method, k=k
    ).scale


def draw(u, n_draws, seed, **kwargs):
    kwargs.setdefault("sensitivity", 1.0)
    kwargs.setdefault("epsilon", 1.0)
    gen = dpcore.ChaCha20(seed)
    return [dpcore.exponential(u, random_state=gen, **kwargs) for _ in range(n_draws)]


def chunked(u, sizes):
    """A fresh iterator over u in chunks of the given sizes (cycled), empty chunks included."""
    def gen():
        i, j = 0, 0
        while i < len(u):
            size = sizes[j % len(sizes)]
            yield u[i:i + size]
            i += size
            j += 1
    return gen


@pytest.fixture(scope="module")
def samples():
    """N draws on UTIL per method (epsilon 1, sensitivity 1), shared by the law and power tests."""
    return {m: counts_of(draw(UTIL, N, 100 + i, method=m), len(UTIL)) for i, m in enumerate(METHODS)}


# ------------------------------------------------------------------------------------------------
# Laws


@pytest.mark.parametrize("method", EM_METHODS)
def test_exponential_mechanism_law(samples, method):
    counts = samples[method]
    assert counts[6] == 0  # excluded
    assert chisquare_pvalue(counts, em_law(UTIL, scale_of())) > ALPHA


@pytest.mark.parametrize("method", EM_METHODS)
def test_exponential_mechanism_power(samples, method):
    """The same test rejects a 10% wrong epsilon (its power is computed, not assumed)."""
    wrong = em_law(UTIL, scale_of(epsilon=1.1))
    assert power(em_law(UTIL, scale_of()), wrong, N) > 1 - 1e-6
    assert chisquare_pvalue(samples[method], wrong) < ALPHA


def test_permute_and_flip_law_and_power():
    u = UTIL[[0, 1, 2, 3, 4, 6]]  # 6 candidates (one excluded): PF law by enumeration
    counts = counts_of(draw(u, N, 7, method="permute-and-flip"), len(u))
    exact = pf_law(u, scale_of())
    assert counts[5] == 0
    assert chisquare_pvalue(counts, exact) > ALPHA
    wrong = pf_law(u, scale_of(epsilon=1.1))
    assert power(exact, wrong, N) > 1 - 1e-6
    assert chisquare_pvalue(counts, wrong) < ALPHA
    # PF is not the exponential mechanism: the EM law is rejected too
    assert chisquare_pvalue(counts, em_law(u, scale_of())) < ALPHA


def test_permute_and_flip_law_on_ten(samples):
    """Report-noisy-max with exponential noise against PF's law by quadrature (10 candidates):
    P(r) = integral of f(z - s_r) prod_{r' != r} F(z - s_r') dz for Exp(1) noise."""
    from scipy import integrate

    s = scale_of() * UTIL
    live = np.isfinite(s)
    top = s[live].max()
    law = np.zeros(len(s))
    for r in np.flatnonzero(live):
        others = s[live & (np.arange(len(s)) != r)]

        def f(z, r=r, others=others):
            return math.exp(-(z - s[r])) * np.prod(1.0 - np.exp(-(z - others)))

        law[r] = integrate.quad(f, top, np.inf, epsabs=1e-13, epsrel=1e-11, limit=200)[0]
    assert abs(law.sum() - 1) < 1e-8
    assert chisquare_pvalue(samples["permute-and-flip"], law / law.sum()) > ALPHA


@pytest.mark.parametrize("method", ["exact", "gumbel", "permute-and-flip"])
def test_monotonic_drops_the_factor_two(method):
    u = UTIL[[0, 1, 2, 3, 4]]
    counts = counts_of(draw(u, N // 2, 11, method=method, monotonic=True), len(u))
    law = pf_law if method == "permute-and-flip" else em_law
    assert scale_of(monotonic=True) == 2 * scale_of()
    assert chisquare_pvalue(counts, law(u, scale_of(monotonic=True))) > ALPHA
    # the test can tell the factor 2 apart (McSherry-Talwar 2007: the factor 2; a negative test)
    assert power(law(u, scale_of(monotonic=True)), law(u, scale_of()), N // 2) > 1 - 1e-6
    assert chisquare_pvalue(counts, law(u, scale_of())) < ALPHA


@pytest.mark.parametrize("method", METHODS)
def test_stream_has_the_same_law(method):
    """Chunks of uneven sizes (empty ones included) from a callable: same law as in memory."""
    stream = chunked(UTIL, [3, 0, 1, 4, 2])
    counts = counts_of(draw(stream, N // 2, 200, method=method), len(UTIL))
    law = em_law(UTIL, scale_of())
    if method == "permute-and-flip":
        from_array = counts_of(draw(UTIL, N // 2, 201, method=method), len(UTIL))
        # two-sample chi-square: the stream and the array give the same law
        table = np.array([counts, from_array])[:, counts + from_array > 0]
        assert stats.chi2_contingency(table).pvalue > ALPHA
    else:
        assert chisquare_pvalue(counts, law) > ALPHA


@pytest.mark.parametrize("method", ["exact", "gumbel", "permute-and-flip"])
def test_iterator_stream_equals_array_draw_for_draw(method):
    """The same seed gives the same index from an array and from a one-shot iterator (the draws
    do not depend on chunking; for the floating-point methods up to the rare extra words drawn
    for tiny uniforms, which change the order of the stream)."""
    same = 0
    for seed in range(200):
        a = dpcore.exponential(UTIL, sensitivity=1.0, epsilon=1.0, method=method, random_state=seed)
        s = dpcore.exponential(chunked(UTIL, [2, 5])(), sensitivity=1.0, epsilon=1.0,
                               method=method, random_state=seed)
        same += a == s
    # exact: every comparison is exact, so identical; others: P(an extra word) ~ 10 * 2**-12
    assert same == 200 if method == "exact" else same >= 190


def test_top_k_law_and_power():
    """Durfee-Rogers: one-shot Gumbel top-2 of 5 has the ordered law of two peeling rounds."""
    u = np.array([1.0, 3.0, 0.5, 2.0, 2.5])
    scale = scale_of(epsilon=2.0, k=2)  # epsilon total 2, k = 2: scale 0.5
    assert scale == 0.5
    gen = dpcore.ChaCha20(31)
    picks = [tuple(dpcore.top_k(u, 2, sensitivity=1.0, epsilon=2.0, random_state=gen)) for _ in range(N)]
    law = peel_law(u, scale, 2)
    keys = sorted(law)
    counts = np.array([sum(1 for p in picks if p == key) for key in keys])
    assert counts.sum() == N  # only ordered pairs of distinct candidates
    assert chisquare_pvalue(counts, [law[key] for key in keys]) > ALPHA
    wrong = peel_law(u, scale * 1.2, 2)
    assert power([law[k] for k in keys], [wrong[k] for k in keys], N) > 1 - 1e-6
    assert chisquare_pvalue(counts, [wrong[key] for key in keys]) < ALPHA


def test_top_k_stream_and_exclusion():
    u = np.array([1.0, -np.inf, 3.0, 0.5, 2.0, 2.5])
    law = peel_law(u, 0.5, 2)
    keys = sorted(law)
    gen = dpcore.ChaCha20(32)
    picks = [tuple(dpcore.top_k(chunked(u, [1, 0, 2])(), 2, sensitivity=1.0, epsilon=2.0,
                                random_state=gen)) for _ in range(N // 2)]
    assert all(1 not in p for p in picks)
    counts = np.array([sum(1 for p in picks if p == key) for key in keys])
    assert counts.sum() == N // 2
    assert chisquare_pvalue(counts, [law[key] for key in keys]) > ALPHA


# ------------------------------------------------------------------------------------------------
# Invariance, exclusion, extreme utilities


@pytest.mark.parametrize("method", METHODS)
def test_adding_a_constant_changes_nothing(method):
    """Integer utilities shifted by 2**40 (exact): the same seed gives the same index."""
    u = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
    for seed in range(100):
        a = dpcore.exponential(u, sensitivity=2.0, epsilon=1.5, method=method, random_state=seed)
        b = dpcore.exponential(u + 2.0**40, sensitivity=2.0, epsilon=1.5, method=method,
                               random_state=seed)
        assert a == b


@pytest.mark.parametrize("method", METHODS)
def test_law_with_a_large_offset(method):
    """u + 1e15 (spacing 0.125 there): the law is the one of the shifted doubles."""
    u = np.arange(5.0) + 1e15
    counts = counts_of(draw(u, 10_000, 41, method=method), 5)
    law = pf_law(u, scale_of()) if method == "permute-and-flip" else em_law(u, scale_of())
    assert chisquare_pvalue(counts, law) > ALPHA


@pytest.mark.parametrize("method", METHODS)
def test_huge_spread(method):
    """1e300 and -1e300 together: the two maxima split evenly, the rest is never chosen; also
    when the maxima come after a small candidate in a stream (the reference moves)."""
    u = np.array([1e300, -1e300, 1e300, 0.0, -np.inf])
    for source in (u, chunked(u[::-1], [1, 1, 3])):
        picks = np.array(draw(source, 4000, 51, method=method))
        if source is not u:
            picks = 4 - picks
        assert set(np.unique(picks)) <= {0, 2}
        assert chisquare_pvalue(counts_of(picks, 5)[[0, 2]], [0.5, 0.5]) > ALPHA


@pytest.mark.parametrize("method", METHODS)
def test_extreme_doubles(method):
    """+-1.7e308 with a score scale of 2 (differences overflow to inf): an even split."""
    u = np.array([1.7e308, -1.7e308, 1.7e308])
    picks = np.array(draw(u, 2000, 57, method=method, epsilon=4.0))
    assert set(np.unique(picks)) <= {0, 2}
    assert chisquare_pvalue(counts_of(picks, 3)[[0, 2]], [0.5, 0.5]) > ALPHA


@pytest.mark.parametrize("method", METHODS)
def test_absorbing_offsets_do_not_decide(method):
    """Two equal utilities of 1e20 after a 0: the noise must not be lost in c * 1e20 + G."""
    u = np.array([0.0, 1e20, 1e20])
    picks = np.array(draw(chunked(u, [1, 1, 1]), 4000, 52, method=method))
    assert set(np.unique(picks)) <= {1, 2}
    assert chisquare_pvalue(counts_of(picks, 3)[1:], [0.5, 0.5]) > ALPHA


@pytest.mark.parametrize("method", METHODS)
def test_tiny_utilities(method):
    """Utilities near 1e-300 give the uniform law (scores differ by 1e-300)."""
    u = np.array([1e-300, 3e-300, 0.0, -1e-300, 5e-324])
    counts = counts_of(draw(u, 10_000, 53, method=method), 5)
    assert chisquare_pvalue(counts, np.full(5, 0.2)) > ALPHA


@pytest.mark.parametrize("method", METHODS)
def test_large_score_scale(method):
    """sensitivity 1e-10: utilities 2e-10 apart are one score unit apart."""
    u = np.array([0.0, 2e-10, 4e-10, -3e-10])
    counts = counts_of(draw(u, 10_000, 54, method=method, sensitivity=1e-10), 4)
    scale = scale_of(sensitivity=1e-10)
    law = pf_law(u, scale) if method == "permute-and-flip" else em_law(u, scale)
    assert chisquare_pvalue(counts, law) > ALPHA


@pytest.mark.parametrize("method", METHODS)
def test_far_candidates_never_win(method):
    """A candidate 1e6 score units below the best is never chosen; the best always is."""
    u = np.array([0.0, 2e6, -1e6])
    assert set(draw(u, 300, 55, method=method)) == {1}


def test_exact_underflow_attack_is_harmless():
    """Ilvento's underflow example (a weight exp(-745) next to exp(-744)): the exact sampler
    neither crashes nor loses the normaliser; one draw from each of 2000 neighbouring pairs
    returns the dominant candidate."""
    for u in ([0.0, -1490.0], [0.0, -1492.0]):
        assert set(draw(np.array(u), 1000, 56, method="exact")) == {0}


# ------------------------------------------------------------------------------------------------
# The exact mode


def test_exact_fallback_matches_fast_decisions_draw_for_draw():
    """Forcing every comparison to the exact rational path changes no output (both are exact,
    and at the first precision level no extra bits are drawn)."""
    u = np.array([0.0, 1.0, 2.0, 3.0, -np.inf, 2.5])
    fast = [dpcore.exponential(u, sensitivity=1.0, epsilon=1.0, random_state=s) for s in range(300)]
    with exact_path(_select):
        slow = [dpcore.exponential(u, sensitivity=1.0, epsilon=1.0, random_state=s) for s in range(300)]
    assert fast == slow


@pytest.mark.slow  # statistical, ~2.6 s of CPU (issue 26 item 7: over 2 s)
def test_exact_fallback_taken_and_law():
    u = np.array([0.0, 1.0, 2.5])
    state = _select.ExactState(scale_of())
    with exact_path(_select):
        state.feed(u, 2.5, dpcore.random.bitgen_handle(3))
        counts = counts_of(draw(u, 3000, 61), 3)
    assert state.stats["exact"] >= 1
    assert chisquare_pvalue(counts, em_law(u, scale_of())) > ALPHA


def test_exact_fast_path_decides_almost_everything():
    u = np.random.default_rng(5).normal(size=200_000)
    state = _select.ExactState(scale_of())
    state.feed(u, float(u.max()), dpcore.random.bitgen_handle(4))
    s = state.stats
    assert s["exact"] == 0
    assert s["coarse"] > 0.99 * len(u)


def _words(seed):
    gen = np.random.default_rng(seed)
    return lambda: int(gen.integers(0, 2**64, dtype=np.uint64))


def test_exact_decider_refines_overlapping_cells():
    """Two candidates in the same cell with equal utility: only refinement can decide, and each
    wins with probability 1/2."""
    cell = (Fraction(12345, 2**64), Fraction(12346, 2**64))
    trials = 400
    wins = sum(_select._decide(Fraction(0), cell, cell, _words(t))[0] for t in range(trials))
    assert abs(wins / trials - 0.5) <= z_critical() * math.sqrt(0.25 / trials)


def test_exact_decider_draws_nothing_when_decided():
    def no_bits():
        raise AssertionError("drew bits")

    lo = (Fraction(1, 2**10), Fraction(1, 2**10) + Fraction(1, 2**64))
    hi = (Fraction(1, 2), Fraction(1, 2) + Fraction(1, 2**64))
    assert _select._decide(Fraction(0), lo, hi, no_bits)[0]  # G(2**-10) ~ 6.9 > G(1/2) ~ 0.37
    assert not _select._decide(Fraction(-7), lo, hi, no_bits)[0]


@pytest.mark.parametrize(
    "w", [1, 2, 3, 2**11, 2**52 - 1, 2**52, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1]
    + [int(x) for x in np.random.default_rng(6).integers(1, 2**64 - 1, 40, dtype=np.uint64)],
)
def test_exact_cell_bounds_enclose_the_exact_values(w):
    """The double-double bounds of G over a word's cell contain the exact rational enclosure and
    are tight."""
    low, high = _select._cell_bounds(w)
    ex_low, ex_high = _select._gumbel_cell_exact(w, 80)
    if ex_low is None:
        assert low == -math.inf
    else:
        assert Fraction(low) <= ex_low
        assert ex_low - Fraction(low) < Fraction(1, 10**12) * (1 + abs(ex_low))
    assert Fraction(high) >= ex_high
    assert Fraction(high) - ex_high < Fraction(1, 10**12) * (1 + abs(ex_high))


def test_exact_cell_bounds_at_zero():
    assert _select._cell_bounds(0)[1] == math.inf
    assert _select._gumbel_cell_exact(0)[1] is None


# ------------------------------------------------------------------------------------------------
# Kernel numerics


def test_log_and_exp_accuracy():
    import mpmath

    mpmath.mp.dps = 40
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.random(500), np.exp(rng.uniform(-700, 700, 500)),
                        1 + rng.uniform(-1e-3, 1e-3, 200), [1.0, 2.0**-1022, 1.7e308, 0.5]])
    for xi, yi in zip(x, _select._log(x)):
        exact = mpmath.log(mpmath.mpf(float(xi)))
        assert abs(mpmath.mpf(float(yi)) - exact) <= 1.5 * np.spacing(abs(float(exact))) + 1e-300
    z = -np.concatenate([rng.random(500) * 708, rng.random(200) * 1e-12, [0.0]])
    for zi, yi in zip(z, _select._exp(z)):
        exact = mpmath.exp(mpmath.mpf(float(zi)))
        assert abs(mpmath.mpf(float(yi)) - exact) <= 1.5 * np.spacing(float(exact))
    assert _select._exp(np.array([0.0]))[0] == 1.0
    assert _select._exp(np.array([-708.5, -np.inf])).tolist() == [0.0, 0.0]


def test_simd_paths_agree_bit_for_bit():
    rng = np.random.default_rng(8)
    u = rng.normal(size=1000) * 10
    v = _select._word_uniform(rng.integers(0, 2**64, 1000, dtype=np.uint64))
    words = rng.integers(0, 2**64, 1000, dtype=np.uint64)
    x = np.exp(rng.uniform(-700, 700, 1000))
    saved = _select._simd_level()
    out = []
    try:
        for level in (0, 1):
            _select._simd_level(level)
            out.append([*_select._noise_keys(u, v, 0.7, 30.0, "gumbel"),
                        *_select._noise_keys(u, v, 0.7, 30.0, "exponential"),
                        _select._log(x), _select._exp(-x[:100]), _select._word_uniform(words),
                        _select._weights(u, 0.7, 30.0)])
    finally:
        _select._simd_level(saved)
    for a, b in zip(*out):
        assert np.array_equal(a, b)


def test_gumbel_noise_is_accurate():
    v = np.array([1e-300, 1e-20, 1e-10, 0.25, 0.5, 0.9, 1 - 2**-53])
    g = _select._gumbel_of_uniform(v)
    import mpmath

    mpmath.mp.dps = 40
    for vi, gi in zip(v, g):
        exact = -mpmath.log(-mpmath.log1p(-mpmath.mpf(float(vi))))
        assert abs(gi - float(exact)) <= 4 * np.spacing(abs(float(exact)))


# ------------------------------------------------------------------------------------------------
# Calibration, errors, accountant


@pytest.mark.parametrize("epsilon, sensitivity, monotonic, k", [
    (1.0, 1.0, False, None), (0.1, 3.0, False, None), (0.7, 0.3, True, None), (2.0, 1.0, False, 7),
    (1e-3, 1e5, True, 3), (1.0, 1.0, False, 1),
])
def test_calibration(epsilon, sensitivity, monotonic, k):
    mech = ExponentialMechanism.calibrate(sensitivity=sensitivity, epsilon=epsilon,
                                          monotonic=monotonic, method="gumbel", k=k)
    factor = (k or 1) * (1 if monotonic else 2)
    exact = Fraction(epsilon) / (factor * Fraction(sensitivity))
    assert Fraction(mech.scale) <= exact
    assert Fraction(math.nextafter(mech.scale, math.inf)) > exact
    assert Fraction(mech.epsilon_effective) >= factor * Fraction(sensitivity) * Fraction(mech.scale)
    assert mech.epsilon_effective <= epsilon
    assert mech.privacy_loss(sensitivity) == mech.epsilon_effective
    assert mech.privacy_loss(0) == 0.0


def _nan_stream():
    yield np.array([1.0, 2.0])
    yield np.array([np.nan])


@pytest.mark.parametrize("utility, kwargs, exc, match", [
    ([1.0, np.nan], {}, ValueError, "utility must not contain NaN"),
    ([1.0, np.inf], {}, ValueError, r"utility must not contain \+inf"),
    ([], {}, ValueError, "utility must contain at least one candidate"),
    ([-np.inf, -np.inf], {}, ValueError, "utility: every candidate is excluded"),
    ([[1.0, 2.0]], {}, ValueError, "utility must be one-dimensional"),
    (3.0, {}, ValueError, "utility must be one-dimensional"),
    (["a", "b"], {}, TypeError, "utility must contain real numbers"),
    ([1.0, 2.0], {"epsilon": 0.0}, ValueError, "epsilon must be > 0"),
    ([1.0, 2.0], {"epsilon": -1.0}, ValueError, "epsilon must be > 0"),
    ([1.0, 2.0], {"epsilon": math.nan}, ValueError, "epsilon must be finite"),
    ([1.0, 2.0], {"sensitivity": 0.0}, ValueError, "sensitivity must be > 0"),
    ([1.0, 2.0], {"method": "softmax"}, ValueError, "method must be one of"),
    ([1.0, 2.0], {"monotonic": 1}, TypeError, "monotonic must be True or False"),
    ([1.0, 2.0], {"epsilon": 1e-300, "sensitivity": 1e300}, ValueError, "epsilon / sensitivity"),
])
def test_errors_name_the_parameter(utility, kwargs, exc, match):
    kwargs = {"sensitivity": 1.0, "epsilon": 1.0, **kwargs}
    with pytest.raises(exc, match=match):
        dpcore.exponential(utility, **kwargs)


def test_missing_sensitivity_is_named():
    with pytest.raises(TypeError, match="sensitivity"):
        dpcore.exponential([1.0, 2.0], epsilon=1.0)
    with pytest.raises(TypeError, match="epsilon"):
        dpcore.top_k([1.0, 2.0], 1, sensitivity=1.0)


@pytest.mark.parametrize("method", METHODS)
def test_stream_errors(method):
    with pytest.raises(ValueError, match=r"utility \(chunk 1 of the stream\) must not contain NaN"):
        dpcore.exponential(_nan_stream if method == "inverse-cdf" else _nan_stream(),
                           sensitivity=1.0, epsilon=1.0, method=method)
    with pytest.raises(ValueError, match="utility must contain at least one candidate"):
        dpcore.exponential(lambda: iter([np.array([]), np.array([-np.inf])]), sensitivity=1.0,
                           epsilon=1.0, method=method)


def test_inverse_cdf_needs_a_rereadable_stream():
    with pytest.raises(ValueError, match="inverse-cdf"):
        dpcore.exponential(iter([np.ones(3)]), sensitivity=1.0, epsilon=1.0, method="inverse-cdf")
    calls = []

    def changing():
        calls.append(1)
        return iter([np.ones(3) * len(calls)])

    with pytest.raises(ValueError, match="different chunks on the second pass"):
        dpcore.exponential(changing, sensitivity=1.0, epsilon=1.0, method="inverse-cdf")


def test_top_k_errors():
    with pytest.raises(ValueError, match="k must be at most"):
        dpcore.top_k([1.0, -np.inf, 2.0], 3, sensitivity=1.0, epsilon=1.0)
    with pytest.raises(ValueError, match="k must be at most"):
        dpcore.top_k(iter([np.array([1.0, 2.0])]), 3, sensitivity=1.0, epsilon=1.0)
    with pytest.raises(ValueError, match="k must be >= 1"):
        dpcore.top_k([1.0, 2.0], 0, sensitivity=1.0, epsilon=1.0)
    with pytest.raises(TypeError, match="k must be an integer"):
        dpcore.top_k([1.0, 2.0], 1.5, sensitivity=1.0, epsilon=1.0)
    with pytest.raises(ValueError, match="method must be one of 'gumbel'"):
        dpcore.top_k([1.0, 2.0], 1, sensitivity=1.0, epsilon=1.0, method="exact")


@pytest.mark.parametrize("method", METHODS)
def test_accountant_charged_and_refusal_draws_nothing(method):
    acc = dpcore.Accountant(1.0)
    dpcore.exponential([1.0, 2.0], sensitivity=1.0, epsilon=0.6, method=method, accountant=acc)
    assert acc.spent[0] == ExponentialMechanism.calibrate(
        sensitivity=1.0, epsilon=0.6, method=method).epsilon_effective
    assert acc.history[-1].label == f"exponential/{method}"
    gen, twin = dpcore.ChaCha20(3), dpcore.ChaCha20(3)
    with pytest.raises(dpcore.BudgetExceeded):
        dpcore.exponential([1.0, 2.0], sensitivity=1.0, epsilon=0.6, method=method,
                           accountant=acc, random_state=gen)
    assert gen.random_raw() == twin.random_raw()  # nothing was drawn
    assert acc.spent[0] <= 0.6


def test_top_k_accountant():
    acc = dpcore.Accountant(1.0)
    dpcore.top_k([1.0, 2.0, 3.0], 2, sensitivity=1.0, epsilon=0.5, accountant=acc)
    assert 0.49 < acc.spent[0] <= 0.5
    gen, twin = dpcore.ChaCha20(4), dpcore.ChaCha20(4)
    with pytest.raises(dpcore.BudgetExceeded):
        dpcore.top_k([1.0, 2.0, 3.0], 2, sensitivity=1.0, epsilon=0.6, accountant=acc,
                     random_state=gen)
    assert gen.random_raw() == twin.random_raw()


def test_invalid_array_charges_nothing():
    acc = dpcore.Accountant(1.0)
    with pytest.raises(ValueError):
        dpcore.exponential([1.0, np.nan], sensitivity=1.0, epsilon=0.5, accountant=acc)
    assert acc.spent[0] == 0.0


def test_seeds_reproduce_and_threads_agree():
    u = np.random.default_rng(9).normal(size=5000)
    serial = [dpcore.exponential(u, sensitivity=1.0, epsilon=5.0, method=m, random_state=s)
              for m in METHODS for s in range(5)]
    out = [None] * len(serial)

    def work(i):
        m, s = METHODS[i // 5], i % 5
        out[i] = dpcore.exponential(u, sensitivity=1.0, epsilon=5.0, method=m, random_state=s)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(serial))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == serial


# ------------------------------------------------------------------------------------------------
# Long streams, bounded memory


def _long_stream(n, chunk, center):
    """n candidates with utility -|i - center|, produced chunk by chunk."""
    def gen():
        for start in range(0, n, chunk):
            idx = np.arange(start, min(start + chunk, n), dtype=np.float64)
            yield -np.abs(idx - center)
    return gen


def _check_long_stream(n, chunk, methods):
    center = n - n // 3 + 17
    for method in methods:
        stream = _long_stream(n, chunk, center)
        tracemalloc.start()
        try:
            if method == "top_k":
                picks = dpcore.top_k(stream(), 5, sensitivity=1.0, epsilon=10.0, random_state=1)
                result = picks[0]
                assert np.all(np.abs(picks - center) <= 200)
            else:
                source = stream if method == "inverse-cdf" else stream()
                result = dpcore.exponential(source, sensitivity=1.0, epsilon=1.0, method=method,
                                            random_state=1)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        # scale 0.5: P(|index - center| > 80) < 1e-16
        assert abs(result - center) <= 80, method
        assert peak < 12 * 8 * chunk, (method, peak)  # a few chunks, never the n candidates


def test_stream_of_millions_bounded_memory():
    _check_long_stream(4 * 10**6, 50_000, ["exact", "gumbel", "top_k"])


@pytest.mark.slow
def test_stream_of_1e8_bounded_memory():
    _check_long_stream(10**8, 10**6 // 4, [*METHODS, "top_k"])


@pytest.mark.parametrize("kind", GENERATOR_KINDS)
def test_exponential_mechanism_law_under_every_generator(kind):
    gen = generator(kind, 51)
    draws = [dpcore.exponential(UTIL, sensitivity=1.0, epsilon=1.0, random_state=gen)
             for _ in range(N // 4)]
    assert chisquare_pvalue(counts_of(draws, len(UTIL)), em_law(UTIL, scale_of())) > ALPHA


# ---------------------------------------------------------------------------------------------
# exponential_index: the exact sampler for callers that calibrate the scale themselves


@pytest.mark.parametrize("seed", range(5))
def test_exponential_index_is_the_exact_methods_draw(seed):
    """The same draw, from the same generator state, as exponential(method="exact") with that
    mechanism's scale (whose law the tests above check)."""
    u = np.array([0.0, 1.5, -np.inf, 2.0, 0.25, 1.75])
    mech = ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=1.3)
    expected = dpcore.selection.exponential(u, sensitivity=1.0, epsilon=1.3,
                                            random_state=dpcore.ChaCha20(seed))
    got = dpcore.selection.exponential_index(u, mech.scale, random_state=dpcore.ChaCha20(seed))
    assert got == expected


def test_exponential_index_errors():
    index = dpcore.selection.exponential_index
    with pytest.raises(ValueError, match="scale must be > 0"):
        index([1.0, 2.0], 0.0, random_state=1)
    with pytest.raises(ValueError, match="utility must not contain NaN"):
        index([1.0, np.nan], 1.0, random_state=1)
    with pytest.raises(ValueError, match="not excluded"):
        index([-np.inf, -np.inf], 1.0, random_state=1)
    with pytest.raises(ValueError, match="one-dimensional"):
        index(np.zeros((2, 2)), 1.0, random_state=1)
