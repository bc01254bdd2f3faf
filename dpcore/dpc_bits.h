/* Bit-level helpers shared by the kernels' headers and .pyx files:
 *   - bit casts between a double and its IEEE 754 encoding (memcpy: no aliasing UB; compiles to
 *     a register move);
 *   - leading / trailing zero counts of a nonzero 64-bit word: the compiler's builtin on GCC and
 *     Clang, the bit-scan intrinsics on MSVC (x64, ARM64), a portable loop elsewhere. Defining
 *     DPC_PORTABLE_C forces the loop (see chacha20.h). The loops are also compiled on their own
 *     (dpc_clz64_portable, dpc_ctz64_portable) so the tests can check them on any build. */
#ifndef DPCORE_DPC_BITS_H
#define DPCORE_DPC_BITS_H

#include <stdint.h>
#include <string.h>

#if defined(_MSC_VER) && !defined(__clang__) && (defined(_M_X64) || defined(_M_ARM64))
#include <intrin.h>
#define DPC_BITS_MSVC_SCAN 1
#endif

static inline double dpc_u64_as_double(uint64_t bits)
{
    double x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

static inline uint64_t dpc_double_as_u64(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    return bits;
}

/* Number of leading zero bits of w != 0, one bit at a time. */
static inline int dpc_clz64_portable(uint64_t w)
{
    int n = 0;
    while (!(w & UINT64_C(0x8000000000000000))) {
        w <<= 1;
        n++;
    }
    return n;
}

/* Number of trailing zero bits of w != 0, one bit at a time. */
static inline int dpc_ctz64_portable(uint64_t w)
{
    int n = 0;
    while (!(w & 1)) {
        w >>= 1;
        n++;
    }
    return n;
}

/* Number of leading zero bits of w != 0 (undefined for w = 0). */
static inline int dpc_clz64(uint64_t w)
{
#if (defined(__GNUC__) || defined(__clang__)) && !defined(DPC_PORTABLE_C)
    return __builtin_clzll(w);
#elif defined(DPC_BITS_MSVC_SCAN) && !defined(DPC_PORTABLE_C)
    unsigned long i;
    _BitScanReverse64(&i, w);
    return 63 - (int)i;
#else
    return dpc_clz64_portable(w);
#endif
}

/* Number of trailing zero bits of w != 0 (undefined for w = 0). */
static inline int dpc_ctz64(uint64_t w)
{
#if (defined(__GNUC__) || defined(__clang__)) && !defined(DPC_PORTABLE_C)
    return __builtin_ctzll(w);
#elif defined(DPC_BITS_MSVC_SCAN) && !defined(DPC_PORTABLE_C)
    unsigned long i;
    _BitScanForward64(&i, w);
    return (int)i;
#else
    return dpc_ctz64_portable(w);
#endif
}

#endif
