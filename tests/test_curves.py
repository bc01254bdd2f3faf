"""Privacy curves against exact values: closed forms (Gaussian composition, Laplace, randomized
response), brute force on small cases (discrete Laplace enumerated; Poisson and
without-replacement subsampling on tiny data sets, every sample enumerated), and the RDP
closed forms against direct sums. A curve's delta and RDP must never be below the exact value,
and must be close to it (the tolerances are the discretisation's)."""
import itertools
import math

import numpy as np
import pytest
from scipy import integrate, optimize
from scipy.special import ndtr
from scipy.stats import binom
from _gof import dlap_pmf

from dpcore import calibration
from dpcore.curves import (DEFAULT_ORDERS, ApproxDP, DiscreteGaussian, DiscreteLaplace, Gaussian,
                           Laplace, PoissonSubsampled, PureDP, Repeated,
                           SampledWithoutReplacement, ZCDP, check_orders, delta_from_rdp,
                           epsilon_from_rdp)

H = 1e-4  # the default grid step
ORDERS = check_orders(DEFAULT_ORDERS)
# Tightness: the discretisation moves every loss up by at most one grid step per discretised
# curve (the split puts a loss's mass on the grid points around it, never above the next one),
# and delta(eps) only grows when losses do, so for k discretised curves composed
# delta_exact(eps) <= delta_pld(eps) <= delta_exact(eps - k h) (plus the tracked error).


# ---------------------------------------------------------------------------------------------
# exact references


def gaussian_delta(ratio, eps):
    """Exact delta(eps) of the Gaussian with sensitivity / sigma = ratio (Balle-Wang)."""
    return ndtr(-eps / ratio + ratio / 2) - math.exp(eps) * ndtr(-eps / ratio - ratio / 2)


def epsilon_of(delta_fn, delta):
    """The eps solving delta_fn(eps) = delta (delta_fn decreasing)."""
    if delta_fn(0.0) <= delta:
        return 0.0
    hi = 1.0
    while delta_fn(hi) > delta:
        hi *= 2
    return optimize.brentq(lambda e: delta_fn(e) - delta, 0.0, hi, xtol=1e-13, rtol=1e-13)


def hockey(p, q, eps):
    return float(np.sum(np.maximum(p - math.exp(eps) * q, 0.0)))


def renyi(p, q, order):
    keep = p > 0
    log_terms = order * np.log(p[keep]) + (1 - order) * np.log(q[keep])
    return float(np.logaddexp.reduce(log_terms)) / (order - 1)


def pld_of(p, q):
    """The exact privacy-loss atoms (loss -> P-mass) of a discrete pair with common support."""
    losses = np.log(p) - np.log(q)
    return losses, p


def compose_atoms(atoms, k):
    """k-fold composition of loss atoms (losses, masses), exactly (outer sums)."""
    losses, masses = atoms
    out_l, out_m = np.array([0.0]), np.array([1.0])
    for _ in range(k):
        out_l = (out_l[:, None] + losses[None, :]).ravel()
        out_m = (out_m[:, None] * masses[None, :]).ravel()
        # merge equal losses (up to rounding) to keep the arrays small
        key = np.round(out_l, 12)
        uniq, inv = np.unique(key, return_inverse=True)
        out_m = np.bincount(inv, weights=out_m)
        out_l = uniq
    return out_l, out_m


def atoms_delta(atoms, eps):
    losses, masses = atoms
    above = losses > eps
    return float(np.sum(masses[above] * -np.expm1(eps - losses[above])))


# ---------------------------------------------------------------------------------------------
# Gaussian: exact closed form of any composition


