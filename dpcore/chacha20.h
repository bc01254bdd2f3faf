/*
 * ChaCha20 keystream as a source of uniformly random 64-bit words (dpcore kernel `_random`).
 *
 * The block function is the one of RFC 8439 section 2.3 (20 rounds, ten "double rounds").
 * Generator layout of the 16-word input block:
 *
 *     words 0-3    the constants "expand 32-byte k"
 *     words 4-11   the 256-bit key (little-endian 32-bit words)
 *     words 12-13  a 64-bit block counter (12 = low half, 13 = high half)
 *     words 14-15  zero (a stream id; dpcore keys every stream separately)
 *
 * Output word i (0..7) of a block is keystream bytes 8i..8i+7 read as a little-endian uint64,
 * i.e. state word 2i in the low half and word 2i+1 in the high half, on every platform.
 *
 * Speed: several blocks are computed at once in "vertical" layout (vector element j of x[i] is
 * word i of block j) with GCC/Clang vector extensions: 4 blocks in 16-byte vectors (SSE2, NEON,
 * ...), on x86 with AVX2 (detected at run time, no -march needed) 8 blocks in 32-byte vectors,
 * and with AVX-512F 16 blocks in 64-byte vectors (which also get single-instruction rotates:
 * about 1.5 ns per 64-bit word instead of 2.9 on a Zen 4 core). Other compilers (MSVC) get the
 * portable scalar code. All paths compute the same
 * keystream; the tests check each against the RFC vectors. Defining DPC_PORTABLE_C forces the
 * portable code everywhere (vectors, 128-bit integers and bit-scan builtins all off), to test it.
 *
 * Nothing here is thread-safe: callers hold the owning BitGenerator's lock.
 */
#ifndef DPCORE_CHACHA20_H
#define DPCORE_CHACHA20_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dpc_bits.h"
#include "dpc_cpu.h"

#define DPC_CHACHA_BUF_BLOCKS 16

/* Every kernel that cimports _random includes this header but uses only the inline readers. */
#if defined(__GNUC__) || defined(__clang__)
#define DPC_MAYBE_UNUSED __attribute__((unused))
#else
#define DPC_MAYBE_UNUSED
#endif
#define DPC_CHACHA_BUF_WORDS (8 * DPC_CHACHA_BUF_BLOCKS)

typedef struct {
    uint32_t input[16];  /* counter words 12-13 = the next block to be computed */
    /* Buffered output. Invariant: the unread words buf[pos..BUF_WORDS) are exactly the stream
       words that precede block `counter`; pos == BUF_WORDS means the buffer is empty. */
    uint64_t buf[DPC_CHACHA_BUF_WORDS];
    int pos;
    int has_uint32;      /* numpy-style 32-bit draws: the high half of the last word, unused */
    uint32_t uinteger;
} dpc_chacha20_state;

/* ------------------------------------------------------------------------------------------ */
/* The round function, written once for scalars and vectors alike.                              */

#define DPC_ROTL32(v, n) (((v) << (n)) | ((v) >> (32 - (n))))

#define DPC_QUARTER_ROUND(a, b, c, d)                  \
    do {                                               \
        a += b; d ^= a; d = DPC_ROTL32(d, 16);         \
        c += d; b ^= c; b = DPC_ROTL32(b, 12);         \
        a += b; d ^= a; d = DPC_ROTL32(d, 8);          \
        c += d; b ^= c; b = DPC_ROTL32(b, 7);          \
    } while (0)

/* One column round followed by one diagonal round (RFC 8439 section 2.3). */
#define DPC_DOUBLE_ROUND(x)                            \
    do {                                               \
        DPC_QUARTER_ROUND(x[0], x[4], x[8], x[12]);    \
        DPC_QUARTER_ROUND(x[1], x[5], x[9], x[13]);    \
        DPC_QUARTER_ROUND(x[2], x[6], x[10], x[14]);   \
        DPC_QUARTER_ROUND(x[3], x[7], x[11], x[15]);   \
        DPC_QUARTER_ROUND(x[0], x[5], x[10], x[15]);   \
        DPC_QUARTER_ROUND(x[1], x[6], x[11], x[12]);   \
        DPC_QUARTER_ROUND(x[2], x[7], x[8], x[13]);    \
        DPC_QUARTER_ROUND(x[3], x[4], x[9], x[14]);    \
    } while (0)

