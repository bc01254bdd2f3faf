/*
 * Prefetch hint for the DP-SGD kernel (dpcore/_sgd.pyx): the rows of a sparse Poisson sample
 * of a large X are read a few records ahead of their use, since that loop is bound by memory
 * latency. A hint only (no effect on any value); a no-op where the compiler has no builtin.
 */
#ifndef DPCORE_SGD_PREFETCH_H
#define DPCORE_SGD_PREFETCH_H

static inline void dpc_sgd_prefetch(const void *p)
{
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p);
#else
    (void)p;
#endif
}

#endif