@pytest.mark.parametrize("sigma_total", [0.7, 2.0, 10.0])
@pytest.mark.parametrize("k", [1, 10, 1000])
def test_gaussian_composition_never_below_the_exact_epsilon(sigma_total, k):
    ratio = 1.0 / sigma_total  # k steps of sigma_total sqrt(k) compose to sigma_total
    exact = epsilon_of(lambda e: gaussian_delta(ratio, e), 1e-6)
    curve = Gaussian(sigma_total * math.sqrt(k)).repeat(k)
    pld_eps = curve.pld(H).epsilon(1e-6)
    rdp_eps = epsilon_from_rdp(ORDERS, curve.rdp(ORDERS), 1e-6)[0]
    assert pld_eps >= exact
    assert pld_eps <= exact + 2 * H  # one discretisation for the whole composition
    assert rdp_eps >= exact
    assert curve.epsilon_for(1e-6) == pytest.approx(pld_eps, abs=1e-12)


def test_gaussian_pld_delta_curve_dominates_and_is_tight():
    pld = Gaussian(1.5, sensitivity=1.0).pld(H)
    for eps in np.linspace(0.0, 4.0, 17):
        exact = gaussian_delta(1 / 1.5, eps)
        assert exact <= pld.delta(eps) <= gaussian_delta(1 / 1.5, eps - H) + 1e-12


# ---------------------------------------------------------------------------------------------
# Laplace, randomized response, discrete Laplace


@pytest.mark.parametrize("scale", [0.5, 2.0, 10.0])
def test_laplace_pld_dominates_the_exact_profile(scale):
    e0 = 1.0 / scale
    pld = Laplace(scale).pld(H)
    def exact(eps):  # delta(eps) = 1 - e^((eps - e0)/2) below e0
        return -math.expm1((min(eps, e0) - e0) / 2)
    for eps in np.linspace(0.0, e0, 9):
        assert exact(eps) <= pld.delta(eps) <= exact(eps - H) + 1e-12
    assert pld.delta(e0 + 2 * H) <= 1e-12


@pytest.mark.parametrize("k", [1, 2, 5, 20])
def test_randomized_response_composition_matches_the_binomial_law(k):
    e0 = 0.3
    p = math.exp(e0) / (1 + math.exp(e0))
    j = np.arange(k + 1)
    atoms = ((2 * j - k) * e0, binom.pmf(j, k, p))
    pld = PureDP(e0).repeat(k).pld(H)
    for eps in np.linspace(0.0, k * e0, 13):
        exact = atoms_delta(atoms, eps)
        assert exact - 1e-13 <= pld.delta(eps) <= atoms_delta(atoms, eps - k * H) + 1e-12


@pytest.mark.parametrize("scale, shift", [(0.7, 1), (2.0, 3), (5.0, 2)])
@pytest.mark.parametrize("k", [1, 3])
def test_discrete_laplace_composition_against_enumeration(scale, shift, k):
    z = np.arange(-200, 201)
    p, q = dlap_pmf(scale)(z - shift), dlap_pmf(scale)(z)
    atoms = compose_atoms(pld_of(p, q), k)
    curve = DiscreteLaplace(scale, shift).repeat(k)
    pld = curve.pld(H)
    for eps in np.linspace(0.0, k * shift / scale, 11):
        exact = atoms_delta(atoms, eps)
        assert exact - 1e-13 <= pld.delta(eps) <= atoms_delta(atoms, eps - k * H) + 1e-12
    rdp = curve.rdp(np.array([1.5, 2.0, 3.0, 7.5, 32.0]))
    exact_rdp = [k * renyi(p, q, a) for a in (1.5, 2.0, 3.0, 7.5, 32.0)]
    np.testing.assert_allclose(rdp, exact_rdp, rtol=1e-9)
    assert np.all(rdp >= exact_rdp)


def test_laplace_rdp_closed_form_values():
    # [checked numerically in ALGORITHMS.md 6.22] b = 1: alpha = 2 -> 0.6191236, 10 -> 0.9286829
    np.testing.assert_allclose(Laplace(1.0).rdp([2.0, 10.0]), [0.6191236, 0.9286829], rtol=1e-6)