static const uint32_t dpc_chacha_constants[4] = {
    0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u  /* "expand 32-byte k" */
};

static inline uint64_t dpc_chacha20_get_counter(const uint32_t input[16])
{
    return (uint64_t)input[12] | ((uint64_t)input[13] << 32);
}

static inline void dpc_chacha20_set_counter(uint32_t input[16], uint64_t counter)
{
    input[12] = (uint32_t)counter;
    input[13] = (uint32_t)(counter >> 32);
}

/* The RFC 8439 block function on an arbitrary 16-word input: out = rounds(in) + in. */
static void dpc_chacha20_block(const uint32_t in[16], uint32_t out[16])
{
    uint32_t x[16];
    int i;
    for (i = 0; i < 16; i++) x[i] = in[i];
    for (i = 0; i < 10; i++) DPC_DOUBLE_ROUND(x);
    for (i = 0; i < 16; i++) out[i] = x[i] + in[i];
}

/* Pack `lanes` blocks held as w[word * lanes + block] into 64-bit output words, block by block. */
static inline void dpc_chacha_pack(const uint32_t *w, int lanes, uint64_t *out)
{
    int j, k;
    for (j = 0; j < lanes; j++)
        for (k = 0; k < 8; k++)
            out[8 * j + k] = (uint64_t)w[(2 * k) * lanes + j]
                             | ((uint64_t)w[(2 * k + 1) * lanes + j] << 32);
}

/* One block at the input's counter, packed into 8 words; advances the counter. */
static void dpc_chacha20_x1(uint32_t input[16], uint64_t *out)
{
    uint32_t w[16];
    dpc_chacha20_block(input, w);
    dpc_chacha_pack(w, 1, out);
    dpc_chacha20_set_counter(input, dpc_chacha20_get_counter(input) + 1);
}

/* ------------------------------------------------------------------------------------------ */
/* Vector paths (GCC and Clang vector extensions).                                              */

#if (defined(__GNUC__) || defined(__clang__)) && !defined(DPC_PORTABLE_C)
#define DPC_CHACHA_HAVE_VECTORS 1

/* LANES blocks at once: x[i] holds word i of blocks counter, counter+1, ..., counter+LANES-1.
   The low counter word may wrap inside a batch; the compare below carries into word 13. */
#define DPC_CHACHA_DEFINE_XN(NAME, VT, LANES, ATTRIBUTES)                                   \
    ATTRIBUTES static void NAME(uint32_t input[16], uint64_t *out)                          \
    {                                                                                       \
        VT x[16], s[16], zero, lane, low;                                                   \
        uint32_t w[16 * (LANES)];                                                           \
        int i;                                                                              \
        memset(&zero, 0, sizeof zero);                                                      \
        for (i = 0; i < (LANES); i++) w[i] = (uint32_t)i;                                   \
        memcpy(&lane, w, sizeof lane);                                                      \
        for (i = 0; i < 16; i++) s[i] = zero + input[i];                                    \
        low = s[12] + lane;                                                                 \
        s[13] -= (VT)(low < s[12]); /* true lanes are all ones, i.e. -1: adds the carry */  \
        s[12] = low;                                                                        \
        for (i = 0; i < 16; i++) x[i] = s[i];                                               \
        for (i = 0; i < 10; i++) DPC_DOUBLE_ROUND(x);                                       \
        for (i = 0; i < 16; i++) x[i] += s[i];                                              \
        memcpy(w, x, sizeof w);                                                             \
        dpc_chacha_pack(w, (LANES), out);                                                   \
        dpc_chacha20_set_counter(input, dpc_chacha20_get_counter(input) + (LANES));         \
    }

typedef uint32_t dpc_u32x4 __attribute__((vector_size(16)));
DPC_CHACHA_DEFINE_XN(dpc_chacha20_x4, dpc_u32x4, 4, )

#if defined(__AVX2__)
#define DPC_CHACHA_HAVE_X8 1
typedef uint32_t dpc_u32x8 __attribute__((vector_size(32)));
DPC_CHACHA_DEFINE_XN(dpc_chacha20_x8, dpc_u32x8, 8, )
#elif defined(__x86_64__) || defined(__i386__)
/* Compiled for AVX2 regardless of the baseline flags; only called when the CPU has it. */
#define DPC_CHACHA_HAVE_X8 1
#define DPC_CHACHA_X8_RUNTIME_CHECK 1
typedef uint32_t dpc_u32x8 __attribute__((vector_size(32)));
DPC_CHACHA_DEFINE_XN(dpc_chacha20_x8, dpc_u32x8, 8, __attribute__((target("avx2"))))
#endif

