/*
 * dgauss_table.h -- the proposal table of dpcore's fast exact discrete Gaussian sampler.
 *
 * Target: N_Z(0, sigma^2), P(y) proportional to f(y) = exp(-y^2 / (2 sigma^2)) on the integers.
 * The sampler draws k = |y| on the half line from a proposal Q, accepts with a probability
 * a(k) <= 1, and applies a random sign. With half-line weights g(0) = 1/2 and g(k) = f(k) for
 * k >= 1 (the sign doubles every k >= 1 but not 0), Q(k) a(k) = D g(k) / U for a constant D:
 * the accepted y has mass proportional to f(y), exactly the discrete Gaussian.
 *
 * The proposal (integer arithmetic only, so its law is exact):
 *   - an entry e of a Walker/Vose alias table over DPC_DGT_COLUMNS columns, with integer
 *     weights w_e summing to exactly U = 2^DPC_DGT_UNIT_BITS: P(e) = w_e / U;
 *   - entry 0 is the zero block {0}; entries 1..N the blocks [L_e, L_e + W) with
 *     L_e = 1 + (e - 1) W and W a power of two; entry N + 1 the tail [L_T, inf), L_T = 1 + N W;
 *     entry N + 2 the null entry, whose weight is what the others leave of U (a proposal that is
 *     always rejected); the remaining entries have weight 0;
 *   - in a block, k = L_e + j with j uniform in [0, W);
 *   - in the tail, k = L_T + b W_t + j with P(b) = 2^-(b+1) (b = 0, 1, ...) and j uniform in
 *     [0, W_t), W_t a power of two with L_T W_t >= sigma^2.
 * So Q(k) = w_e / (U c_e) with c_e = W for a block, W_t 2^(b+1) in the tail's sub-block b, and
 * c_0 = 1 for the zero block. The acceptance is a(k) = D c_e g(k) / w_e; written with f (f(0) =
 * 1, and c_0 = 1/2 absorbing g(0) = 1/2):
 *     a(k) = D c_e f(k) / w_e,  c_0 = 1/2,
 * i.e. accept iff u K_e < f(k) for a real uniform u, K_e = w_e / (D c_e).
 * a <= 1 needs w_e >= D c_e max f over the entry: f(L_e) for a block; in the tail, each step of
 * b multiplies f by at most exp(-L_T W_t / sigma^2) <= 1/e < 1/2, so f(L_T + b W_t) 2^(b+1) <=
 * 2 f(L_T), and w_T >= D (2 W_t) f(L_T) suffices.
 *
 * Everything the fast path relies on is checked with proven bounds (dp_log_dd, crlog.h); libm's
 * exp only proposes candidates that are then verified:
 *   - delta_e = gamma(L_e) + ln(w_e) - ln(D c_e) >= 0, with gamma(k) = k^2 / (2 sigma^2), is
 *     exactly "w_e >= D c_e f(L_e)" (a <= 1); it is stored with an error bound delta_err_e, and
 *     the build checks delta_e >= delta_err_e, so the true value is >= 0 (c_T = 2 W_t);
 *   - in a block, -ln a(L_e + j) = j (2 L_e + j) / (2 sigma^2) + delta_e: the kernel's
 *     acceptance test compares this with -ln u;
 *   - squeeze_e: every u < squeeze_e 2^-32 is accepted anywhere in the block
 *     (squeeze_e 2^-32 <= min a over the block), a single integer comparison.
 * The tail and the null entry never take the fast path (the kernel hands the tail to the exact
 * code; its probability is about 1e-15 at the default cut of 7.9 sigma).
 *
 * Requirements as crlog.h (IEEE binary64, round to nearest, no FMA contraction, no fast-math).
 */
#ifndef DPCORE_DGAUSS_TABLE_H
#define DPCORE_DGAUSS_TABLE_H

#include <math.h>
#include <stdint.h>

#include "crlog.h"

#define DPC_DGT_COLUMN_BITS 9                 /* 512 columns */
#define DPC_DGT_COLUMNS (1 << DPC_DGT_COLUMN_BITS)
#define DPC_DGT_UNIT_BITS 29                  /* weights sum to 2^29 */
#define DPC_DGT_THR_BITS (DPC_DGT_UNIT_BITS - DPC_DGT_COLUMN_BITS)
#define DPC_DGT_SIGN_SHIFT 34                 /* word layout: column | threshold | sign | j */
#define DPC_DGT_MAX_WIDTH_BITS 34             /* block widths W <= 2^34 */
#define DPC_DGT_MIN_RATIO 32.0                /* W <= sigma / 32 when W > 1 */

