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
 * ...) and, on x86 with AVX2 (detected at run time, no -march needed), 8 blocks in 32-byte
 * vectors. Other compilers (MSVC) get the portable scalar code. All paths compute the same
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

#define DPC_CHACHA_BUF_BLOCKS 8
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

#endif /* vector extensions */

/* ------------------------------------------------------------------------------------------ */
/* Dispatch: the widest path this build and this CPU support (tests may lower it).              */

static int dpc_chacha_lanes_max = 1;
static int dpc_chacha_lanes = 1;

/* Call once (under the GIL, at module import) before generating. */
static void dpc_chacha20_init_dispatch(void)
{
    int lanes = 1;
#if defined(DPC_CHACHA_HAVE_VECTORS)
    lanes = 4;
#endif
#if defined(DPC_CHACHA_HAVE_X8)
#if defined(DPC_CHACHA_X8_RUNTIME_CHECK)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) lanes = 8;
#else
    lanes = 8;
#endif
#endif
    dpc_chacha_lanes_max = lanes;
    dpc_chacha_lanes = lanes;
}

/* Test hook: use at most `lanes` (1, 4 or 8) blocks per step; returns the value in force. */
static int dpc_chacha20_set_lanes(int lanes)
{
    if (lanes == 1 || lanes == 4 || lanes == 8)
        dpc_chacha_lanes = lanes <= dpc_chacha_lanes_max ? lanes : dpc_chacha_lanes_max;
    return dpc_chacha_lanes;
}

static int dpc_chacha20_get_lanes(void) { return dpc_chacha_lanes; }

/* Write `nblocks` consecutive blocks (8 * nblocks words) starting at the input's counter, and
   advance the counter by nblocks. */
static void dpc_chacha20_blocks(uint32_t input[16], uint64_t *out, size_t nblocks)
{
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
static void dpc_chacha20_set_key(dpc_chacha20_state *st, const uint32_t key[8])
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
static void dpc_chacha20_seek(dpc_chacha20_state *st, uint64_t block, int word)
{
    dpc_chacha20_set_counter(st->input, block);
    st->pos = DPC_CHACHA_BUF_WORDS;
    if (word > 0) {
        dpc_chacha20_refill(st);
        st->pos = word;
    }
}

/* The stream position of the next unread word, as (block, word); inverse of seek. */
static void dpc_chacha20_tell(const dpc_chacha20_state *st, uint64_t *block, int *word)
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
static void dpc_chacha20_fill(dpc_chacha20_state *st, uint64_t *out, size_t n)
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
static uint64_t dpc_chacha20_next_uint64(void *st)
{
    return dpc_chacha20_next64((dpc_chacha20_state *)st);
}

static uint32_t dpc_chacha20_next_uint32(void *vst)
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

static double dpc_chacha20_next_double(void *st)
{
    /* the top 53 bits on the grid k * 2**-53, k in [0, 2**53) */
    return (double)(dpc_chacha20_next64((dpc_chacha20_state *)st) >> 11) * (1.0 / 9007199254740992.0);
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

/* Number of leading zero bits of w != 0. */
static inline int dpc_clz64(uint64_t w)
{
#if (defined(__GNUC__) || defined(__clang__)) && !defined(DPC_PORTABLE_C)
    return __builtin_clzll(w);
#else
    int n = 0;
    while (!(w & 0x8000000000000000ull)) {
        w <<= 1;
        n++;
    }
    return n;
#endif
}

#endif /* DPCORE_CHACHA20_H */