def test_pure_dp_rdp_is_randomized_response_and_below_epsilon():
    e0 = 0.8
    p = np.array([math.exp(e0), 1.0]) / (1 + math.exp(e0))
    q = p[::-1]
    for a in (1.5, 2.0, 10.0, 200.0):
        assert PureDP(e0).rdp([a])[0] == pytest.approx(renyi(p, q, a), rel=1e-9)
        assert PureDP(e0).rdp([a])[0] >= renyi(p, q, a)
    assert np.all(PureDP(e0).rdp(ORDERS) <= e0 * (1 + 1e-12))


def _exact_rdp(kind, e0, a):
    """Randomized response, Laplace or discrete Laplace (shift 1, scale 1/e0): the Rényi
    divergence of order a in 50-digit arithmetic (closed forms and an exact geometric sum)."""
    import mpmath
    a, e0 = mpmath.mpf(a), mpmath.mpf(e0)
    if kind == "rr":
        e = mpmath.exp(e0)
        p, q = e / (1 + e), 1 / (1 + e)
        return mpmath.log(p**a * q**(1 - a) + q**a * p**(1 - a)) / (a - 1)
    if kind == "laplace":
        return mpmath.log(a / (2 * a - 1) * mpmath.exp((a - 1) * e0)
                          + (a - 1) / (2 * a - 1) * mpmath.exp(-a * e0)) / (a - 1)
    r = mpmath.exp(-e0)  # DLap(1) against DLap(0): z <= 0, z >= 1 tails are geometric
    norm = (1 - r) / (1 + r)
    left = mpmath.exp(-a * e0) / (1 - r)             # sum over z <= 0 of r^(a|z-1| + (1-a)|z|)
    right = mpmath.exp(-(1 - a) * e0) / (1 - r)      # sum over z >= 1
    return mpmath.log(norm * (left + right)) / (a - 1)


PURE_CURVES = {"rr": PureDP, "laplace": lambda e0: Laplace(1.0 / e0),
               "discrete_laplace": lambda e0: DiscreteLaplace(1.0 / e0)}


@pytest.mark.parametrize("kind", list(PURE_CURVES))
@pytest.mark.parametrize("e0", [2.0**-30, 1e-9, 1e-7, 1e-4, 0.8, 30.0])
def test_pure_dp_rdp_is_never_below_the_exact_divergence(kind, e0):
    """For a small epsilon the closed forms cancel (terms near log 2, result near a e0**2 / 2):
    the bounds must still be above the exact divergences, computed in 50 digits (randomized
    response was 0 at e0 = 1e-9, order 1.1, Laplace negative at order 2, before the
    allowance), and stay tight."""
    import mpmath
    curve = PURE_CURVES[kind](e0)
    with mpmath.workdps(50):
        for a in ORDERS:
            exact = _exact_rdp(kind, float(1 / mpmath.mpf(curve.scale)) if kind != "rr" else e0,
                               a)
            bound = curve.rdp([a])[0]
            assert exact <= bound
            assert bound <= exact * (1 + 1e-6) + 2e-13 / (a - 1)


def test_approx_dp_pld_keeps_delta_at_infinity():
    pld = ApproxDP(0.5, 1e-5).pld(H)
    assert pld.delta(0.5 + 2 * H) >= 1e-5
    assert pld.epsilon(1e-5 + 1e-9) == pytest.approx(0.5, abs=2 * H)
    assert np.all(np.isinf(ApproxDP(0.5, 1e-5).rdp([2.0, 3.0])))


def test_zcdp_and_discrete_gaussian_have_rdp_only():
    assert ZCDP(0.1).pld(H) is None
    dg = DiscreteGaussian(sigma=4.0, sensitivity=2.0)
    assert dg.pld(H) is None
    np.testing.assert_allclose(dg.rdp([2.0, 5.0]), [2 * 0.125, 5 * 0.125], rtol=1e-11)
    assert dg.fallback() == {"rho": dg.rho}
    # the conversion matches the tight zCDP conversion up to the orders grid
    eps_rdp = epsilon_from_rdp(ORDERS, ZCDP(0.5).rdp(ORDERS), 1e-5)[0]
    exact = calibration.zcdp_epsilon(0.5, 1e-5)
    assert exact <= eps_rdp <= exact * 1.002
    d = delta_from_rdp(ORDERS, ZCDP(0.5).rdp(ORDERS), eps_rdp)
    assert 1e-5 * 0.99 <= d <= 1e-5 * (1 + 1e-6)