#if defined(__x86_64__) && !defined(__AVX512F__)
/* 16 blocks with AVX-512F, compiled for it regardless of the baseline flags and only called
   when the CPU and OS support it (checked at run time). */
#define DPC_CHACHA_HAVE_X16 1
#define DPC_CHACHA_X16_RUNTIME_CHECK 1
typedef uint32_t dpc_u32x16 __attribute__((vector_size(64)));
DPC_CHACHA_DEFINE_XN(dpc_chacha20_x16, dpc_u32x16, 16, __attribute__((target("avx512f"))))
#elif defined(__AVX512F__)
#define DPC_CHACHA_HAVE_X16 1
typedef uint32_t dpc_u32x16 __attribute__((vector_size(64)));
DPC_CHACHA_DEFINE_XN(dpc_chacha20_x16, dpc_u32x16, 16, )
#endif

#endif /* vector extensions */

/* ------------------------------------------------------------------------------------------ */
/* Dispatch: the widest path this build and this CPU support (tests may lower it).              */

static int dpc_chacha_lanes_max = 1;
static int dpc_chacha_lanes = 1;

/* Call once (under the GIL, at module import) before generating. */
DPC_MAYBE_UNUSED static void dpc_chacha20_init_dispatch(void)
{
    int lanes = 1;
#if defined(DPC_CHACHA_HAVE_VECTORS)
    lanes = 4;
#endif
#if defined(DPC_CHACHA_HAVE_X8)
#if defined(DPC_CHACHA_X8_RUNTIME_CHECK)
    if (dpc_cpu_has_avx2()) lanes = 8;
#else
    lanes = 8;
#endif
#endif
#if defined(DPC_CHACHA_HAVE_X16)
#if defined(DPC_CHACHA_X16_RUNTIME_CHECK)
    if (dpc_cpu_has_avx512f()) lanes = 16;
#else
    lanes = 16;
#endif
#endif
    dpc_chacha_lanes_max = lanes;
    dpc_chacha_lanes = lanes;
}

/* Test hook: use at most `lanes` (1, 4, 8 or 16) blocks per step; returns the value in force. */
DPC_MAYBE_UNUSED static int dpc_chacha20_set_lanes(int lanes)
{
    if (lanes == 1 || lanes == 4 || lanes == 8 || lanes == 16)
        dpc_chacha_lanes = lanes <= dpc_chacha_lanes_max ? lanes : dpc_chacha_lanes_max;
    return dpc_chacha_lanes;
}

DPC_MAYBE_UNUSED static int dpc_chacha20_get_lanes(void) { return dpc_chacha_lanes; }

/* Write `nblocks` consecutive blocks (8 * nblocks words) starting at the input's counter, and
   advance the counter by nblocks. */
static void dpc_chacha20_blocks(uint32_t input[16], uint64_t *out, size_t nblocks)
{
#if defined(DPC_CHACHA_HAVE_X16)
    if (dpc_chacha_lanes >= 16) {
        for (; nblocks >= 16; nblocks -= 16, out += 128) dpc_chacha20_x16(input, out);
    }
#endif
#if defined(DPC_CHACHA_HAVE_X8)
    if (dpc_chacha_lanes >= 8) {
        for (; nblocks >= 8; nblocks -= 8, out += 64) dpc_chacha20_x8(input, out);
    }
#endif
#if defined(DPC_CHACHA_HAVE_VECTORS)
    if (dpc_chacha_lanes >= 4) {
        for (; nblocks >= 4; nblocks -= 4, out += 32) dpc_chacha20_x4(input, out);
        if (nblocks > 0) {  /* 1-3 blocks left: compute 4, keep what was asked for */
            uint64_t tmp[32];
            uint64_t counter = dpc_chacha20_get_counter(input);
            dpc_chacha20_x4(input, tmp);
            memcpy(out, tmp, nblocks * 8 * sizeof(uint64_t));
            dpc_chacha20_set_counter(input, counter + nblocks);
            nblocks = 0;
        }
    }
#endif
    for (; nblocks > 0; nblocks--, out += 8) dpc_chacha20_x1(input, out);
}

