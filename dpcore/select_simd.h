/* ---- vectorisable elementary functions and block transforms (dpcore _select) ----------
 * Plain IEEE double operations only (no FMA: built with -ffp-contract=off), so the scalar,
 * SSE2 and AVX2 versions of every block function return bit-identical results.
 */
#ifndef DPCORE_SELECT_SIMD_H
#define DPCORE_SELECT_SIMD_H

#include <stdint.h>
#include <string.h>
#include <float.h>
#include "dpc_bits.h"
#include "dpc_cpu.h"

#if defined(__GNUC__) || defined(__clang__)
#define SEL_INLINE static inline __attribute__((always_inline))
#else
#define SEL_INLINE static __inline
#endif

SEL_INLINE uint64_t sel_asu64(double x) { uint64_t u; memcpy(&u, &x, sizeof u); return u; }
SEL_INLINE double sel_asdbl(uint64_t u) { double x; memcpy(&x, &u, sizeof x); return x; }

/* ln 2 = LN2_HI + LN2_LO; LN2_HI is a multiple of 2^-42, so k * LN2_HI is exact for
   |k| < 2^11. */
#define SEL_LN2_HI 0x1.62e42fefa3800p-1
#define SEL_LN2_LO 0x1.ef35793c76730p-45
#define SEL_INV_LN2 0x1.71547652b82fep+0
#define SEL_SQRT_HALF_BITS 0x3fe6a09e667f3bcdULL
#define SEL_ONE_BELOW 0x1.fffffffffffffp-1
#define SEL_TWO52_BITS 0x4330000000000000ULL

/* ln(x) for a positive normal double. x = 2^k m with m in [sqrt(1/2), sqrt(2)) (integer
   operations on the bits; no signed shifts, so it vectorises with SSE2/AVX2), f = m - 1
   (exact), s = f / (2 + f), ln(m) = 2 atanh(s) = f - f^2/2 + s (f^2/2 + R(s^2)) with
   R(z) = sum_k 2 z^k / (2k + 1) ~ z P(z); P is a degree-7 Chebyshev fit on
   [0, (3 - 2 sqrt 2)^2] (relative effect on ln(m) below 2^-60). Error about one ulp. */
SEL_INLINE double sel_log(double x)
{
    const uint64_t ix = sel_asu64(x);
    const uint64_t t = ix + ((uint64_t)1024 << 52) - SEL_SQRT_HALF_BITS;
    const uint64_t e = t >> 52;                                     /* k + 1024 */
    const double m = sel_asdbl(ix - (t & 0xfff0000000000000ULL) + ((uint64_t)1024 << 52));
    const double kd = sel_asdbl(SEL_TWO52_BITS | e) - 4503599627371520.0;  /* 2^52 + 1024 */
    const double f = m - 1.0;
    const double s = f / (2.0 + f);
    const double z = s * s;
    const double p = 0x1.5555555555555p-1 + z * (0x1.9999999999a38p-2 + z * (
                     0x1.2492492476cccp-2 + z * (0x1.c71c720159177p-3 + z * (
                     0x1.745cf9048dd95p-3 + z * (0x1.3b1c355a8f7a2p-3 + z * (
                     0x1.0fbe95d716020p-3 + z * 0x1.0c039c49989c6p-3))))));
    const double hfsq = 0.5 * f * f;
    const double r = f - (hfsq - (s * (hfsq + z * p) + kd * SEL_LN2_LO));
    return kd * SEL_LN2_HI + r;
}

/* exp(x) for x <= 0; 0 below -708 (and for -inf). x = k ln 2 + r, |r| <= ln(2)/2,
   exp(r) = 1 + r + r^2 P(r), P a degree-10 Chebyshev fit (relative error below 2^-61).
   exp(0) == 1 exactly. */
SEL_INLINE double sel_exp(double x)
{
    const double t = x * SEL_INV_LN2 + 0x1.8p52;
    const double kd = t - 0x1.8p52;
    const double r = (x - kd * SEL_LN2_HI) - kd * SEL_LN2_LO;
    const double p = 0x1.0000000000000p-1 + r * (0x1.5555555555557p-3 + r * (
                     0x1.5555555555556p-5 + r * (0x1.11111111100dfp-7 + r * (
                     0x1.6c16c16c162d6p-10 + r * (0x1.a01a01abe62ddp-13 + r * (
                     0x1.a01a01a6d7808p-16 + r * (0x1.71de02375656cp-19 + r * (
                     0x1.27e4db67b4303p-22 + r * (0x1.af4ddd84882fep-26 + r *
                     0x1.1f72fc730b4ffp-29)))))))));
    const double y = 1.0 + (r + (r * r) * p);
    const double scale = sel_asdbl((sel_asu64(t) + 1023) << 52);   /* 2^k */
    const double out = y * scale;
    /* 0 below -708 (also for -inf and the NaN that -inf gives above), as a bit mask: a
       branch-free select the compiler vectorises without -fno-trapping-math. */
    const uint64_t keep = (uint64_t)0 - (uint64_t)(x >= -708.0);
    return sel_asdbl(sel_asu64(out) & keep);
}

/* The uniform of a 64-bit word: RN((w + 1/2) 2^-64), at most 1 - 2^-53. Relative precision
   2^-53 when w >= 2^52; smaller words are finished by sel_fixup (more random bits). */
