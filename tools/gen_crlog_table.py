#!/usr/bin/env python3
"""Generate dpcore/crlog_table.h: the reduction table and the proven error bound of dpcore/crlog.h.

Standard library only (decimal at 90 digits for the logarithms, fractions for exact checks), so the
table is reproducible anywhere: `python tools/gen_crlog_table.py` rewrites the header in place.

What is generated (see the comment at the top of dpcore/crlog.h for the algorithm):
  * for each of the 256 reduction intervals I_i of z (the argument scaled to [0.708, 1.416)):
    c_i = C * 2^-q with C < 2^9 (9 significant bits), chosen to minimise max |z c_i - 1| over I_i,
    subject to r = z c_i - 1 being a double for every double z in I_i (checked here);
    TH_i = -ln(c_i) rounded to a multiple of 2^-42, TL_i = RN(-ln(c_i) - TH_i);
  * LN2_HI (ln 2 rounded to a multiple of 2^-42) and LN2_LO = RN(ln 2 - LN2_HI);
  * the polynomial coefficients RN(+-1/n), n = 3..DEG;
  * the error bound: a running-error analysis of the exact C evaluation order, carried out here
    in exact rational arithmetic for every table entry, giving EPS with
    |hi + lo - ln x| <= EPS |hi| for every positive finite double x.
Every precondition the proof uses (exactness of the products and differences, Fast2Sum operand
order) is asserted below for every entry; the script fails rather than emit an unproven table.
"""
from __future__ import annotations

import decimal
import math
import os
import struct
import sys
from fractions import Fraction

decimal.getcontext().prec = 90
D = decimal.Decimal

N_BITS = 8                       # table index bits
N = 1 << N_BITS
IDX_SHIFT = 52 - N_BITS          # 44
SPLIT_BITS = 9                   # zh = z with its low 9 mantissa bits cleared; c has <= 9 bits
ONE_BITS = 0x3FF0000000000000
# OFF: the bit pattern of the smallest reduced argument. Chosen so that z = 1 sits in the middle
# of interval 149: ONE_BITS - OFF = 149.5 * 2^44, OFF ~ 0.708 ~ sqrt(1/2).
OFF = ONE_BITS - 149 * (1 << IDX_SHIFT) - (1 << (IDX_SHIFT - 1))
CENTRAL = (ONE_BITS - OFF) >> IDX_SHIFT
DEG = 9                          # ln(1+r) = sum_{n=1}^{DEG} (-1)^(n+1) r^n / n + tail
K_MAX = 1075                     # |k| <= 1075 for every positive finite double (see crlog.h)
U = Fraction(1, 2**53)           # unit roundoff
TWO42 = 2**42
SAFETY = 2                       # EPS is at least SAFETY times the proven bound


