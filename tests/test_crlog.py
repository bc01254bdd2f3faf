"""Correctly rounded ln (dpcore._crlog, kernel dpcore/crlog.h) against an mpmath reference.

Reference. mpmath's mpf_log at precision p is taken to be within 2^-(p-8) |ln x| of ln x (256 of its
own ulps; mpmath itself aims at < 1 ulp). The test does the final rounding itself, in exact
integer arithmetic: y is RN(ln x) iff ln x lies strictly between the midpoints of y and its
neighbours (the one toward zero is half as far when |y| is a power of two); ln x is never exactly
a midpoint for x != 1 (it is transcendental), so ties cannot occur. A comparison that the
reference's own uncertainty cannot decide is redone at a higher precision (128 -> 256 -> 640 bits;
the hardest binary64 logarithms need about 120 bits). The error bound of dp_log_dd is checked the
same way: |hi + lo - ln x| <= err, exactly. A small subset is also checked against an independent
route (exp of the midpoints brackets x) to make sure the reference itself is right.
"""
import math

import mpmath
import numpy as np
import pytest
from mpmath.libmp import from_float, mpf_log, round_nearest

from dpcore import _crlog

OFF = 0x3FE6A80000000000      # bits of the smallest reduced argument (crlog_table.h)
ONE = 0x3FF0000000000000
PRECISIONS = (128, 256, 640)


# ------------------------------------------------------------------------------------------
# Reference


def _ln_ref(x, prec):
    """(man, exp, tol_exp): ln x ~ man 2^exp with |error| <= 2^tol_exp (man signed; 0 for x = 1)."""
    sign, man, exp, bc = mpf_log(from_float(x), prec, round_nearest)
    if man == 0:
        return 0, 0, None
    return (-man if sign else man), exp, exp + bc - prec + 8


def _fixed(d, k):
    """The double d as an integer multiple of 2^-k (exact; requires the denominator to divide 2^k)."""
    n, den = d.as_integer_ratio()
    shift = k - (den.bit_length() - 1)
    assert shift >= 0
    return n << shift


def _den_bits(d):
    return d.as_integer_ratio()[1].bit_length() - 1


def check(x, y, hi, lo, err):
    """None if y == RN(ln x) and |hi + lo - ln x| <= err, else a description of the failure."""
    if x == 1.0:
        if y == 0.0 and math.copysign(1.0, y) > 0 and hi == 0.0 and lo == 0.0 and err >= 0.0:
            return None
        return f"x=1: y={y!r} hi={hi!r} lo={lo!r} err={err!r}"
    if not (y == y and y != 0.0 and math.isfinite(y)):
        return f"x={x!r}: y={y!r}"
    for prec in PRECISIONS:
        man, exp, tol_exp = _ln_ref(x, prec)
        a = abs(y)
        m, e = math.frexp(a)
        big_y, f = int(m * 2**53), e - 53          # |y| = big_y 2^f, 2^52 <= big_y < 2^53
        k = max(-exp, 2 - f, -tol_exp, _den_bits(hi), _den_bits(lo), _den_bits(err)) + 2
        delta = 1 << (tol_exp + k)
        v = man << (exp + k)                      # ln x ~ v 2^-k, within delta
        verdict = None
        # correct rounding
        if (v < 0) != (y < 0):
            return f"x={x!r}: y={y!r} has the wrong sign"
        d = abs(v) - (big_y << (f + k))
        half_up = 1 << (f - 1 + k)
        half_dn = half_up if big_y != 2**52 else half_up >> 1
        if -half_dn + delta < d < half_up - delta:
            cr = True
        elif d < -half_dn - delta or d > half_up + delta:
            cr = False
        else:
            cr = None
        # error bound
        dist = abs(_fixed(hi, k) + _fixed(lo, k) - v)
        e_fx = _fixed(err, k)
        if dist + delta <= e_fx:
            bound = True
        elif dist - delta > e_fx:
            bound = False
        else:
            bound = None
        if cr is False:
            verdict = f"x={x!r}: y={y!r} is not RN(ln x) (ln x ~ {mpmath.mpf((man, exp))})"
        elif bound is False:
            verdict = f"x={x!r}: |hi + lo - ln x| > err (hi={hi!r} lo={lo!r} err={err!r})"
        if verdict is not None:
            return verdict
        if cr and bound:
            return None
    raise AssertionError(f"reference undecided at {PRECISIONS[-1]} bits for x={x!r}")


def check_all(xs, ys):
    """All failures (as strings) over the arrays xs, ys; hi, lo, err from the kernel."""
    hi, lo, err = _crlog._log_dd_array(xs)
    fails = []
    for args in zip(xs.tolist(), ys.tolist(), hi.tolist(), lo.tolist(), err.tolist()):
        msg = check(*args)
        if msg is not None:
            fails.append(msg)
    return fails