/* ------------------------------------------------------------------------------------------ */
/* The generator.                                                                                */

/* Key the generator (8 little-endian key words) and start at block 0 with an empty buffer. */
DPC_MAYBE_UNUSED static void dpc_chacha20_set_key(dpc_chacha20_state *st, const uint32_t key[8])
{
    int i;
    for (i = 0; i < 4; i++) st->input[i] = dpc_chacha_constants[i];
    for (i = 0; i < 8; i++) st->input[4 + i] = key[i];
    for (i = 12; i < 16; i++) st->input[i] = 0;
    memset(st->buf, 0, sizeof st->buf);
    st->pos = DPC_CHACHA_BUF_WORDS;
    st->has_uint32 = 0;
    st->uinteger = 0;
}

static inline void dpc_chacha20_refill(dpc_chacha20_state *st)
{
    dpc_chacha20_blocks(st->input, st->buf, DPC_CHACHA_BUF_BLOCKS);
    st->pos = 0;
}

/* Position the stream at 64-bit word `word` (0..7) of block `block`. */
DPC_MAYBE_UNUSED static void dpc_chacha20_seek(dpc_chacha20_state *st, uint64_t block, int word)
{
    dpc_chacha20_set_counter(st->input, block);
    st->pos = DPC_CHACHA_BUF_WORDS;
    if (word > 0) {
        dpc_chacha20_refill(st);
        st->pos = word;
    }
}

/* The stream position of the next unread word, as (block, word); inverse of seek. */
DPC_MAYBE_UNUSED static void dpc_chacha20_tell(const dpc_chacha20_state *st, uint64_t *block, int *word)
{
    uint64_t counter = dpc_chacha20_get_counter(st->input);
    int unread = DPC_CHACHA_BUF_WORDS - st->pos;
    int back_blocks = (unread + 7) / 8;
    *block = counter - (uint64_t)back_blocks;  /* modulo 2**64, like the counter itself */
    *word = (8 * back_blocks - unread) % 8;
}

static inline uint64_t dpc_chacha20_next64(dpc_chacha20_state *st)
{
    if (st->pos >= DPC_CHACHA_BUF_WORDS) dpc_chacha20_refill(st);
    return st->buf[st->pos++];
}

/* `n` words of the stream into out: the buffered words first, then whole blocks written
   straight into out, then the tail through the buffer. Same words as n calls of next64. */
DPC_MAYBE_UNUSED static void dpc_chacha20_fill(dpc_chacha20_state *st, uint64_t *out, size_t n)
{
    size_t nblocks;
    while (n > 0 && st->pos < DPC_CHACHA_BUF_WORDS) {
        *out++ = st->buf[st->pos++];
        n--;
    }
    nblocks = n / 8;
    dpc_chacha20_blocks(st->input, out, nblocks);
    out += 8 * nblocks;
    n -= 8 * nblocks;
    while (n > 0) {
        *out++ = dpc_chacha20_next64(st);
        n--;
    }
}

/* The bitgen_t callbacks (numpy/random/bitgen.h). */
DPC_MAYBE_UNUSED static uint64_t dpc_chacha20_next_uint64(void *st)
{
    return dpc_chacha20_next64((dpc_chacha20_state *)st);
}

DPC_MAYBE_UNUSED static uint32_t dpc_chacha20_next_uint32(void *vst)
{
    dpc_chacha20_state *st = (dpc_chacha20_state *)vst;
    uint64_t w;
    if (st->has_uint32) {
        st->has_uint32 = 0;
        return st->uinteger;
    }
    w = dpc_chacha20_next64(st);
    st->has_uint32 = 1;
    st->uinteger = (uint32_t)(w >> 32);
    return (uint32_t)w;
}

DPC_MAYBE_UNUSED static double dpc_chacha20_next_double(void *st)
{
    /* the top 53 bits on the grid k * 2**-53, k in [0, 2**53) */
    return (double)(dpc_chacha20_next64((dpc_chacha20_state *)st) >> 11) * (1.0 / 9007199254740992.0);
}

/* ------------------------------------------------------------------------------------------ */
/* Word sources: what the samplers read, inlined into every kernel.                              */
/*
 * A numpy bitgen_t hands out words through a function pointer (one indirect call per word). A
 * dpc_words reader built by _random's `random_words` reads a dpcore ChaCha20's buffer directly
 * (the same words, in the same order, as next_uint64 would return: the stream is unchanged) and
 * calls through the bitgen_t for any other generator. The buffer is refilled through `refill`,
 * which is _random's copy of dpc_chacha20_refill (so the lane dispatch of _random is the one in
 * force). Same locking rule as the generator: hold its lock.
 */