def bits_to_float(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", b))[0]


def float_to_bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def rn(q: Fraction) -> float:
    """Round a rational to the nearest double, ties to even (int/int division is correctly rounded)."""
    return q.numerator / q.denominator


def ulp(x: float) -> Fraction:
    m, e = math.frexp(abs(x))  # |x| = m 2^e, m in [0.5, 1)
    return Fraction(2) ** (e - 53)


def dln(q: Fraction) -> Fraction:
    """ln(q) to 90 significant digits, as a Fraction (error bounded by DLN_ERR relative)."""
    return Fraction((D(q.numerator) / D(q.denominator)).ln())


DLN_ERR = Fraction(1, 10**85)    # generous bound on the relative error of dln


def main() -> None:
    ln2 = dln(Fraction(2))
    ln2_hi = Fraction(round(ln2 * TWO42), TWO42)
    assert ln2_hi.numerator < 2**42   # 42 significant bits: k LN2_HI exact for |k| < 2^11
    ln2_lo = rn(ln2 - ln2_hi)
    # |ln 2 - LN2_HI - LN2_LO| (plus the slack of the 90-digit ln 2)
    eps_ln2 = abs(ln2 - ln2_hi - Fraction(ln2_lo)) + ln2 * DLN_ERR
    assert abs(Fraction(ln2_lo)) <= Fraction(1, 2**43)

    coeffs = [rn(Fraction((-1) ** (n + 1), n)) for n in range(3, DEG + 1)]

    # ---- polynomial evaluation error (order exactly as in crlog.h), for |r| <= R0 ----------
    # Values carry (M, E): M bounds |exact value|, E bounds |computed - exact|.
    R0 = Fraction(1, 2**8)

    def cst(v: Fraction, vf: float):
        return (abs(v), abs(Fraction(vf) - v))

    def mul(x, y):
        (mx, ex), (my, ey) = x, y
        return (mx * my, mx * ey + my * ex + ex * ey + U * (mx + ex) * (my + ey))

    def add(x, y):
        (mx, ex), (my, ey) = x, y
        return (mx + my, ex + ey + U * (mx + ex + my + ey))

    def mul_exact(x, y):  # product by a power of two, no underflow
        (mx, ex), (my, ey) = x, y
        return (mx * my, mx * ey + my * ex + ex * ey)

    r = (R0, Fraction(0))
    cc = [cst(Fraction((-1) ** (n + 1), n), coeffs[n - 3]) for n in range(3, DEG + 1)]
    r2 = mul(r, r)
    r4 = mul(r2, r2)
    # crlog.h: A = C3 + C4 r; B = C5 + C6 r; Dd = (C7 + C8 r) + r2 C9; P = (A + r2 B) + r4 Dd
    assert DEG == 9
    A = add(cc[0], mul_exact(cc[1], r))        # C4 = -1/4: exact product
    B = add(cc[2], mul(cc[3], r))
    Dd = add(add(cc[4], mul_exact(cc[5], r)), mul(r2, cc[6]))   # C8 = -1/8: exact product
    P = add(add(A, mul(r2, B)), mul(r4, Dd))
    e_p = P[1]
    p_max = sum(Fraction(1, n) * R0 ** (n - 3) for n in range(3, DEG + 1))
    # t = r3 P with r3 = (r r) r = r^3 (1 + d1)(1 + d2): |t - r^3 P*| <= K_T rho^3
    k_t = (1 + U) ** 3 * e_p + p_max * ((1 + U) ** 3 - 1)
    t_max_coef = p_max + k_t      # |t| <= t_max_coef rho^3

    def err_bound(rho, k, th_abs, tl_abs, eps_t):
        """Bound on |hi + lo - ln x| given |r| <= rho <= R0, |k|, |TH|, |TL|, |-ln c - TH - TL|."""
        assert rho <= R0
        # two-sums: |h1| <= |w| + rho, |h| <= |h1| + rho^2/2 (each times 1+u)
        w_abs = k * ln2_hi + th_abs
        h1 = (w_abs + rho) * (1 + U)
        h = (h1 + rho**2 / 2) * (1 + U)
        l1, l2 = U * h1, U * h
        # s = (k LN2_LO + TL) - e4h ; e4h = (r2 (r + r1)) / 2, |r2| <= 2^-25 rho, |r + r1| <= 2 rho
        if k == 0:
            e12, e12_err = tl_abs, Fraction(0)      # 0 * LN2_LO + TL = TL exactly
        else:
            kl = k * abs(Fraction(ln2_lo))
            e12 = (kl + tl_abs) * (1 + U) ** 2
            e12_err = U * kl + U * (kl * (1 + U) + tl_abs)
        e4h = Fraction(1, 2**25) * rho**2 * (1 + U) ** 2
        e4h_err = Fraction(1, 2**25) * rho**2 * (2 * U + U**2)
        s = (e12 + e4h) * (1 + U)
        s_err = e12_err + e4h_err + U * (e12 + e4h)
        t = t_max_coef * rho**3
        t_err = k_t * rho**3
        # LO = t + (s + (l1 + l2)): three roundings, each <= u |partial sum|
        lo_round = U * ((l1 + l2) * (1 + (1 + U) + (1 + U) ** 2)
                        + s * ((1 + U) + (1 + U) ** 2) + t * (1 + U) ** 2)
        tail = rho ** (DEG + 1) / ((DEG + 1) * (1 - rho))
        return t_err + s_err + lo_round + tail + k * eps_ln2 + eps_t

    def table_values(c: Fraction):
        neg_ln_c = -dln(c) if c != 1 else Fraction(0)
        th = Fraction(round(neg_ln_c * TWO42), TWO42)
        tl = rn(neg_ln_c - th)
        eps_t = abs(neg_ln_c - th - Fraction(tl)) + abs(neg_ln_c) * DLN_ERR
        assert float(th) == th  # TH_i is a double
        return th, tl, eps_t

    def entry_bound(c: Fraction, rmax: Fraction, a: Fraction, b: Fraction) -> Fraction:
        """Relative error bound for k = 0 on the interval [a, b] with this c."""
        if c == 1:
            # ln z = ln(1 + r), |ln(1 + r)| >= |r| (1 - |r|/2), and err(rho)/rho grows with rho
            return err_bound(rmax, 0, Fraction(0), Fraction(0), Fraction(0)) / (rmax * (1 - rmax / 2))
        th, tl, eps_t = table_values(c)
        # min |ln z| over [a, b] (monotone: at the endpoint nearest 1)
        m_ln = (-dln(b) if b < 1 else dln(a)) * (1 - DLN_ERR)
        return err_bound(rmax, 0, abs(th), abs(Fraction(tl)), eps_t) / m_ln

    entries = []
    r_max_all = Fraction(0)
    rel = Fraction(0)
    worst = None
    for i in range(N):
        lo_bits = OFF + (i << IDX_SHIFT)
        hi_bits = lo_bits + (1 << IDX_SHIFT) - 1
        a = Fraction(bits_to_float(lo_bits))
        b = Fraction(bits_to_float(hi_bits))
        if i == CENTRAL:
            assert a < 1 <= b
            cands = [(Fraction(1), 8)]
        else:
            assert b < 1 or a >= 1
            q = 8 if b < 1 else 9           # c > 1 when z < 1: c = C/2^8; else c = C/2^9
            centre = 2 / (a + b)
            c0 = int(centre * 2**q)
            cands = [(Fraction(C, 2**q), q) for C in range(c0 - 3, c0 + 4) if 256 <= C < 512]
            if abs(a - 1) < Fraction(1, 2**8) and abs(b - 1) < Fraction(1, 2**8):
                cands.append((Fraction(1), 8 if b < 1 else 9))   # c = 1 next to 1 as well
        best = None
        for c, q in cands:
            rmax = max(abs(a * c - 1), abs(b * c - 1))
            if rmax > R0:
                continue
            score = entry_bound(c, rmax, a, b)
            if best is None or (score, rmax) < best[0]:
                best = ((score, rmax), rmax, c, q)
        (score, _), rmax, c, q = best
        C = c * 2**q
        assert C.denominator == 1 and C < 2**SPLIT_BITS
        # Exactness of r = (zh c - 1) + zl c (see crlog.h): on each binade piece [pa, pb] of I_i
        # with ulp g, r is a multiple of g 2^-q, so it is a double if |r| < 2^53 g 2^-q.
        if i == CENTRAL:
            pieces = [(a, Fraction(1) - Fraction(1, 2**53)), (Fraction(1), b)]
        else:
            pieces = [(a, b)]
        for pa, pb in pieces:
            g = ulp(float(pa))
            assert g == ulp(float(pb))
            bound = 2**53 * g / 2**q
            assert max(abs(pa * c - 1), abs(pb * c - 1)) < bound, (i, "r not exact")
            # zh c in [1/2, 2] (Sterbenz for zh c - 1): zh in [z - 2^9 g, z]
            assert (pa - 2**SPLIT_BITS * g) * c > Fraction(1, 2) and pb * c < 2
        # zh has <= 53 - SPLIT_BITS significant bits, C <= SPLIT_BITS bits: zh c exact; zl c exact.
        th, tl, eps_t = table_values(c)
        if c != 1:
            # Fast2Sum(w, r) needs |w| >= |r| (w = TH when k = 0); Fast2Sum(h1, q) needs
            # |h1| >= |q|: |h1| >= (|TH| - R)(1 - u) >= R^2/2 >= |q|.
            assert abs(th) >= rmax, (i, "Fast2Sum(w, r)")
            assert (abs(th) - rmax) * (1 - U) >= rmax**2 / 2, (i, "Fast2Sum(h1, q)")
        if score > rel:
            rel, worst = score, ("k=0, entry", i)
        r_max_all = max(r_max_all, rmax)
        entries.append(dict(i=i, c=float(c), C=int(C), q=q, th=float(th), tl=tl, eps_t=eps_t,
                            rmax=rmax, th_abs=abs(th), score=score,
                            m_ln=(-dln(b) if b < 1 else dln(a)) if c != 1 else None))

    R = r_max_all
    assert R <= R0
    # max |ln z| over the whole reduced range [OFF, 2 OFF)
    z_lo = Fraction(bits_to_float(OFF))
    z_hi = Fraction(bits_to_float(OFF + (1 << 52) - 1))
    l_max = max(-dln(z_lo), dln(z_hi)) * (1 + DLN_ERR)
    max_th = max(e["th_abs"] for e in entries)
    max_tl = max(abs(Fraction(e["tl"])) for e in entries)
    # k != 0: numerator a|k| + b (affine in |k|), |ln x| >= |k| ln 2 - l_max: the ratio is monotone
    # in |k|, so its maximum over 1 <= |k| <= K_MAX is at an end.
    eps_t_max = max(e["eps_t"] for e in entries)
    assert eps_t_max <= Fraction(1, 2**96) and eps_ln2 <= Fraction(2, 10**31)  # as crlog.h states
    # Fast2Sum(w, r) and Fast2Sum(h1, q) when k != 0: |w| >= LN2_HI - max|TH| > R + R^2
    assert (ln2_hi - max_th) * (1 - U) > R + R**2
    # Fast2Sum(h, LO) needs |LO| <= |h|. c = 1, k = 0: |h| >= |r|/2 and |LO| <= (R^2/2 + 2^-25 R
    # + 4u) |r|. Otherwise |h| >= min|ln x| / 2 >= 2^-11 and |LO| <= R^3/2 + 2^-43 k + 2^-42.
    assert t_max_coef * R**2 + Fraction(1, 2**25) * R + 4 * U < Fraction(1, 4)
    assert min(e["m_ln"] for e in entries if e["c"] != 1.0) > Fraction(1, 2**10)
    assert R**3 / 2 + Fraction(K_MAX, 2**43) + Fraction(1, 2**42) < Fraction(1, 2**12)
    for k in (1, K_MAX):
        v = err_bound(R, k, max_th, max_tl, eps_t_max) / (k * ln2 * (1 - DLN_ERR) - l_max)
        if v > rel:
            rel, worst = v, ("k", k)
    # err = fl(EPS |hi|) must be >= rel |ln x|, with |ln x| <= |hi| (1 + u) / (1 - rel)
    need = rel * (1 + U) / ((1 - rel) * (1 - U))
    eps = SAFETY * need
    # round EPS up to 4 significant bits
    m, ex = math.frexp(float(eps))
    eps_c = math.ldexp(math.ceil(m * 16) / 16, ex)
    assert Fraction(eps_c) >= eps

    # Fast2Sum(h, LO): |LO| is tiny against |h| (checked crudely at the worst case)
    out = []
    w = out.append
    w("/* Generated by tools/gen_crlog_table.py -- do not edit; rerun the script instead. */")
    w("/* Reduction table and constants of crlog.h; see crlog.h for the algorithm and the proof. */")
    w("#ifndef DP_CRLOG_TABLE_H")
    w("#define DP_CRLOG_TABLE_H")
    w("")
    w(f"#define DP_CRLOG_OFF 0x{OFF:016x}ULL  /* bits of {float(bits_to_float(OFF))!r} */")
    w(f"#define DP_CRLOG_IDX_SHIFT {IDX_SHIFT}")
    w(f"#define DP_CRLOG_IDX_MASK {N - 1}")
    w(f"#define DP_CRLOG_SPLIT_MASK 0x{(1 << SPLIT_BITS) - 1:x}ULL")
    w(f"/* ln 2 = LN2_HI + LN2_LO + e, LN2_HI a multiple of 2^-42 (42 bits), |e| <= {float(eps_ln2):.3g} */")
    w(f"#define DP_CRLOG_LN2_HI {float(ln2_hi).hex()}")
    w(f"#define DP_CRLOG_LN2_LO {ln2_lo.hex()}")
    for n, cf in zip(range(3, DEG + 1), coeffs):
        w(f"#define DP_CRLOG_C{n} {cf.hex()}  /* RN({'' if n % 2 else '-'}1/{n}) */")
    w(f"/* max |r| over all entries: R = {float(R):.6g} = 2^{math.log2(R):.3f} */")
    w(f"#define DP_CRLOG_RMAX {float(R).hex()}")
    w(f"/* Proven: |hi + lo - ln x| <= {float(rel):.4g} |ln x| = 2^{math.log2(rel):.2f} |ln x|"
      f" (worst case {worst[0]} {worst[1]}); */")
    w(f"/* EPS = {SAFETY} x that bound, converted to |hi| and rounded up: 2^{math.log2(eps_c):.2f} */")
    w(f"#define DP_CRLOG_EPS {eps_c.hex()}")
    # dp_log_cr_fast compares with fl(EPS_DECIDE |hi|) >= err (1 + 2^-49), err = fl(EPS |hi|)
    eps_d = Fraction(eps_c) * (1 + Fraction(1, 2**48))
    assert Fraction(float(eps_d)) == eps_d
    w(f"#define DP_CRLOG_EPS_DECIDE {float(eps_d).hex()}  /* EPS (1 + 2^-48), exact */")
    w("")
    w("/* c = C 2^-q (C < 2^9), th + tl = -ln(c); th a multiple of 2^-42 */")
    w("typedef struct { double c, th, tl; } dp_crlog_entry;")
    w("")
    w(f"static const dp_crlog_entry dp_crlog_table[{N}] = {{")
    for e in entries:
        w(f"    {{{e['c'].hex()}, {e['th'].hex()}, {e['tl'].hex()}}},  /* {e['i']}: C={e['C']}/2^{e['q']}, "
          f"|r|<=2^{math.log2(e['rmax']):.2f} */")
    w("};")
    w("")
    w("#endif /* DP_CRLOG_TABLE_H */")
    text = "\n".join(out) + "\n"
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dpcore", "crlog_table.h")
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {os.path.normpath(path)}: R = 2^{math.log2(R):.3f}, bound 2^{math.log2(rel):.2f} "
          f"(worst {worst}), EPS = 2^{math.log2(eps_c):.2f}; poly eval K_T = {float(k_t):.3g}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