SEL_INLINE double sel_word_uniform(uint64_t w)
{
    const double hi = sel_asdbl(SEL_TWO52_BITS | (w >> 12)) - 0x1p52;
    const double lo = sel_asdbl(SEL_TWO52_BITS | (w & 0xfff)) - 0x1p52;
    const double v = hi * 0x1p-52 + (lo + 0.5) * 0x1p-64;
    return v < SEL_ONE_BELOW ? v : SEL_ONE_BELOW;
}

/* Gumbel(0, 1) from a uniform v in [DBL_MIN, 1 - 2^-53]: -ln(E), E = -ln(1 - v) an Exp(1)
   draw accurate for small E (the winners): 1 - v = a + b exactly (b = 0 when v >= 1/2,
   |b| <= 2^-54 otherwise) and ln(a + b) = ln(a) + b/a up to (b/a)^2 < 2^-106. b/a is taken
   as b (1 + v + v^2) (no division): for v < 1/2 the difference is below
   |b| (2 v^3 + 2^-51), at most 2^-53 E relative to E >= v. */
SEL_INLINE double sel_gumbel(double v)
{
    const double a = 1.0 - v;
    const double b = (1.0 - a) - v;
    const double e = -(sel_log(a) + b * (1.0 + v * (1.0 + v)));
    return -sel_log(e);
}

#define SEL_DEFINE_BLOCKS(SUFFIX, ATTR)                                                   \
ATTR static void sel_uniform_block_##SUFFIX(const uint64_t *w, double *v, int n)          \
{                                                                                         \
    int i;                                                                                \
    for (i = 0; i < n; i++) v[i] = sel_word_uniform(w[i]);                                \
}                                                                                         \
ATTR static void sel_gumbel_block_##SUFFIX(const double *u, const double *v, double c,    \
                                           double ref, double *g, double *key, int n)     \
{                                                                                         \
    int i;                                                                                \
    for (i = 0; i < n; i++) {                                                             \
        const double gi = sel_gumbel(v[i]);                                               \
        g[i] = gi;                                                                        \
        key[i] = c * (u[i] - ref) + gi;                                                   \
    }                                                                                     \
}                                                                                         \
ATTR static void sel_expo_block_##SUFFIX(const double *u, const double *v, double c,      \
                                         double ref, double *g, double *key, int n)       \
{                                                                                         \
    int i;                                                                                \
    for (i = 0; i < n; i++) {                                                             \
        const double ei = -sel_log(v[i]);                                                 \
        g[i] = ei;                                                                        \
        key[i] = c * (u[i] - ref) + ei;                                                   \
    }                                                                                     \
}                                                                                         \
ATTR static void sel_weight_block_##SUFFIX(const double *u, double c, double ref,         \
                                           double *wt, int n)                             \
{                                                                                         \
    int i;                                                                                \
    for (i = 0; i < n; i++) wt[i] = sel_exp(c * (u[i] - ref));                            \
}                                                                                         \
ATTR static void sel_log_block_##SUFFIX(const double *x, double *y, int n)                \
{                                                                                         \
    int i;                                                                                \
    for (i = 0; i < n; i++) y[i] = sel_log(x[i]);                                         \
}                                                                                         \
ATTR static void sel_exp_block_##SUFFIX(const double *x, double *y, int n)                \
{                                                                                         \
    int i;                                                                                \
    for (i = 0; i < n; i++) y[i] = sel_exp(x[i]);                                         \
}

SEL_DEFINE_BLOCKS(base, )
#if DPC_HAVE_AVX2
SEL_DEFINE_BLOCKS(avx2, __attribute__((target("avx2"))))
#endif

typedef void (*sel_uniform_fn)(const uint64_t *, double *, int);
typedef void (*sel_noise_fn)(const double *, const double *, double, double, double *,
                             double *, int);
typedef void (*sel_weight_fn)(const double *, double, double, double *, int);
typedef void (*sel_map_fn)(const double *, double *, int);

static sel_uniform_fn sel_uniform_block = sel_uniform_block_base;
static sel_noise_fn sel_gumbel_block = sel_gumbel_block_base;
static sel_noise_fn sel_expo_block = sel_expo_block_base;
static sel_weight_fn sel_weight_block = sel_weight_block_base;
static sel_map_fn sel_log_block = sel_log_block_base;
static sel_map_fn sel_exp_block = sel_exp_block_base;
static int sel_level = 0;

/* 0: portable (SSE2 on x86-64), 1: AVX2 when the CPU has it. Returns the level in force. */
static int sel_set_level(int level)
{
    sel_uniform_block = sel_uniform_block_base;
    sel_gumbel_block = sel_gumbel_block_base;
    sel_expo_block = sel_expo_block_base;
    sel_weight_block = sel_weight_block_base;
    sel_log_block = sel_log_block_base;
    sel_exp_block = sel_exp_block_base;
    sel_level = 0;
#if DPC_HAVE_AVX2
    if (level >= 1 && dpc_cpu_has_avx2()) {
        sel_uniform_block = sel_uniform_block_avx2;
        sel_gumbel_block = sel_gumbel_block_avx2;
        sel_expo_block = sel_expo_block_avx2;
        sel_weight_block = sel_weight_block_avx2;
        sel_log_block = sel_log_block_avx2;
        sel_exp_block = sel_exp_block_avx2;
        sel_level = 1;
    }
#endif
    return sel_level;
}

static int sel_get_level(void) { return sel_level; }

#endif