enum { DPC_DGT_BLOCK = 0, DPC_DGT_TAIL = 1, DPC_DGT_NULL = 2 };

typedef struct {
    int64_t start;      /* smallest |y| of the entry (L_e) */
    uint64_t mask;      /* width - 1 (0 for the zero block, the tail and the null entry) */
    uint32_t squeeze;   /* accept at once when the coarse 32-bit uniform is below this */
    int32_t kind;       /* DPC_DGT_BLOCK, DPC_DGT_TAIL, DPC_DGT_NULL */
    double delta;       /* -ln a at j = 0 (see the header comment), >= 0 */
    double delta_err;   /* |delta - true delta| <= delta_err */
} dpc_dgt_entry;

typedef struct {
    uint32_t thr[DPC_DGT_COLUMNS];     /* column c keeps entry c when r < thr[c] */
    uint32_t alias[DPC_DGT_COLUMNS];   /* else entry alias[c] */
    dpc_dgt_entry entry[DPC_DGT_COLUMNS];
    uint32_t weight[DPC_DGT_COLUMNS];  /* w_e (sum 2^29) */
    double h;                          /* fl(0.5 / fl(sigma sigma)) */
    double D;                          /* the scale of the weights (a double: exact rational) */
    double width;                      /* W */
    int64_t tail_start;                /* L_T */
    int tail_width_bits;               /* log2 W_t */
    int nblocks;                       /* N */
} dpc_dgt;

/* dn <= ln(x) <= up for a positive finite double x (dp_log_dd's enclosure, widened by the
 * roundings: each of hi -+ M and the margin errs by at most 2^-53 (|hi| + M)(1 + 2^-52), and the
 * margin 2^-50 (|hi| + M) covers three of them). */
static inline void dpc_log_bounds(double x, double *dn, double *up)
{
    double hi, lo, err, m, margin;
    dp_log_dd(x, &hi, &lo, &err);
    m = (lo < 0.0 ? -lo : lo) + err;
    margin = 0x1p-50 * ((hi < 0.0 ? -hi : hi) + m);
    *dn = (hi - m) - margin;
    *up = (hi + m) + margin;
}

/* delta = gamma(L) + ln(w) - ln(dc) with *err >= |delta - true value|, for L < 2^53, w >= 1 and
 * dc = D c a positive double (exact) with cdn <= ln(dc) <= cup. gamma(L) = L^2 / (2 sigma^2) is
 * fl(fl(L L) h): fl(L L) one rounding, h = fl(0.5 / fl(sigma sigma)) two, the product one, so
 * within 2^-51 of it. The logarithms come with dpc_log_bounds' enclosures (midpoint +- half
 * width); the three sums add one rounding each (2^-53 of a partial sum). The margin 2^-48 (gl +
 * |lw| + |lc| + |delta| + 1) is more than 4 times all the rounding terms. */
static inline double dpc_dgt_delta(double h, double L, double w, double cdn, double cup,
                                   double *err)
{
    double gl = (L * L) * h;
    double wdn, wup, lw, lc, d;
    dpc_log_bounds(w, &wdn, &wup);
    lw = 0.5 * (wdn + wup);
    lc = 0.5 * (cdn + cup);
    d = gl + (lw - lc);
    *err = 0.5 * (wup - wdn) + 0.5 * (cup - cdn)
           + 0x1p-48 * (gl + fabs(lw) + fabs(lc) + fabs(d) + 1.0);
    return d;
}

/* A 32-bit squeeze threshold S with S 2^-32 <= exp(-G) (S = 0 when none is proven). libm's exp
 * proposes S; dp_log_dd checks -ln(S 2^-32) > G: with (hi, lo, err), -ln(t) >= -(hi + lo) - err,
 * and the computed -(hi + lo) - (err + 2^-50 (|hi| + 1)) errs below that (two roundings of at
 * most 2^-53 |hi| (1 + 2^-52) each, plus err's own rounding). */