def _exp_bracket(x, y):
    """Independent check of y = RN(ln x): exp(lower midpoint) < x < exp(upper midpoint)."""
    with mpmath.workprec(400):
        ylo, yhi = math.nextafter(y, -math.inf), math.nextafter(y, math.inf)
        m_lo = (mpmath.mpf(y) + mpmath.mpf(ylo)) / 2
        m_hi = (mpmath.mpf(y) + mpmath.mpf(yhi)) / 2
        return mpmath.exp(m_lo) < mpmath.mpf(x) < mpmath.exp(m_hi)


# ------------------------------------------------------------------------------------------
# Arguments


def _from_bits(b):
    return np.asarray(b, dtype=np.uint64).view(np.float64)


def _ustar(rng, n):
    """Mironov's U*: (1 + m 2^-52) 2^-(Z+1), Z ~ Geometric(1/2) - 1 (normal range)."""
    z = rng.geometric(0.5, n) - 1
    m = rng.integers(0, 2**52, n)
    return np.ldexp(1.0 + m / 2.0**52, -(z + 1))


def _near_one(rng, n):
    t = np.exp2(-rng.uniform(1, 52, n)) * rng.uniform(1, 2, n)
    s = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return 1.0 + s * t


def _special_arguments():
    xs = []
    f = float
    # 1 +- k ulp, and 1 +- 2^-j (and neighbours)
    for k in range(1, 600):
        xs += [1.0 + k * 2.0**-52, 1.0 - k * 2.0**-53]
    for j in range(1, 60):
        for base in (1.0 + 2.0**-j, 1.0 - 2.0**-j):
            xs += [base, math.nextafter(base, 0), math.nextafter(base, 2)]
    # powers of two and neighbours (all exponents, subnormal ones too)
    for j in range(-1074, 1024):
        p = math.ldexp(1.0, j)
        xs += [p, math.nextafter(p, 0), math.nextafter(p, math.inf)]
    # tiny, subnormal, extreme
    xs += [k * 5e-324 for k in range(1, 300)]
    xs += [f(np.float64(2.2250738585072014e-308) - k * 5e-324) for k in range(1, 50)]
    xs += [5e-324, 1e-323, 2.2250738585072014e-308, 2.225073858507201e-308,
           1.7976931348623157e308, math.nextafter(1.7976931348623157e308, 0), 1e308, 1e-300]
    # ln x close to a power of two (binade edges of the result) and to simple values
    for j in range(-40, 10):
        for s in (1, -1):
            with mpmath.workprec(100):
                x0 = float(mpmath.exp(s * mpmath.mpf(2) ** j))
            if 0 < x0 < math.inf:
                y = x0
                for _ in range(30):
                    y = math.nextafter(y, 0)
                y0 = y
                for _ in range(61):
                    xs.append(y0)
                    y0 = math.nextafter(y0, math.inf)
    xs += [math.e, 1 / math.e, 10.0, 0.1, 3.0, 0.3, 2.0**0.5, 2.0**-0.5]
    # the table's interval boundaries, for several exponents
    for i in range(257):
        for kk in (-1074, -1060, -1022, -100, -2, -1, 0, 1, 2, 100, 1022, 1023):
            for dlt in (-1, 0, 1, 0x1FF, 0x200):
                b = (OFF + (i << 44) + dlt + (kk << 52)) % 2**64
                xs.append(b)
    out = []
    for v in xs:
        if isinstance(v, int):
            v = float(_from_bits([v])[0])
        if v > 0 and math.isfinite(v):
            out.append(v)
    return np.array(out, dtype=np.float64)


