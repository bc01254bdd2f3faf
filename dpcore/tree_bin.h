/* ---- binning pass of the private trees (dpcore _tree, bin_codes) ------------------------------
 * Records i0 .. i1 - 1 of a C-contiguous (n, d) X are read R rows at a time as one flat run of
 * R d values; value j of a run belongs to feature j mod d, so the per-feature constants are
 * given expanded to the period P = R d (lo, scale, top: tb_pattern). For every value
 *
 *     q = fl(fl(x - lo) * scale);  q = q > 0 ? q : 0 (NaN too);  q = q < top ? q : top;
 *     code = (int) q                                  (q in [0, top]: truncation is floor)
 *
 * and then, record by record, root[f, y, code] += 1 (feature f's table at f k B, y's row y B).
 * The AVX2 version computes the same IEEE operations four at a time (max_pd(q, 0) returns 0 for
 * a NaN q and +0 for -0, as the scalar test; no FMA: the kernel is built with -ffp-contract=off),
 * so both versions give identical codes and counts. A value is not finite exactly when x - x is
 * not +0: its bits are OR-ed into a flag (the caller then finds the features, off the hot path).
 * The run's X is requested from memory a few runs ahead, so the counting of one run overlaps
 * the loads of the next ones (measured 1.2 ms against 2.0 ms for a fused loop at 10**5 x 30).
 */
#ifndef DPCORE_TREE_BIN_H
#define DPCORE_TREE_BIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dpc_cpu.h"

#define TB_AHEAD 8192     /* bytes of X requested ahead of the run being binned */
#define TB_RUN_VALUES 256 /* values a run (whole rows, at least one): measured best */

/* Per-feature constants expanded to the period P = R d (R rows a run). */
typedef struct {
    const double *lo, *scale, *top; /* P entries each */
    ptrdiff_t d, rows;              /* features, and rows R of a run */
    ptrdiff_t B, stride;            /* a class's row of a feature's table: B cells; a table */
} tb_pattern;

/* Sets *pat for d features (constants lo, scale, top of d entries; tables of B cells a class
   row, stride cells a feature) and returns the memory of its expanded constants (free() it
   after the binning), or NULL when out of memory. */
static double *tb_pattern_new(tb_pattern *pat, const double *lo, const double *scale,
                              const double *top, ptrdiff_t d, ptrdiff_t B, ptrdiff_t stride)
{
    ptrdiff_t rows = TB_RUN_VALUES / d > 1 ? TB_RUN_VALUES / d : 1, j, p = rows * d;
    double *buf = (double *)malloc(3 * (size_t)p * sizeof(double));
    if (buf == NULL) return NULL;
    for (j = 0; j < p; j++) {
        buf[j] = lo[j % d];
        buf[p + j] = scale[j % d];
        buf[2 * p + j] = top[j % d];
    }
    pat->lo = buf;
    pat->scale = buf + p;
    pat->top = buf + 2 * p;
    pat->d = d;
    pat->rows = rows;
    pat->B = B;
    pat->stride = stride;
    return buf;
}

#if defined(__GNUC__) || defined(__clang__)
#define TB_PREFETCH(p) __builtin_prefetch((const void *)(p))
#else
#define TB_PREFETCH(p) ((void)0)
#endif

#if (defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) || defined(_MSC_VER)
#define TB_LITTLE_ENDIAN 1 /* code f + s of a 64-bit load is its bits 8s.. (uint8), 16s.. */
#else
#define TB_LITTLE_ENDIAN 0
#endif

/* One record's counts: cell[f stride + c[f]] += 1 for its d codes c (cell: the record's class
   row of feature 0's table; feature f's is stride cells further). Little-endian machines take
   8 (uint8) or 4 (uint16) codes per 64-bit load: fewer instructions for the same increments. */
