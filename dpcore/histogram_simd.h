/* Fast path of dpcore._histogram, four points' coordinates at a time (AVX2 when the CPU has it).
 *
 * A block of rows of a C-contiguous (m, d) sample is read as one flat array of m * d values;
 * value j belongs to axis j mod d, so with P = 4 d the per-axis constants repeat with period P
 * (the caller passes them expanded to P entries: lo, scale, K, 0.5 - margin, stride). For every
 * value, with the decisions of the scalar fast path of _histogram.pyx (module docstring):
 *
 *     t = fl(fl(x - lo) * scale);  ok = 0 <= t < K and |fl((t - trunc(t)) - 1/2)| < 1/2 - margin
 *
 * The AVX2 version omits the test 0 <= t: for finite t < 0, f = t - trunc(t) is exact (Sterbenz)
 * and in (-1, 0], so fl(f - 1/2) <= -1/2 and the second test fails anyway; NaN fails every
 * compare; for t = -inf, trunc(t) = t and f = NaN. For t in [0, K), trunc(t) = floor(t) = b.
 *
 * The value's share of the cell index is b * stride as an int64 (b * stride < 2**34: the grid has
 * at most 2**34 cells), or HIST_FLAG = -2**58 when not ok. The AVX2 version gets the integer
 * without a conversion instruction: b * stride is an integer in [0, 2**34), so fl(b * stride +
 * 2**52) is exact and its bit pattern minus that of 2**52 is b * stride. A row's cell is the sum
 * of its d shares: >= 0 exactly when every value is ok (at most 16 flags: no overflow), and the
 * row then falls in the cell found by the scalar fast path; rows with a negative sum take the
 * checked scalar path (_histogram.pyx). Plain IEEE double operations (subtract, multiply, add,
 * trunc, compare; no FMA: the kernel is built with -ffp-contract=off), so the portable and AVX2
 * versions give identical shares, and a value is accepted only when 0 <= t < K and the margin
 * test holds: the premise of the fast-path proof (_histogram.pyx module docstring). (The scalar
 * loop of _histogram.pyx tests 0 <= t < K as |t - K/2| < K/2, which may send a few more values
 * to the checked path; the cells are the same.)
 */
#ifndef DPCORE_HISTOGRAM_SIMD_H
#define DPCORE_HISTOGRAM_SIMD_H

#include <math.h>
#include <stdint.h>
#include <stddef.h>

#include "dpc_cpu.h"

#define HIST_FLAG (-((int64_t)1 << 58))
#define HIST_MAX_D 16 /* the block path serves d <= 16 */
#define HIST_MAX_P (4 * HIST_MAX_D)
#ifndef HIST_AHEAD
#define HIST_AHEAD 8192 /* bytes of the sample requested (into L2) ahead of the vector loop */
#endif

#if defined(__GNUC__) || defined(__clang__)
#define HIST_PREFETCH_W(p) __builtin_prefetch((p), 1, 1)
#else
#define HIST_PREFETCH_W(p) ((void)0)
#endif

/* Per-axis constants expanded to the period P = 4 d. */
typedef struct {
    double lo[HIST_MAX_P];
    double scale[HIST_MAX_P];
    double nb[HIST_MAX_P];    /* K */
    double width[HIST_MAX_P]; /* 0.5 - margin */
    double stride[HIST_MAX_P];
    int d;
} hist_pattern;

/* Row sums of the shares. A row's cell is the sum of share[i d .. i d + d) when that sum is
 * >= 0; otherwise the row's index goes to fallback[]. Returns the number of fallback rows.
 * With prefetch (grids beyond L2), the cells are stored in cell[] for a later pass and their
 * cache lines requested for writing; without it, counts[cell] += 1 at once. */
static inline ptrdiff_t hist_row_cells(const int64_t *share, ptrdiff_t m, int d, int prefetch,
                                       int64_t *counts, int64_t *cell, int32_t *fallback)
{
    ptrdiff_t i, nf = 0;
    int k;
    int64_t s;
#define HIST_ROWS(D)                                                                          \
    if (prefetch) {                                                                           \
        for (i = 0; i < m; i++) {                                                             \
            const int64_t *r = share + i * (D);                                               \
            s = r[0];                                                                         \
            for (k = 1; k < (D); k++) s += r[k];                                              \
            cell[i] = s;                                                                      \
            if (s >= 0)                                                                       \
                HIST_PREFETCH_W(counts + s);                                                  \
            else                                                                              \
                fallback[nf++] = (int32_t)i;                                                  \
        }                                                                                     \
    } else {                                                                                  \
        for (i = 0; i < m; i++) {                                                             \
            const int64_t *r = share + i * (D);                                               \
            s = r[0];                                                                         \
            for (k = 1; k < (D); k++) s += r[k];                                              \
            if (s >= 0)                                                                       \
                counts[s] += 1;                                                               \
            else                                                                              \
                fallback[nf++] = (int32_t)i;                                                  \
        }                                                                                     \
    }
    switch (d) { /* constant trip counts for the common dimensions */
    case 1: HIST_ROWS(1) break;
    case 2: HIST_ROWS(2) break;
    case 3: HIST_ROWS(3) break;
    case 4: HIST_ROWS(4) break;
    case 5: HIST_ROWS(5) break;
    default: HIST_ROWS(d) break;
    }
#undef HIST_ROWS
    return nf;
}