static inline uint32_t dpc_dgt_squeeze(double G)
{
    double t, hi, lo, err, v;
    int tries;
    if (!(G >= 0.0) || G > 22.0)  /* exp(-22) 2^32 < 2^0.3: nothing to gain */
        return 0;
    v = exp(-G) * (1.0 - 0x1p-30) * 4294967296.0;
    if (v > 4294967295.0) v = 4294967295.0;
    uint32_t S = (uint32_t)v;
    for (tries = 0; tries < 8 && S > 0; tries++) {
        t = (double)S * 0x1p-32;  /* exact */
        dp_log_dd(t, &hi, &lo, &err);
        if (-(hi + lo) - (err + 0x1p-50 * (fabs(hi) + 1.0)) > G)
            return S;
        S = S - 1 - (S >> 16);
    }
    return 0;
}

/* Vose's alias construction on integer weights summing to DPC_DGT_COLUMNS 2^DPC_DGT_THR_BITS:
 * every column holds exactly 2^THR_BITS units, its own entry's thr[c] and the rest from
 * alias[c], so P(entry e) = w_e / 2^UNIT_BITS exactly. Integer arithmetic only. */
static void dpc_dgt_alias(dpc_dgt *t)
{
    const int64_t cap = (int64_t)1 << DPC_DGT_THR_BITS;
    int64_t rest[DPC_DGT_COLUMNS];
    int small[DPC_DGT_COLUMNS], large[DPC_DGT_COLUMNS];
    int ns = 0, nl = 0, c, s, l;
    for (c = 0; c < DPC_DGT_COLUMNS; c++) {
        rest[c] = t->weight[c];
        t->alias[c] = (uint32_t)c;
        if (rest[c] < cap) small[ns++] = c; else large[nl++] = c;
    }
    while (ns > 0 && nl > 0) {
        s = small[--ns];
        l = large[nl - 1];
        t->thr[s] = (uint32_t)rest[s];
        t->alias[s] = (uint32_t)l;
        rest[l] -= cap - rest[s];
        if (rest[l] < cap) {
            nl--;
            small[ns++] = l;
        }
    }
    /* What is left holds exactly cap units each (the total is exact). */
    while (nl > 0) t->thr[large[--nl]] = (uint32_t)cap;
    while (ns > 0) t->thr[small[--ns]] = (uint32_t)cap;
}

/* Weights for the scale D: w_e = the smallest integer libm suggests above D c_e f(L_e) (f_e is
 * libm's f(L_e), a suggestion only), raised until delta_e >= delta_err_e proves
 * w_e >= D c_e f(L_e). Returns the sum, or -1 on failure. */
static int64_t dpc_dgt_weights(dpc_dgt *t, double D, const double *f)
{
    int64_t sum = 0;
    int e, tries, n_used = t->nblocks + 2;
    double c_zero = 0.5, c_block = t->width, c_tail = 2.0 * ldexp(1.0, t->tail_width_bits);
    double lzero[2], lblock[2], ltail[2];  /* bounds of ln(D c) for the three kinds of c */
    dpc_log_bounds(D * c_zero, &lzero[0], &lzero[1]);
    dpc_log_bounds(D * c_block, &lblock[0], &lblock[1]);
    dpc_log_bounds(D * c_tail, &ltail[0], &ltail[1]);
    for (e = 0; e < DPC_DGT_COLUMNS; e++) {
        dpc_dgt_entry *en = &t->entry[e];
        double c, L, w, d, derr;
        const double *lc;
        t->weight[e] = 0;
        if (e >= n_used) continue;  /* the null entry and unused ones: set by the caller */
        if (e == 0) { c = c_zero; L = 0.0; lc = lzero; }
        else if (e <= t->nblocks) { c = c_block; L = (double)en->start; lc = lblock; }
        else { c = c_tail; L = (double)t->tail_start; lc = ltail; }
        w = floor(D * c * f[e] * (1.0 + 0x1p-30)) + 1.0;
        for (tries = 0; ; tries++) {
            if (tries == 64 || !(w <= 536870912.0)) return -1;
            d = dpc_dgt_delta(t->h, L, w, lc[0], lc[1], &derr);
            if (d >= derr) break;
            w += 1.0 + floor(w * 0x1p-30);
        }
        en->delta = d;
        en->delta_err = derr;
        t->weight[e] = (uint32_t)w;
        sum += (int64_t)w;
    }
    return sum;
}

