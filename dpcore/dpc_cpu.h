/* Run-time CPU features for the kernels' dispatch (chacha20.h, select_simd.h, hrg_scan.h,
 * histogram_simd.h).
 *
 * DPC_HAVE_AVX2 is 1 when this compiler can build AVX2 functions (target attribute) on this
 * architecture, whatever the baseline flags; such functions may only be called when
 * dpc_cpu_has_avx2() says the CPU runs them. Elsewhere (MSVC, ARM, ...) both say no and the
 * kernels keep their portable code. */
#ifndef DPCORE_DPC_CPU_H
#define DPCORE_DPC_CPU_H

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define DPC_HAVE_AVX2 1
#else
#define DPC_HAVE_AVX2 0
#endif

static inline int dpc_cpu_has_avx2(void)
{
#if DPC_HAVE_AVX2
    __builtin_cpu_init(); /* cheap and idempotent; required if called before constructors run */
    return __builtin_cpu_supports("avx2") != 0;
#else
    return 0;
#endif
}

/* For the 16-block ChaCha20 path (chacha20.h): AVX-512F in the CPU and enabled by the OS
 * (the builtin checks both). Same compilers and architectures as AVX2. */
static inline int dpc_cpu_has_avx512f(void)
{
#if DPC_HAVE_AVX2
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
#else
    return 0;
#endif
}

/* For AVX2 code that also uses POPCNT (hrg_scan.h): a separate CPUID bit. */
static inline int dpc_cpu_has_popcnt(void)
{
#if DPC_HAVE_AVX2
    __builtin_cpu_init();
    return __builtin_cpu_supports("popcnt") != 0;
#else
    return 0;
#endif
}

#endif