/* Portable version: one value at a time (the same arithmetic). */
#define HIST_SHARE_SCALAR(X, Q)                                                               \
    do {                                                                                      \
        double t_ = ((X) - pat->lo[Q]) * pat->scale[Q], fl_;                                  \
        if (t_ >= 0.0 && t_ < pat->nb[Q]) {                                                   \
            fl_ = (double)(int64_t)t_; /* t_ in [0, K): truncation is floor */                \
            if (fabs((t_ - fl_) - 0.5) < pat->width[Q]) {                                     \
                share[j + (Q)] = (int64_t)fl_ * (int64_t)pat->stride[Q];                      \
                break;                                                                        \
            }                                                                                 \
        }                                                                                     \
        share[j + (Q)] = HIST_FLAG;                                                           \
    } while (0)

static void hist_shares_f64_base(const double *x, ptrdiff_t len, const hist_pattern *pat,
                                 int64_t *share)
{
    ptrdiff_t j;
    int q, p = 4 * pat->d;
    for (j = 0; j < len; j += p)
        for (q = 0; q < p; q++) HIST_SHARE_SCALAR(x[j + q], q);
}

static void hist_shares_f32_base(const float *x, ptrdiff_t len, const hist_pattern *pat,
                                 int64_t *share)
{
    ptrdiff_t j;
    int q, p = 4 * pat->d;
    for (j = 0; j < len; j += p)
        for (q = 0; q < p; q++) HIST_SHARE_SCALAR((double)x[j + q], q);
}

#if DPC_HAVE_AVX2
#include <immintrin.h>

/* Four values: t = (x - lo) * scale, ok as above, share = ok ? b * stride : HIST_FLAG. */
__attribute__((target("avx2"))) static inline __m256i
hist_share4(__m256d x, const hist_pattern *pat, int q)
{
    const __m256d sign = _mm256_set1_pd(-0.0), two52 = _mm256_set1_pd(4503599627370496.0);
    __m256d t = _mm256_mul_pd(_mm256_sub_pd(x, _mm256_loadu_pd(pat->lo + q)),
                              _mm256_loadu_pd(pat->scale + q));
    __m256d in = _mm256_cmp_pd(t, _mm256_loadu_pd(pat->nb + q), _CMP_LT_OQ);
    __m256d fl = _mm256_round_pd(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256d f = _mm256_sub_pd(_mm256_sub_pd(t, fl), _mm256_set1_pd(0.5));
    __m256d mid = _mm256_cmp_pd(_mm256_andnot_pd(sign, f), _mm256_loadu_pd(pat->width + q),
                                _CMP_LT_OQ);
    __m256d big = _mm256_add_pd(_mm256_mul_pd(fl, _mm256_loadu_pd(pat->stride + q)), two52);
    __m256i share = _mm256_sub_epi64(_mm256_castpd_si256(big), _mm256_castpd_si256(two52));
    return _mm256_castpd_si256(_mm256_blendv_pd(_mm256_castsi256_pd(_mm256_set1_epi64x(HIST_FLAG)),
                                                _mm256_castsi256_pd(share),
                                                _mm256_and_pd(in, mid)));
}

__attribute__((target("avx2"))) static void
hist_shares_f64_avx2(const double *x, ptrdiff_t len, const hist_pattern *pat, int64_t *share)
{
    ptrdiff_t j;
    int q, p = 4 * pat->d;
    for (j = 0; j < len; j += p) {
        for (q = 0; q < 8 * p; q += 64) /* the sample streams in: ask for it early (into L2:
                                            measured faster than into L1) */
            _mm_prefetch((const char *)(x + j) + HIST_AHEAD + q, _MM_HINT_T1);
        for (q = 0; q < p; q += 4)
            _mm256_storeu_si256((__m256i *)(share + j + q),
                                hist_share4(_mm256_loadu_pd(x + j + q), pat, q));
    }
}

__attribute__((target("avx2"))) static void
hist_shares_f32_avx2(const float *x, ptrdiff_t len, const hist_pattern *pat, int64_t *share)
{
    ptrdiff_t j;
    int q, p = 4 * pat->d;
    for (j = 0; j < len; j += p) {
        for (q = 0; q < 4 * p; q += 64)
            _mm_prefetch((const char *)(x + j) + HIST_AHEAD + q, _MM_HINT_T1);
        for (q = 0; q < p; q += 4)
            _mm256_storeu_si256((__m256i *)(share + j + q),
                                hist_share4(_mm256_cvtps_pd(_mm_loadu_ps(x + j + q)), pat, q));
    }
}
#endif

typedef void (*hist_f64_fn)(const double *, ptrdiff_t, const hist_pattern *, int64_t *);
typedef void (*hist_f32_fn)(const float *, ptrdiff_t, const hist_pattern *, int64_t *);

static hist_f64_fn hist_shares_f64 = hist_shares_f64_base;
static hist_f32_fn hist_shares_f32 = hist_shares_f32_base;
static int hist_level = 0;

/* 0: portable, 1: AVX2 when the CPU has it. Returns the level in force. */
static int hist_set_level(int level)
{
    hist_shares_f64 = hist_shares_f64_base;
    hist_shares_f32 = hist_shares_f32_base;
    hist_level = 0;
#if DPC_HAVE_AVX2
    if (level >= 1 && dpc_cpu_has_avx2()) {
        hist_shares_f64 = hist_shares_f64_avx2;
        hist_shares_f32 = hist_shares_f32_avx2;
        hist_level = 1;
    }
#endif
    return hist_level;
}

static int hist_get_level(void) { return hist_level; }

#endif