/* Build the table for sigma (sigma >= 2^-4 and <= 2^40, so nothing over- or underflows) with
 * the tail cut at about tail_sigmas sigma (7.9 by default; smaller in tests, to exercise the
 * tail). Returns 0, or -1 if a bound could not be proven (not expected). */
static inline int dpc_dgt_build(dpc_dgt *t, double sigma, double tail_sigmas)
{
    const double unit = 536870912.0;  /* 2^29 */
    double s2 = sigma * sigma, s2_up, W, S, D, G, g1;
    double f[DPC_DGT_COLUMNS];  /* libm's f(L_e): suggestions for the weights, checked there */
    int64_t n, sum;
    int e, k, tries;
    t->h = 0.5 / s2;
    /* W: the largest power of two <= sigma / 32, at least 1 and at most 2^34 */
    k = 0;
    while (k < DPC_DGT_MAX_WIDTH_BITS && ldexp(1.0, k + 1) * DPC_DGT_MIN_RATIO <= sigma) k++;
    W = ldexp(1.0, k);
    t->width = W;
    /* N blocks cover [1, 1 + N W) up to about tail_sigmas sigma (at most 506 blocks) */
    n = (int64_t)ceil((tail_sigmas * sigma - 1.0) / W);
    if (n < 0) n = 0;
    if (n > DPC_DGT_COLUMNS - 3) return -1;
    t->nblocks = (int)n;
    t->tail_start = 1 + n * (int64_t)W;
    /* W_t: the smallest power of two with L_T W_t >= sigma^2 (s2_up >= sigma^2: s2 is within
       2^-53 of it; L_T W_t is exact, a scaling of an integer below 2^53) */
    s2_up = s2 * (1.0 + 0x1p-50);
    k = 0;
    while ((double)t->tail_start * ldexp(1.0, k) < s2_up) k++;
    if (k > 62) return -1;
    t->tail_width_bits = k;
    for (e = 0; e < DPC_DGT_COLUMNS; e++) {
        dpc_dgt_entry *en = &t->entry[e];
        en->start = 0;
        en->mask = 0;
        en->squeeze = 0;
        en->kind = DPC_DGT_NULL;
        en->delta = 0.0;
        en->delta_err = 0.0;
        if (e == 0) {
            en->kind = DPC_DGT_BLOCK;
        } else if (e <= n) {
            en->kind = DPC_DGT_BLOCK;
            en->start = 1 + (int64_t)(e - 1) * (int64_t)W;
            en->mask = (uint64_t)W - 1;
        } else if (e == n + 1) {
            en->kind = DPC_DGT_TAIL;
            en->start = t->tail_start;
        }
    }
    /* D: the weights D c_e f(L_e) should fill U but for one unit per entry (rounding up) */
    S = 0.5;
    f[0] = 1.0;
    for (e = 1; e <= n + 1; e++) {
        double L = (double)t->entry[e].start;
        double c = e <= n ? W : 2.0 * ldexp(1.0, t->tail_width_bits);
        f[e] = exp(-(L * L) * t->h);
        S += c * f[e];
    }
    D = (unit - (double)(n + 3)) / S * (1.0 - 0x1p-20);
    for (tries = 0; ; tries++) {
        if (tries == 32) return -1;
        sum = dpc_dgt_weights(t, D, f);
        if (sum >= 0 && sum <= (int64_t)unit) break;
        D *= 1.0 - 0x1p-12;
    }
    t->D = D;
    t->weight[n + 2] = (uint32_t)((int64_t)unit - sum);  /* the null entry */
    dpc_dgt_alias(t);
    /* Squeezes: -ln a <= G over the block, G >= max_j j (2 L + j) / (2 sigma^2) + true delta.
       (W - 1)(2 L + W - 1) is a product of integers below 2^53 (one rounding), times h (two
       roundings of its own): g1 within 2^-51 of the maximum; G's factors cover that and the
       two roundings of G itself. */
    for (e = 0; e <= n; e++) {
        dpc_dgt_entry *en = &t->entry[e];
        double w1 = (double)en->mask;
        g1 = (w1 * (2.0 * (double)en->start + w1)) * t->h;
        G = (g1 * (1.0 + 0x1p-49) + (en->delta + en->delta_err)) * (1.0 + 0x1p-50);
        en->squeeze = dpc_dgt_squeeze(G);
    }
    return 0;
}

#endif /* DPCORE_DGAUSS_TABLE_H */
