"""The exact permute-and-flip of dpcore.selection: its law against enumeration (with power
against the exponential mechanism and a 10% wrong epsilon), its exact slow path, extremes,
and its users (tree leaf labels)."""
import numpy as np
import pytest

from _gof import ALPHA, chisquare_pvalue
from test_selection import em_law, pf_law, power

import dpcore
from dpcore import selection
from dpcore.selection import ExponentialMechanism, permute_and_flip

N = 30_000  # draws per law test
# Six candidates (one excluded); at epsilon 1 every live probability is >= 0.02 (>= 600 draws).
UTIL = np.array([0.0, 1.5, 2.0, 3.7, 4.0, -np.inf, 2.5])


def scale_of(epsilon=1.0, monotonic=False):
    return ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=epsilon, monotonic=monotonic,
                                          method="exact-permute-and-flip").scale


def draws(u, n, seed, **kw):
    kw.setdefault("sensitivity", 1.0)
    kw.setdefault("epsilon", 1.0)
    gen = dpcore.ChaCha20(seed)
    return np.bincount([permute_and_flip(u, random_state=gen, **kw) for _ in range(n)],
                       minlength=len(u))


def test_law_and_power():
    # alpha = ALPHA (1e-4) fixed before the draws; power computed against two wrong laws
    counts = draws(UTIL, N, 1)
    exact = pf_law(UTIL, scale_of())
    assert counts[5] == 0  # excluded
    assert chisquare_pvalue(counts, exact) > ALPHA
    for wrong in (pf_law(UTIL, scale_of(1.1)), em_law(UTIL, scale_of())):
        assert power(exact, wrong, N) > 1 - 1e-6
        assert chisquare_pvalue(counts, wrong) < ALPHA


@pytest.mark.slow
def test_monotonic_doubles_the_scale():
    counts = draws(UTIL, N, 2, monotonic=True)
    assert scale_of(monotonic=True) == 2 * scale_of()
    assert chisquare_pvalue(counts, pf_law(UTIL, scale_of(monotonic=True))) > ALPHA
    assert power(pf_law(UTIL, scale_of(monotonic=True)), pf_law(UTIL, scale_of()), N) > 1 - 1e-6
    assert chisquare_pvalue(counts, pf_law(UTIL, scale_of())) < ALPHA


@pytest.mark.slow
def test_exact_slow_path_has_the_law(monkeypatch):
    """A fast-path margin of 0.9 sends most coins to the exact rational comparison: the same
    law (and the test still rejects the exponential mechanism's)."""
    monkeypatch.setattr(selection, "_FAST_MARGIN", 0.9)
    counts = draws(UTIL, N // 3, 3)
    exact = pf_law(UTIL, scale_of())
    assert chisquare_pvalue(counts, exact) > ALPHA
    assert power(exact, em_law(UTIL, scale_of()), N // 3) > 1 - 1e-4
    assert chisquare_pvalue(counts, em_law(UTIL, scale_of())) < ALPHA


def test_slow_path_is_taken_and_rare(monkeypatch):
    calls = []
    original = selection._exact.uniform_below_exp

    def spy(*args):
        calls.append(args)
        return original(*args)

    monkeypatch.setattr(selection._exact, "uniform_below_exp", spy)
    gen = dpcore.ChaCha20(4)
    for _ in range(300):
        permute_and_flip(UTIL, sensitivity=1.0, epsilon=1.0, random_state=gen)
    assert not calls  # 53 bits decide all but ~2**-29 of the coins
    monkeypatch.setattr(selection, "_FAST_MARGIN", 0.5)
    for _ in range(30):
        permute_and_flip(UTIL, sensitivity=1.0, epsilon=1.0, random_state=gen)
    assert calls


def test_extremes():
    gen = dpcore.ChaCha20(5)
    # spreads beyond the double range of the gap: the top always wins
    u = np.array([-1e308, 1e308, 0.0])
    assert {permute_and_flip(u, sensitivity=1.0, epsilon=1.0, random_state=gen)
            for _ in range(50)} == {1}
    # ties at the top: uniform among them
    u = np.array([5.0, 5.0, -1e6, 5.0])
    counts = np.bincount([permute_and_flip(u, sensitivity=1.0, epsilon=1.0, random_state=gen)
                          for _ in range(3000)], minlength=4)
    assert counts[2] == 0
    assert chisquare_pvalue(counts[[0, 1, 3]], np.full(3, 1 / 3)) > ALPHA
    # a tiny scale: almost uniform (every coin ~ 1)
    counts = draws(np.array([0.0, 1.0, 2.0]), 3000, 6, epsilon=1e-300 * 2**100)
    assert chisquare_pvalue(counts, np.full(3, 1 / 3)) > ALPHA


def test_bad_input_raises_before_charging():
    acc = dpcore.Accountant(1.0)
    for bad in ([], [np.nan, 1.0], [np.inf, 1.0], [-np.inf, -np.inf], [[1.0, 2.0]]):
        with pytest.raises(ValueError, match="utility"):
            permute_and_flip(bad, sensitivity=1.0, epsilon=0.5, accountant=acc)
    with pytest.raises(ValueError, match="array"):
        permute_and_flip(iter([np.zeros(3)]), sensitivity=1.0, epsilon=0.5, accountant=acc)
    assert not acc.history
    permute_and_flip([1.0, 2.0], sensitivity=1.0, epsilon=0.5, accountant=acc, random_state=1)
    assert len(acc.history) == 1 and acc.spent[0] == 0.5


def test_tree_labels_use_it():
    """learn's leaf labels are this mechanism per row (monotone counts): the law of one row."""
    from dpcore.learn._permute_and_flip import permute_and_flip_labels

    row = np.array([6, 4, 0, 6])
    gen = dpcore.ChaCha20(7)
    labels = permute_and_flip_labels(np.tile(row, (N // 2, 1)), 0.5, gen)
    exact = pf_law(row.astype(float), 0.5)
    assert chisquare_pvalue(np.bincount(labels, minlength=4), exact) > ALPHA
    em = em_law(row.astype(float), 0.5)
    assert power(exact, em, N // 2) > 1 - 1e-6
    assert chisquare_pvalue(np.bincount(labels, minlength=4), em) < ALPHA


def test_rows_in_one_batch_are_independent_with_each_rows_law():
    """flip_coins_rows over alternating rows (one with an excluded candidate): each row's law,
    and the pairs (row 2i, row 2i + 1) follow the product law (independent rows), against
    enumeration; power against the exponential mechanism's law for row B."""
    a = np.array([3.0, 1.0, 0.0])
    b = np.array([0.0, -np.inf, 2.0])
    gen = dpcore.ChaCha20(11)
    picks = selection.flip_coins_rows(np.tile(np.vstack([a, b]), (N // 2, 1)), 0.7, gen)
    first, second = picks[0::2], picks[1::2]
    law_a, law_b = pf_law(a, 0.7), pf_law(b, 0.7)
    assert np.all(second != 1)   # excluded
    assert chisquare_pvalue(np.bincount(first, minlength=3), law_a) > ALPHA
    assert chisquare_pvalue(np.bincount(second, minlength=3), law_b) > ALPHA
    pairs = np.bincount(3 * first + second, minlength=9)
    assert chisquare_pvalue(pairs, np.outer(law_a, law_b).ravel()) > ALPHA
    assert power(law_b, em_law(b, 0.7), N // 2) > 1 - 1e-6
    assert chisquare_pvalue(np.bincount(second, minlength=3), em_law(b, 0.7)) < ALPHA