# ---------------------------------------------------------------------------------------------
# Poisson subsampling: brute force on a tiny data set (a count plus discrete Laplace noise)


def poisson_count_laws(scale, rate, others):
    """Output laws of count + DLap(scale) on a Poisson sample: without and with one more
    record (every other record counts 1), over a support wide enough to be exact to 1e-15."""
    z = np.arange(-150, 151 + others)
    kept = binom.pmf(np.arange(others + 1), others, rate)
    without = sum(w * dlap_pmf(scale)(z - c) for c, w in enumerate(kept))
    with_record = sum(w * ((1 - rate) * dlap_pmf(scale)(z - c) + rate * dlap_pmf(scale)(z - c - 1))
                      for c, w in enumerate(kept))
    return with_record, without


@pytest.mark.parametrize("scale", [0.5, 2.0])
@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_poisson_subsampling_bounds_against_brute_force(scale, rate):
    """Never below the exact divergences of a data set whose other records are random in the
    sample (3 of them), and tight where the dominating pair is met (no other record)."""
    curve = DiscreteLaplace(scale, 1).poisson(rate)
    p, q = poisson_count_laws(scale, rate, others=3)
    orders = np.array([1.5, 2.0, 3.0, 8.0])
    assert np.all(curve.rdp(orders) >= [max(renyi(p, q, a), renyi(q, p, a)) for a in orders])
    for eps in np.linspace(0.0, 1.0 / scale, 5):
        assert curve.pld(H).delta(eps) >= max(hockey(p, q, eps), hockey(q, p, eps)) - 1e-13
    p, q = poisson_count_laws(scale, rate, others=0)
    orders = np.array([1.5, 2.0, 2.5, 3.0, 5.0, 8.0, 20.0])
    exact = np.array([max(renyi(p, q, a), renyi(q, p, a)) for a in orders])
    bound = curve.rdp(orders)
    assert np.all(bound >= exact * (1 - 1e-12))
    pld = curve.pld(H)
    def exact(a, b, eps):
        return max(hockey(a, b, eps), hockey(b, a, eps))
    for eps in np.linspace(0.0, 1.0 / scale, 9):
        assert exact(p, q, eps) - 1e-13 <= pld.delta(eps) <= exact(p, q, eps - H) + 1e-10
    # two releases composed: product laws enumerated
    p2, q2 = np.outer(p, p).ravel(), np.outer(q, q).ravel()
    pld2 = curve.repeat(2).pld(H)
    for eps in np.linspace(0.0, 2.0 / scale, 7):
        assert exact(p2, q2, eps) - 1e-13 <= pld2.delta(eps) <= exact(p2, q2, eps - 2 * H) + 1e-10
    # the plain fallback (amplified pure epsilon) holds exactly
    eps_fallback = curve.fallback()["epsilon"]
    assert max(hockey(p, q, eps_fallback), hockey(q, p, eps_fallback)) <= 1e-15


def sampled_gaussian_laws(sigma, rate):
    """Log-densities of q N(1, s^2) + (1-q) N(0, s^2) and N(0, s^2)."""
    log_norm = math.log(sigma * math.sqrt(2 * math.pi))

    def mixture(x):
        return np.logaddexp(math.log(rate) - (x - 1) ** 2 / (2 * sigma**2),
                            math.log1p(-rate) - x**2 / (2 * sigma**2)) - log_norm

    def base(x):
        return -x**2 / (2 * sigma**2) - log_norm
    return mixture, base


