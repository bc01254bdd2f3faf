/* Constants of the noise kernels' proven bounds, and the storage of the bracket tables of
 * -ln(u') (see _noise_neglog.pxd).
 *
 * The constants are exact powers of two (the decimal literals round to them exactly). The tables
 * are static: every extension module that includes this header has its own copy, which it fills
 * at import with _noise_neglog.pxd's init_brackets() (tests/test_threads.py checks that every
 * kernel cimporting _noise_neglog does), so the hot loops read them without an indirection. */
#ifndef DPC_NOISE_BOUNDS_H
#define DPC_NOISE_BOUNDS_H

#define DPC_TWO_64 18446744073709551616.0      /* 2**64 */
#define DPC_TWO_M32 2.3283064365386963e-10     /* 2**-32 */
#define DPC_TWO_M48 3.552713678800501e-15      /* 2**-48 */
#define DPC_TWO_M49 1.7763568394002505e-15     /* 2**-49 */
#define DPC_TWO_M50 8.881784197001252e-16      /* 2**-50 */
#define DPC_TWO_M52 2.220446049250313e-16      /* 2**-52 */
#define DPC_TWO_M100 7.888609052210118e-31     /* 2**-100 */
#define DPC_TWO_M1000 9.332636185032189e-302   /* 2**-1000 */

/* LN1P_DN[j] <= ln(1 + j/256) <= LN1P_UP[j], LN2_DN <= ln 2 <= LN2_UP */
static double dpc_ln1p_dn[257];
static double dpc_ln1p_up[257];
static double dpc_ln2_dn;
static double dpc_ln2_up;

#endif