typedef struct {
    dpc_chacha20_state *chacha;                   /* non-NULL: read this ChaCha20's buffer */
    void (*refill)(dpc_chacha20_state *);
    uint64_t (*next_uint64)(void *);              /* otherwise: the bitgen_t's callback */
    void *state;
} dpc_words;

static inline uint64_t dpc_words_next(dpc_words *src)
{
    dpc_chacha20_state *st = src->chacha;
    if (st != NULL) {
        if (st->pos >= DPC_CHACHA_BUF_WORDS) src->refill(st);
        return st->buf[st->pos++];
    }
    return src->next_uint64(src->state);
}

/* Non-inline refill, whose address `random_words` stores. */
DPC_MAYBE_UNUSED static void dpc_chacha20_refill_fn(dpc_chacha20_state *st) { dpc_chacha20_refill(st); }

/*
 * Mironov's U* (Mironov, CCS 2012, Section 5.2; the reference description is random_ustar in _random.pyx), with
 * the double assembled from its bit fields instead of ldexp, plus the random bits of the last
 * word read that the double does not use.
 *
 * The real uniform u' behind the draw has Z leading zero bits (read from whole words, P(Z = z) =
 * 2^-(z+1)); the bits after its first 1 are independent and uniform. For Z <= 1021 the double is
 * (1 + m 2^-52) 2^-(Z+1) with m the 52 bits after the first 1: its bit pattern is the biased
 * exponent 1023 - (Z + 1) = 1022 - Z (in [1, 1022]: a normal double) above the 52 mantissa bits,
 * which is exactly the value ldexp(2^52 + m, -(53 + Z)) (same number, no rounding anywhere). When
 * the first 1 leaves at least 52 bits in its word (at most 11 leading zeros in it) those bits are
 * m; otherwise m is the top 52 bits of a fresh word. Below 2^-1022 (Z >= 1022) the draw is
 * uniform on the subnormal grid k 2^-1074, k = the top 52 bits of a fresh word, 0 rejected; the
 * bit pattern of k 2^-1074 is k itself.
 *
 * *extra receives the *nextra (0..12) random bits of the last word read below those used for m
 * (or k). Given the double u they are uniform and independent of it, and with them the real
 * uniform lies in the sub-cell [u + ulp(u) e 2^-n, u + ulp(u) (e + 1) 2^-n) of u's cell
 * (e = *extra, n = *nextra): a refinement for free.
 */
static inline double dpc_ustar_from(dpc_words *src, uint64_t w, uint64_t *extra, int *nextra);

static inline double dpc_ustar(dpc_words *src, uint64_t *extra, int *nextra)
{
    return dpc_ustar_from(src, dpc_words_next(src), extra, nextra);
}

/* U* whose first 64 bits of expansion are w (already read; the rest comes from src). Callers
   that looked at the top of the expansion first (say 32 bits of it, from half a word) complete
   it with dpc_ustar_from(src, (top << 32) | next 32 bits, ...): the same U* as reading the
   bits in one piece. */
static inline double dpc_ustar_from(dpc_words *src, uint64_t w, uint64_t *extra, int *nextra)
{
    uint64_t m;
    int zeros = 0, lz;
    while (w == 0) {
        zeros += 64;
        if (zeros >= 1022) goto subnormal;
        w = dpc_words_next(src);
    }
    lz = dpc_clz64(w);
    zeros += lz;
    if (zeros >= 1022) goto subnormal;
    if (lz <= 11) {
        m = (w >> (11 - lz)) & ((UINT64_C(1) << 52) - 1);
        *nextra = 11 - lz;
        *extra = w & ((UINT64_C(1) << (11 - lz)) - 1);
    } else {
        w = dpc_words_next(src);
        m = w >> 12;
        *nextra = 12;
        *extra = w & 0xfff;
    }
    return dpc_u64_as_double(((uint64_t)(1022 - zeros) << 52) | m);
subnormal:
    do {
        w = dpc_words_next(src);
    } while ((w >> 12) == 0);
    *nextra = 12;
    *extra = w & 0xfff;
    return dpc_u64_as_double(w >> 12);
}