def quad_renyi(log_f, log_g, order, lo, hi):
    value, _ = integrate.quad(lambda x: math.exp(order * log_f(x) + (1 - order) * log_g(x)),
                              lo, hi, limit=400, epsabs=0, epsrel=1e-12, points=[0.0, 1.0])
    return math.log(value) / (order - 1)


@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")
@pytest.mark.parametrize("sigma", [0.8, 2.0])
@pytest.mark.parametrize("rate", [0.01, 0.1, 0.5])
def test_sampled_gaussian_rdp_against_integration(sigma, rate):
    mixture, base = sampled_gaussian_laws(sigma, rate)
    curve = Gaussian(sigma).poisson(rate)
    lo, hi = -30 * sigma, 30 * sigma + 30
    for order in (1.5, 2.0, 3.5, 8.0, 12.0):
        remove = quad_renyi(mixture, base, order, lo, hi)
        add = quad_renyi(base, mixture, order, lo, hi)
        assert add <= remove * (1 + 1e-9)  # Mironov-Talwar-Zhang: removal dominates
        assert curve.rdp([order])[0] >= remove * (1 - 1e-10)
        assert curve.rdp([order])[0] <= remove * (1 + 1e-9) + 1e-10
    # the generic bound (no Gaussian shortcut) also holds in both directions, less tightly
    generic = PoissonSubsampled(ZCDP(0.5 / sigma**2), rate).rdp([2.0, 3.0, 8.0])
    for order, value in zip((2.0, 3.0, 8.0), generic):
        assert value >= max(quad_renyi(mixture, base, order, lo, hi),
                            quad_renyi(base, mixture, order, lo, hi)) * (1 - 1e-10)


@pytest.mark.parametrize("sigma", [0.8, 3.0])
@pytest.mark.parametrize("rate", [0.001, 0.05, 0.5])
def test_sampled_gaussian_pld_against_the_exact_profile(sigma, rate):
    """One subsampled Gaussian step: delta in each direction in closed form (the loss is
    monotone in the output, so each hockey-stick region is a half-line)."""
    r = 1.0 / sigma

    def remove(eps):  # region g(L) > eps, L = r z - r^2/2 in units of sigma
        if eps <= math.log1p(-rate):
            return 1 - math.exp(eps)
        t = math.log1p(math.expm1(eps) / rate)  # base loss threshold
        x = (t + r * r / 2) / r
        return rate * ndtr(-(x - r)) + (1 - rate) * ndtr(-x) - math.exp(eps) * ndtr(-x)

    def add(eps):  # region -g(L) > eps
        if eps >= -math.log1p(-rate):
            return 0.0
        t = math.log1p(math.expm1(-eps) / rate)
        x = (t + r * r / 2) / r
        return ndtr(x) - math.exp(eps) * (rate * ndtr(x - r) + (1 - rate) * ndtr(x))

    pld = Gaussian(sigma).poisson(rate).pld(H)
    for eps in np.linspace(0.0, 3.0, 13):
        exact = max(remove(eps), add(eps))
        assert exact - 1e-13 <= pld.delta(eps) <= max(remove(eps - H), add(eps - H)) + 1e-12
    exact_eps = epsilon_of(lambda e: max(remove(e), add(e)), 1e-6)
    assert exact_eps <= pld.epsilon(1e-6) <= exact_eps + 2 * H


# ---------------------------------------------------------------------------------------------
# sampling without replacement (substitution): every subset of a tiny data set enumerated


def wor_laws(scale, data, changed, m):
    """Output laws of count(sample) + DLap on m records drawn without replacement, for the data
    set and for it with record ``changed`` flipped."""
    z = np.arange(-150, 151 + len(data))
    other = list(data)
    other[changed] = 1 - other[changed]
    subsets = list(itertools.combinations(range(len(data)), m))

    def law(values):
        return sum(dlap_pmf(scale)(z - sum(values[i] for i in s)) for s in subsets) / len(subsets)
    return law(data), law(other)


