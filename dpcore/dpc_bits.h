/* Bit casts between a double and its IEEE 754 encoding (memcpy: no aliasing UB; compiles to a
   register move). Shared by chacha20.h and crlog.h. */
#ifndef DPCORE_DPC_BITS_H
#define DPCORE_DPC_BITS_H

#include <stdint.h>
#include <string.h>

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

#endif