/* The width of the cell of a positive finite double x: ulp(x) = nextafter(x, inf) - x, exact.
   For a normal x with biased exponent E it is 2^(E - 1075), a normal double with biased exponent
   E - 52 when E > 52 and the subnormal 2^(E - 1) 2^-1074 otherwise; subnormals have ulp 2^-1074. */
static inline double dpc_ulp(double x)
{
    uint64_t e = dpc_double_as_u64(x) >> 52;    /* x > 0: no sign bit */
    if (e > 52) return dpc_u64_as_double((e - 52) << 52);
    return dpc_u64_as_double(e > 0 ? UINT64_C(1) << (e - 1) : 1);
}

/* x, hidden from the optimiser: a condition computed as data stays data (GCC and Clang would
   otherwise split `if (a | b) return a;` back into two unpredictable branches). */
static inline int dpc_opaque(int x)
{
#if defined(__GNUC__) || defined(__clang__)
    __asm__("" : "+r"(x));
#endif
    return x;
}

/* floor(x) for |x| < 2^62 without libm (as a double or an int64) (no SSE4.1 roundsd in a baseline build): the conversion
   truncates towards zero and is exact back to double (an integer below 2^53 in magnitude, or x
   itself when |x| >= 2^52, where every double is an integer); below a negative non-integer x the
   truncation is one too high, and t - 1 is exact (|t| < 2^52 there). */
static inline int64_t dpc_floor_i64(double x)
{
    int64_t i = (int64_t)x;
    return i - ((double)i > x);   /* integer form: compiled branch-free (x is often random) */
}

static inline double dpc_floor(double x)
{
    return (double)dpc_floor_i64(x);
}

/* rint(x): nearest integer, ties to even (numpy.rint), for any double. For |x| < 2^52,
   |x| + 2^52 lies in [2^52, 2^53) where the doubles are the integers, so the addition rounds |x|
   to the nearest integer, ties to even (2^52 is even), and subtracting 2^52 is exact. Needs
   round-to-nearest and no reassociation (-fno-fast-math), as everything here. */
static inline double dpc_rint(double x)
{
    const double two52 = 4503599627370496.0;
    const uint64_t bits = dpc_double_as_u64(x), sign = bits & UINT64_C(0x8000000000000000);
    double a = dpc_u64_as_double(bits ^ sign);  /* |x| */
    if (!(a < two52)) return x;                 /* already an integer (or inf/NaN) */
    a = (a + two52) - two52;
    return dpc_u64_as_double(dpc_double_as_u64(a) | sign);  /* sign restored, branch-free */
}

/* ------------------------------------------------------------------------------------------ */
/* Integer helpers for the samplers.                                                             */

/* Full 64 x 64 -> 128-bit product: returns the high half, stores the low half. */
static inline uint64_t dpc_mul64(uint64_t a, uint64_t b, uint64_t *lo)
{
#if defined(__SIZEOF_INT128__) && !defined(DPC_PORTABLE_C)
    unsigned __int128 p = (unsigned __int128)a * b;
    *lo = (uint64_t)p;
    return (uint64_t)(p >> 64);
#else
    uint64_t a0 = a & 0xffffffffu, a1 = a >> 32, b0 = b & 0xffffffffu, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    *lo = (mid << 32) | (p00 & 0xffffffffu);
    return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
#endif
}

/* floor((hi * 2**64 + lo) / d) for d >= 1, or UINT64_MAX when the quotient needs more than 64
   bits (hi >= d). */
static inline uint64_t dpc_div128_sat(uint64_t hi, uint64_t lo, uint64_t d)
{
    if (hi >= d) return UINT64_MAX;
#if defined(__SIZEOF_INT128__) && !defined(DPC_PORTABLE_C)
    return (uint64_t)((((unsigned __int128)hi << 64) | lo) / d);
#else
    {   /* restoring division, one quotient bit per step; the remainder stays below d */
        uint64_t q = 0;
        int i;
        for (i = 0; i < 64; i++) {
            uint64_t carry = hi >> 63;
            hi = (hi << 1) | (lo >> 63);
            lo <<= 1;
            q <<= 1;
            if (carry || hi >= d) {
                hi -= d;
                q |= 1;
            }
        }
        return q;
    }
#endif
}

#endif /* DPCORE_CHACHA20_H */
