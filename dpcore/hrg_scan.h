/* ---- slot scan of the _hrg kernel: positions t in [lo, hi) with lab[t] == s (into bufs)
 * and, if want_r, with lab[t] == r (into bufr); s != r. Matches are a small minority of the
 * slots, so the scalar loop branches (predicted not taken) and the AVX2 loop tests 8 labels
 * per compare and only then extracts positions. Both give the same positions in the same
 * order. */
#ifndef DPCORE_HRG_SCAN_H
#define DPCORE_HRG_SCAN_H

#include <stdint.h>
#include "dpc_cpu.h"
#if DPC_HAVE_AVX2
#include <immintrin.h>
#endif

static void hrg_scan_scalar(const int32_t *lab, int32_t lo, int32_t hi, int32_t s,
                                   int32_t r, int want_r, int32_t *bufs, int *cs,
                                   int32_t *bufr, int *cr)
{
    int a = *cs, b = *cr;
    int32_t t;
    for (t = lo; t < hi; t++) {
        int32_t l = lab[t];
        if (l == s) bufs[a++] = t;
        else if (want_r && l == r) bufr[b++] = t;
    }
    *cs = a;
    *cr = b;
}

#if DPC_HAVE_AVX2
/* HRG_COMPRESS[mask]: the lanes set in mask, in order, first (a permutation for
   _mm256_permutevar8x32_epi32), so matching positions are stored without branches. */
static int32_t HRG_COMPRESS[256][8];
static int hrg_avx2_ok = 0;

/* Eight labels per step; lanes at or past hi are masked off. Reads lab[t..t+7] and writes
   bufs[a..a+7], bufr[b..b+7] past the last match: the caller pads lab and both buffers with
   8 spare entries. */
__attribute__((target("avx2,popcnt"))) static void hrg_scan_avx2(
    const int32_t *lab, int32_t lo, int32_t hi, int32_t s, int32_t r, int want_r,
    int32_t *bufs, int *cs, int32_t *bufr, int *cr)
{
    int a = *cs, b = *cr;
    int32_t t;
    const __m256i vs = _mm256_set1_epi32(s), vr = _mm256_set1_epi32(r);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (t = lo; t < hi; t += 8) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(lab + t));
        __m256i valid = _mm256_cmpgt_epi32(_mm256_set1_epi32(hi - t), iota);
        __m256i pos = _mm256_add_epi32(_mm256_set1_epi32(t), iota);
        unsigned ms = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
            _mm256_and_si256(_mm256_cmpeq_epi32(v, vs), valid)));
        _mm256_storeu_si256((__m256i *)(bufs + a), _mm256_permutevar8x32_epi32(
            pos, _mm256_loadu_si256((const __m256i *)HRG_COMPRESS[ms])));
        a += __builtin_popcount(ms);
        if (want_r) {
            unsigned mr = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
                _mm256_and_si256(_mm256_cmpeq_epi32(v, vr), valid)));
            _mm256_storeu_si256((__m256i *)(bufr + b), _mm256_permutevar8x32_epi32(
                pos, _mm256_loadu_si256((const __m256i *)HRG_COMPRESS[mr])));
            b += __builtin_popcount(mr);
        }
    }
    *cs = a;
    *cr = b;
}
#endif

static int hrg_scan_vector(void)
{
#if DPC_HAVE_AVX2
    return hrg_avx2_ok;
#else
    return 0;
#endif
}

static inline void hrg_prefetch(const void *p)
{
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p);
#else
    (void)p;
#endif
}

static void hrg_scan_init(void)
{
#if DPC_HAVE_AVX2
    int mask, lane, k;
    for (mask = 0; mask < 256; mask++) {
        k = 0;
        for (lane = 0; lane < 8; lane++)
            if (mask & (1 << lane)) HRG_COMPRESS[mask][k++] = lane;
        while (k < 8) HRG_COMPRESS[mask][k++] = 0;
    }
    hrg_avx2_ok = dpc_cpu_has_avx2() && dpc_cpu_has_popcnt();
#endif
}

static inline void hrg_scan(const int32_t *lab, int32_t lo, int32_t hi, int32_t s, int32_t r,
                            int want_r, int32_t *bufs, int *cs, int32_t *bufr, int *cr)
{
#if DPC_HAVE_AVX2
    if (hrg_avx2_ok) {
        hrg_scan_avx2(lab, lo, hi, s, r, want_r, bufs, cs, bufr, cr);
        return;
    }
#endif
    hrg_scan_scalar(lab, lo, hi, s, r, want_r, bufs, cs, bufr, cr);
}

#endif
