/* ---- two levels per step through a complete binary tree (dpcore _tree, forest_counts) --------
 * Trees in heap order: node u has children 2u + 1 and 2u + 2. A record at internal node u
 * compares x with u's threshold and with both children's at once (independent loads) and goes
 * to grandchild 4u + 3 + 2 (x >= t_u) + (the chosen child's x >= t), branch-free. A record goes
 * right when x[feature] >= threshold, as everywhere in the tree kernels. */
#ifndef DPCORE_TREE_WALK_H
#define DPCORE_TREE_WALK_H

#include <stdint.h>

/* An internal node u of a complete tree and its children 2u + 1, 2u + 2 (features 0 and
   thresholds 0.0 for children that are leaves: never used). */
typedef struct { double t1, t2, t0; int32_t f0, f1, f2, pad; } dp_node3;

/* 2 (x >= t0) + (x >= t2 if x >= t0 else x >= t1), from bit 2: x >= t0, bit 1: x >= t2,
   bit 0: x >= t1 */
static const int32_t dp_grandchild[8] = {0, 1, 0, 1, 2, 2, 3, 3};

#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#include <emmintrin.h>
#define DP_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
/* the children's two comparisons in one instruction (ordered: the same as x >= t) */
static int32_t dp_step2(const double *x, const dp_node3 *s, int32_t u) {
    __m128d v = _mm_loadh_pd(_mm_load_sd(x + s->f1), x + s->f2);
    int lohi = _mm_movemask_pd(_mm_cmple_pd(_mm_loadu_pd(&s->t1), v));
    return 4 * u + 3 + dp_grandchild[lohi | (x[s->f0] >= s->t0) << 2];
}
#else
#if defined(__GNUC__) || defined(__clang__)
#define DP_PREFETCH(p) __builtin_prefetch((const void *)(p))
#else
#define DP_PREFETCH(p) ((void)0)
#endif
static int32_t dp_step2(const double *x, const dp_node3 *s, int32_t u) {
    int lohi = (x[s->f1] >= s->t1) | (x[s->f2] >= s->t2) << 1;
    return 4 * u + 3 + dp_grandchild[lohi | (x[s->f0] >= s->t0) << 2];
}
#endif

#endif