@pytest.mark.parametrize("scale", [0.5, 2.0])
@pytest.mark.parametrize("n, m", [(4, 2), (5, 2), (4, 1)])
def test_sampling_without_replacement_against_brute_force(scale, n, m):
    curve = SampledWithoutReplacement(DiscreteLaplace(scale, 1, relation="substitution"), m / n)
    orders = np.array([1.5, 2.0, 3.0, 4.0, 6.0, 10.0])
    bound = curve.rdp(orders)
    fallback = curve.fallback()["epsilon"]
    worst = np.zeros(orders.size)
    for data in itertools.product((0, 1), repeat=n):
        for changed in range(n):
            p, q = wor_laws(scale, data, changed, m)
            worst = np.maximum(worst, [renyi(p, q, a) for a in orders])
            assert hockey(p, q, fallback) <= 1e-15  # the amplified pure epsilon holds
    assert np.all(bound >= worst * (1 - 1e-12))
    assert curve.relation == "substitution" and curve.pld(H) is None


# ---------------------------------------------------------------------------------------------
# descriptors


def test_curves_are_hashable_values_and_validate():
    assert Gaussian(1.0) == Gaussian(1.0, 1.0) and hash(Gaussian(1.0)) == hash(Gaussian(1.0))
    assert Gaussian(1.0).poisson(0.1).repeat(3) == Repeated(PoissonSubsampled(Gaussian(1.0), 0.1), 3)
    with pytest.raises(ValueError, match="sigma"):
        Gaussian(0.0)
    with pytest.raises(ValueError, match="rate"):
        Gaussian(1.0).poisson(0.0)
    with pytest.raises(TypeError, match="curve"):
        PoissonSubsampled(1.0, 0.5)
    with pytest.raises(ValueError, match="relation"):
        PureDP(1.0, relation="bounded")
    with pytest.raises(ValueError, match="add/remove"):
        DiscreteLaplace(1.0, 1, relation="substitution").poisson(0.5)
    with pytest.raises(ValueError, match="substitution"):
        Laplace(1.0, relation="add/remove").without_replacement(0.5)
    with pytest.raises(ValueError, match="sensitivity"):
        DiscreteLaplace(1.0, 0)
    with pytest.raises(ValueError, match="interval"):
        Gaussian(1.0).pld(2.0)
    with pytest.raises(ValueError, match="orders"):
        check_orders([0.5, 2.0])


def test_fallbacks_compose_and_amplify():
    assert Laplace(2.0).repeat(3).fallback()["epsilon"] == pytest.approx(1.5)
    assert Gaussian(2.0).repeat(4).fallback() == {"rho": pytest.approx(0.5)}
    amplified = ApproxDP(1.0, 1e-6).poisson(0.01).fallback()
    assert amplified["epsilon"] == pytest.approx(math.log1p(0.01 * math.expm1(1.0)))
    assert amplified["delta"] == pytest.approx(1e-8)
    assert Gaussian(1.0).poisson(0.01).fallback() is None


def test_repeated_gaussian_is_discretised_once():
    """A Gaussian composed k times is the Gaussian with sqrt(k) times the ratio: no k-fold
    discretisation error."""
    k = 10_000
    one = Gaussian(100.0).repeat(k).pld(H).epsilon(1e-6)
    assert one == pytest.approx(Gaussian(1.0).pld(H).epsilon(1e-6), abs=1e-9)


def test_a_law_must_define_its_distribution_function_and_support():
    """The base class's hooks are abstract: a law missing one cannot be built (rather than
    failing later, inside a composition)."""
    from dpcore.curves import _laws

    class NoSupport(_laws._SymmetricLaw):
        def cdf(self, t, strict=False):
            return np.zeros_like(t)

    with pytest.raises(TypeError, match="abstract"):
        NoSupport()
    with pytest.raises(TypeError, match="abstract"):
        _laws._SymmetricLaw()
    assert _laws.RandomizedResponseLaw(1.0).support() == (-1.0, 1.0)