def _random_arguments(rng, n):
    """n arguments mixing the hard regions."""
    parts = [
        _ustar(rng, n * 3 // 10),
        # uniform by bit pattern in (0, 1): all exponents, subnormals included
        _from_bits(rng.integers(1, ONE, n // 10, dtype=np.uint64)),
        # uniform by value in (0, 1)
        rng.random(n // 10),
        # > 1 by bit pattern, up to the largest double
        _from_bits(rng.integers(ONE + 1, 0x7FF0000000000000, n // 10, dtype=np.uint64)),
        # moderate values > 1
        np.exp(rng.uniform(0, 50, n // 10)),
        _near_one(rng, n // 10),
        # the intervals next to 1, where the relative error bound is at its worst
        rng.uniform(0.994, 1.006, n // 20),
        # subnormals by bit pattern
        _from_bits(rng.integers(1, 2**52, n // 20, dtype=np.uint64)),
    ]
    x = np.concatenate(parts)
    x = x[(x > 0) & np.isfinite(x)]
    rest = n - x.shape[0]
    return np.concatenate([x, rng.uniform(0.5, 2.0, max(rest, 0))])


# ------------------------------------------------------------------------------------------
# Tests


def test_special_arguments_bit_exact_and_bound_holds():
    xs = _special_arguments()
    ys = _crlog.log(xs)
    assert check_all(xs, ys) == []


def test_1e5_arguments_bit_exact_and_bound_holds():
    rng = np.random.default_rng(20240611)
    xs = _random_arguments(rng, 100_000)
    assert xs.shape[0] >= 100_000
    ys = _crlog.log(xs)
    fails = check_all(xs, ys)
    assert fails == [], fails[:10]
    # fast path agrees with log wherever it decides
    fast, ok = _crlog._log_cr_fast_array(xs)
    assert np.array_equal(fast[ok], ys[ok])


@pytest.mark.slow
def test_1e7_arguments_bit_exact_and_bound_holds():
    rng = np.random.default_rng(7)
    total, fails = 0, []
    for _ in range(10):
        xs = _random_arguments(rng, 1_000_000)
        ys = _crlog.log(xs)
        fails += check_all(xs, ys)
        total += xs.shape[0]
    assert total >= 10_000_000
    assert fails == [], fails[:10]


def test_reference_agrees_with_exp_bracket():
    rng = np.random.default_rng(3)
    xs = np.concatenate([_ustar(rng, 300), _near_one(rng, 200), [5e-324, 1e300, 2.0**-1022]])
    ys = _crlog.log(xs)
    for x, y in zip(xs.tolist(), ys.tolist()):
        assert _exp_bracket(x, y), x


def test_fast_path_decides_almost_all_ustar_and_rest_is_exact():
    rng = np.random.default_rng(11)
    xs = _ustar(rng, 1_000_000)
    fast, ok = _crlog._log_cr_fast_array(xs)
    frac = ok.mean()
    assert frac > 0.999, frac
    undecided = xs[~ok]
    assert undecided.shape[0] > 0  # ~1e-4: there are some, so the fallback below is exercised
    ys = _crlog.log(undecided)
    assert check_all(undecided, ys) == []
    for x in undecided[:20].tolist():
        assert _crlog._log_cr_fast(x) is None
        assert _crlog.log(x) == ys[undecided.tolist().index(x)]
    # everything, through log, equals the fast path where it decided
    full = _crlog.log(xs)
    assert np.array_equal(full[ok], fast[ok])


def test_checker_flags_wrong_results():
    rng = np.random.default_rng(5)
    xs = np.concatenate([_ustar(rng, 300), _near_one(rng, 100), [2.0, 0.5, 5e-324, 1e308],
                         [math.exp(0.5), math.exp(-1.0), math.exp(2.0)]])
    ys = _crlog.log(xs)
    hi, lo, err = _crlog._log_dd_array(xs)
    for x, y, h, l, e in zip(xs.tolist(), ys.tolist(), hi.tolist(), lo.tolist(), err.tolist()):
        assert check(x, y, h, l, e) is None
        for wrong in (math.nextafter(y, math.inf), math.nextafter(y, -math.inf), -y):
            assert check(x, wrong, h, l, e) is not None
        # an error bound that does not contain ln x
        assert check(x, y, h, l + 4 * e + abs(h) * 2.0**-60, e) is not None
        assert check(x, y, h, l, 0.0) is not None
    assert check(1.0, 5e-324, 0.0, 0.0, 0.0) is not None
    assert check(1.0, -0.0, 0.0, 0.0, 0.0) is not None


def test_log_of_one_is_plus_zero():
    y = _crlog.log(1.0)
    assert y == 0.0 and math.copysign(1.0, y) == 1.0
    assert _crlog._log_dd(1.0) == (0.0, 0.0, 0.0)
    assert math.copysign(1.0, _crlog._log_cr_fast(1.0)) == 1.0


def test_shapes_and_types():
    x = np.array([[0.5, 1.0], [2.0, 3.0]])
    y = _crlog.log(x)
    assert y.shape == (2, 2) and y.dtype == np.float64
    assert y[0, 1] == 0.0 and y[1, 0] == math.log(2.0)
    assert isinstance(_crlog.log(2.0), float)
    assert isinstance(_crlog.log(np.float64(2.0)), float)
    assert _crlog.log(np.array(2.0)).shape == ()
    assert _crlog.log([0.5, 2.0]).tolist() == [-math.log(2.0), math.log(2.0)]
    assert _crlog.log(np.array([])).shape == (0,)
    assert _crlog.log(x[:, ::-1]).tolist() == [[y[0, 1], y[0, 0]], [y[1, 1], y[1, 0]]]


@pytest.mark.parametrize("bad", [0.0, -0.0, -1.0, -5e-324, math.inf, -math.inf, math.nan, "a", None])
def test_invalid_input_raises(bad):
    with pytest.raises(ValueError, match="x"):
        _crlog.log(bad)
    if isinstance(bad, float):
        with pytest.raises(ValueError, match="x"):
            _crlog.log(np.array([1.0, bad, 2.0]))
        assert _crlog._log_cr_fast(bad) is None
        hi, lo, err = _crlog._log_dd(bad)
        assert math.isnan(hi) and math.isnan(lo) and err == math.inf