#define TB_COUNT(NAME, CODE_T, PER, SHIFT, MASK)                                              \
    static inline void NAME(const CODE_T *c, ptrdiff_t d, int64_t *cell, ptrdiff_t stride)   \
    {                                                                                         \
        ptrdiff_t f = 0;                                                                      \
        if (TB_LITTLE_ENDIAN) {                                                               \
            for (; f + (PER) <= d; f += (PER)) {                                              \
                uint64_t w;                                                                   \
                int s;                                                                        \
                memcpy(&w, c + f, 8);                                                         \
                for (s = 0; s < (PER); s++) {                                                 \
                    cell[(ptrdiff_t)((w >> ((SHIFT) * s)) & (MASK))] += 1;                    \
                    cell += stride;                                                           \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
        for (; f < d; f++) {                                                                  \
            cell[c[f]] += 1;                                                                  \
            cell += stride;                                                                   \
        }                                                                                     \
    }

TB_COUNT(tb_count_u8, uint8_t, 8, 8, 0xff)
TB_COUNT(tb_count_u16, uint16_t, 4, 16, 0xffff)
#undef TB_COUNT

#define TB_RESTRICT __restrict /* GCC, Clang and MSVC, in C and C++ */

/* lo, sc, tp: the pattern's arrays in restrict-qualified locals (the code stores are char-sized
   and could otherwise alias anything, forcing reloads) */
#define TB_CODE_SCALAR(X, J, OUT)                                                             \
    do {                                                                                      \
        double q_ = ((X) - lo[J]) * sc[J];                                                    \
        q_ = q_ > 0.0 ? q_ : 0.0;                                                             \
        q_ = q_ < tp[J] ? q_ : tp[J];                                                         \
        (OUT) = (int32_t)q_;                                                                  \
    } while (0)

/* Portable versions (one value at a time). Return 1 when a value is not finite. */
#define TB_BASE(NAME, CODE_T, COUNT)                                                                 \
    static int NAME(const double *X, ptrdiff_t i0, ptrdiff_t i1, const tb_pattern *pat,      \
                    const int32_t *y, CODE_T *codes, int64_t *root)                           \
    {                                                                                         \
        ptrdiff_t r0, i, j, len, d = pat->d, rows = pat->rows, B = pat->B;                    \
        const double *TB_RESTRICT lo = pat->lo, *TB_RESTRICT sc = pat->scale;                 \
        const double *TB_RESTRICT tp = pat->top;                                              \
        ptrdiff_t stride = pat->stride;                                                       \
        uint64_t bad = 0, bits;                                                               \
        double z;                                                                             \
        int32_t b;                                                                            \
        for (r0 = i0; r0 < i1; r0 += rows) {                                                  \
            const double *TB_RESTRICT x = X + r0 * d;                                         \
            CODE_T *TB_RESTRICT out = codes + r0 * d;                                         \
            len = (i1 - r0 < rows ? i1 - r0 : rows) * d;                                      \
            for (j = 0; j < len; j += 8)                                                      \
                TB_PREFETCH((const char *)(x + j) + TB_AHEAD);                                \
            for (j = 0; j < len; j++) {                                                       \
                z = x[j] - x[j];                                                              \
                memcpy(&bits, &z, 8);                                                         \
                bad |= bits;                                                                  \
                TB_CODE_SCALAR(x[j], j, b);                                                   \
                out[j] = (CODE_T)b;                                                           \
            }                                                                                 \
            for (i = 0; i < len / d; i++)                                                     \
                COUNT(out + i * d, d, root + (ptrdiff_t)y[r0 + i] * B, stride);               \
        }                                                                                     \
        return bad != 0;                                                                      \
    }

TB_BASE(tb_bin_u8_base, uint8_t, tb_count_u8)
TB_BASE(tb_bin_u16_base, uint16_t, tb_count_u16)

#if DPC_HAVE_AVX2
#include <immintrin.h>

/* q of four values (as above), truncated to int32; the bits of x - x OR-ed into *bad. */
__attribute__((target("avx2"))) static inline __m128i
tb_code4(const double *x, const double *lo, const double *sc, const double *tp, ptrdiff_t j,
         __m256d *bad)
{
    __m256d v = _mm256_loadu_pd(x + j);
    __m256d q = _mm256_mul_pd(_mm256_sub_pd(v, _mm256_loadu_pd(lo + j)), _mm256_loadu_pd(sc + j));
    *bad = _mm256_or_pd(*bad, _mm256_sub_pd(v, v));
    q = _mm256_max_pd(q, _mm256_setzero_pd()); /* second operand for NaN (and for +-0) */
    q = _mm256_min_pd(q, _mm256_loadu_pd(tp + j));
    return _mm256_cvttpd_epi32(q);
}

/* Sixteen codes of x[j .. j + 16) stored to out + j (saturating packs: codes <= top, which
   the caller has checked fits the codes' type). */
__attribute__((target("avx2"))) static inline void
tb_store16_u8(const double *x, const double *lo, const double *sc, const double *tp,
              ptrdiff_t j, __m256d *bad, uint8_t *out)
{
    __m128i a = _mm_packs_epi32(tb_code4(x, lo, sc, tp, j, bad),
                                tb_code4(x, lo, sc, tp, j + 4, bad));
    __m128i c = _mm_packs_epi32(tb_code4(x, lo, sc, tp, j + 8, bad),
                                tb_code4(x, lo, sc, tp, j + 12, bad));
    _mm_storeu_si128((__m128i *)(out + j), _mm_packus_epi16(a, c));
}

__attribute__((target("avx2"))) static inline void
tb_store16_u16(const double *x, const double *lo, const double *sc, const double *tp,
               ptrdiff_t j, __m256d *bad, uint16_t *out)
{
    _mm_storeu_si128((__m128i *)(out + j), _mm_packus_epi32(tb_code4(x, lo, sc, tp, j, bad),
                                                            tb_code4(x, lo, sc, tp, j + 4, bad)));
    _mm_storeu_si128((__m128i *)(out + j + 8),
                     _mm_packus_epi32(tb_code4(x, lo, sc, tp, j + 8, bad),
                                      tb_code4(x, lo, sc, tp, j + 12, bad)));
}

#define TB_AVX2(NAME, CODE_T, STORE16, COUNT)                                      \
    __attribute__((target("avx2"))) static int NAME(const double *X, ptrdiff_t i0,          \
                                                    ptrdiff_t i1, const tb_pattern *pat,     \
                                                    const int32_t *y, CODE_T *codes,         \
                                                    int64_t *root)                           \
    {                                                                                         \
        ptrdiff_t r0, i, j, len, d = pat->d, rows = pat->rows, B = pat->B;                    \
        const double *TB_RESTRICT lo = pat->lo, *TB_RESTRICT sc = pat->scale;                 \
        const double *TB_RESTRICT tp = pat->top;                                              \
        ptrdiff_t stride = pat->stride;                                                       \
        __m256d bad = _mm256_setzero_pd();                                                    \
        int32_t b;                                                                            \
        for (r0 = i0; r0 < i1; r0 += rows) {                                                  \
            const double *TB_RESTRICT x = X + r0 * d;                                         \
            CODE_T *TB_RESTRICT out = codes + r0 * d;                                         \
            len = (i1 - r0 < rows ? i1 - r0 : rows) * d;                                      \
            for (j = 0; j + 16 <= len; j += 16) {                                             \
                _mm_prefetch((const char *)(x + j) + TB_AHEAD, _MM_HINT_T0);                  \
                _mm_prefetch((const char *)(x + j) + TB_AHEAD + 64, _MM_HINT_T0);             \
                STORE16(x, lo, sc, tp, j, &bad, out);                                         \
            }                                                                                 \
            for (; j < len; j++) {                                                            \
                __m256d v = _mm256_set1_pd(x[j]);                                             \
                bad = _mm256_or_pd(bad, _mm256_sub_pd(v, v));                                 \
                TB_CODE_SCALAR(x[j], j, b);                                                   \
                out[j] = (CODE_T)b;                                                           \
            }                                                                                 \
            for (i = 0; i < len / d; i++)                                                     \
                COUNT(out + i * d, d, root + (ptrdiff_t)y[r0 + i] * B, stride);               \
        }                                                                                     \
        return !_mm256_testz_si256(_mm256_castpd_si256(bad), _mm256_castpd_si256(bad));      \
    }

TB_AVX2(tb_bin_u8_avx2, uint8_t, tb_store16_u8, tb_count_u8)
TB_AVX2(tb_bin_u16_avx2, uint16_t, tb_store16_u16, tb_count_u16)
#undef TB_AVX2
#endif

typedef int (*tb_u8_fn)(const double *, ptrdiff_t, ptrdiff_t, const tb_pattern *,
                        const int32_t *, uint8_t *, int64_t *);
typedef int (*tb_u16_fn)(const double *, ptrdiff_t, ptrdiff_t, const tb_pattern *,
                         const int32_t *, uint16_t *, int64_t *);

static tb_u8_fn tb_bin_u8 = tb_bin_u8_base;
static tb_u16_fn tb_bin_u16 = tb_bin_u16_base;
static int tb_level = 0;

/* 0: portable, 1: AVX2 when the CPU has it. Returns the level in force. */
static int tb_set_level(int level)
{
    tb_bin_u8 = tb_bin_u8_base;
    tb_bin_u16 = tb_bin_u16_base;
    tb_level = 0;
#if DPC_HAVE_AVX2
    if (level >= 1 && dpc_cpu_has_avx2()) {
        tb_bin_u8 = tb_bin_u8_avx2;
        tb_bin_u16 = tb_bin_u16_avx2;
        tb_level = 1;
    }
#endif
    return tb_level;
}

#endif
