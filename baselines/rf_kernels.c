/* Compiled kernels of the random Fourier features ridge; the contract is in rf_kernels.h.
 *
 * Determinism: compiled with -ffp-contract=off and without -ffast-math, every operation below is
 * an IEEE-754 double operation in a fixed order. The hot functions are built twice (AVX2 and the
 * baseline instruction set, chosen at load time through GCC/Clang target_clones); the vector code
 * uses explicit 4-lane vectors, so both builds perform the same operations and return the same bits.
 */
#include "rf_kernels.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if !defined(PLANTED_NO_CLONES) && defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define PLANTED_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PLANTED_CLONES
#endif

typedef double v4d __attribute__((vector_size(32)));

static inline __attribute__((always_inline)) v4d load4(const double *p) {
    v4d v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* ---------------------------------------------------------------------------------------------
 * sin and cos: Cody-Waite reduction by pi/2 (three-part constant) and the fdlibm kernels
 * (Sun Microsystems' freely distributable libm, k_sin.c / k_cos.c, minimax on [-pi/4, pi/4]), their
 * polynomials in z = r^2 evaluated by Estrin's scheme (shorter dependency chains than Horner's).
 * For |x| <= REDUCTION_LIMIT the quotient n < 2^19 and n * PIO2_1, n * PIO2_2 are exact, so the
 * reduced argument is accurate to about one unit in its last place; the results agree with a
 * correctly rounded sin/cos to a few units in the last place. Larger angles (never produced by
 * standardised inputs) go through the C library's sin and cos, one value at a time.
 * ------------------------------------------------------------------------------------------- */
static const double INV_PIO2 = 6.36619772367581382433e-01;
static const double PIO2_1 = 1.57079632673412561417e+00;  /* first 33 bits of pi/2 */
static const double PIO2_2 = 6.07710050630396597660e-11;  /* next 33 bits */
static const double PIO2_2T = 2.02226624879595063154e-21; /* pi/2 - (PIO2_1 + PIO2_2) */
static const double ROUND_MAGIC = 6755399441055744.0;      /* 1.5 * 2^52 */
static const double REDUCTION_LIMIT = 823549.6;            /* 2^19 * pi/2 */

static const double S1 = -1.66666666666666324348e-01, S2 = 8.33333333332248946124e-03,
                    S3 = -1.98412698298579493134e-04, S4 = 2.75573137070700676789e-06,
                    S5 = -2.50507602534068634195e-08, S6 = 1.58969099521155010221e-10;
static const double C1 = 4.16666666666666019037e-02, C2 = -1.38888888888741095749e-03,
                    C3 = 2.48015872894767294178e-05, C4 = -2.75573143513906633035e-07,
                    C5 = 2.08757232129817482790e-09, C6 = -1.13596475577881948265e-11;

typedef int64_t v4i __attribute__((vector_size(32)));

/* sin and cos of four angles; `large` flags lanes beyond REDUCTION_LIMIT (or NaN). */
static inline __attribute__((always_inline)) void sincos4(v4d x, v4d *cos_x, v4d *sin_x, v4i *large) {
    const v4d shifted = x * INV_PIO2 + ROUND_MAGIC; /* round(x * 2 / pi) in the low mantissa bits */
    const v4d q = shifted - ROUND_MAGIC;
    const v4i quadrant = (v4i)shifted & 3;
    const v4d r = ((x - q * PIO2_1) - q * PIO2_2) - q * PIO2_2T;
    const v4d z = r * r, z2 = z * z;
    const v4d ps = (S1 + z * S2) + z2 * ((S3 + z * S4) + z2 * (S5 + z * S6));
    const v4d pc = (C1 + z * C2) + z2 * ((C3 + z * C4) + z2 * (C5 + z * C6));
    const v4d s = r + (z * r) * ps;
    const v4d hz = 0.5 * z, w = 1.0 - hz;
    const v4d c = w + (((1.0 - w) - hz) + z * (z * pc));
    /* quadrant 0: (c, s), 1: (-s, c), 2: (-c, -s), 3: (s, -c); a sign is the top bit */
    const v4i swap = (quadrant & 1) == 1, bits_s = (v4i)s, bits_c = (v4i)c;
    const v4i cos_bits = (swap & bits_s) | (~swap & bits_c), sin_bits = (swap & bits_c) | (~swap & bits_s);
    *cos_x = (v4d)(cos_bits ^ (((quadrant + 1) & 2) << 62));
    *sin_x = (v4d)(sin_bits ^ ((quadrant & 2) << 62));
    const v4d magnitude = (v4d)((v4i)x & INT64_MAX);
    *large |= ~(magnitude <= REDUCTION_LIMIT);
}

PLANTED_CLONES
void rf_sincos(const double *angles, long n, double *out_cos, double *out_sin) {
    v4i large = {0};
    v4d c, s;
    long i = 0;
    for (; i + 4 <= n; i += 4) {
        sincos4(load4(angles + i), &c, &s, &large);
        memcpy(out_cos + i, &c, sizeof c);
        memcpy(out_sin + i, &s, sizeof s);
    }
    if (i < n) { /* the last one to three angles, padded with zeros */
        double tail[4] = {0.0, 0.0, 0.0, 0.0};
        memcpy(tail, angles + i, (n - i) * sizeof *tail);
        sincos4(load4(tail), &c, &s, &large);
        for (long k = 0; k < n - i; k++) {
            out_cos[i + k] = c[k];
            out_sin[i + k] = s[k];
        }
    }
    if (!(large[0] | large[1] | large[2] | large[3])) return;
    for (i = 0; i < n; i++) {
        if (!(fabs(angles[i]) <= REDUCTION_LIMIT)) {
            out_cos[i] = cos(angles[i]);
            out_sin[i] = sin(angles[i]);
        }
    }
}

PLANTED_CLONES
void rf_features(const double *inputs, long n_rows, long n_inputs, const double *scaled_weights_t, long half,
                 double *features) {
    v4i large = {0};
    for (long h0 = 0; h0 < half; h0 += RF_BLOCK / 2) {
        const long len = half - h0 < RF_BLOCK / 2 ? half - h0 : RF_BLOCK / 2;
        double *block = features + (h0 / (RF_BLOCK / 2)) * n_rows * RF_BLOCK;
        for (long r = 0; r < n_rows; r++) {
            const double *x = inputs + r * n_inputs;
            double *row = block + r * RF_BLOCK;
            long h = 0;
            for (; h + 4 <= len; h += 4) {
                v4d angle = x[0] * load4(scaled_weights_t + h0 + h);
                for (long k = 1; k < n_inputs; k++) angle += x[k] * load4(scaled_weights_t + k * half + h0 + h);
                v4d c, s;
                sincos4(angle, &c, &s, &large);
                memcpy(row + h, &c, sizeof c);
                memcpy(row + len + h, &s, sizeof s);
            }
            for (; h < len; h++) { /* len is even: at most two frequencies left, padded to four lanes */
                double angle = x[0] * scaled_weights_t[h0 + h];
                for (long k = 1; k < n_inputs; k++) angle += x[k] * scaled_weights_t[k * half + h0 + h];
                v4d c, s;
                sincos4((v4d){angle, 0.0, 0.0, 0.0}, &c, &s, &large);
                row[h] = c[0];
                row[len + h] = s[0];
            }
        }
    }
    if (!(large[0] | large[1] | large[2] | large[3])) return;
    /* Angles beyond the reduction limit (never produced by standardised inputs): the C library. */
    for (long h = 0; h < half; h++) {
        const long k0 = h / (RF_BLOCK / 2), i = h % (RF_BLOCK / 2);
        const long len = half - k0 * (RF_BLOCK / 2) < RF_BLOCK / 2 ? half - k0 * (RF_BLOCK / 2) : RF_BLOCK / 2;
        for (long r = 0; r < n_rows; r++) {
            double angle = inputs[r * n_inputs] * scaled_weights_t[h];
            for (long k = 1; k < n_inputs; k++) angle += inputs[r * n_inputs + k] * scaled_weights_t[k * half + h];
            if (fabs(angle) <= REDUCTION_LIMIT) continue;
            double *row = features + (k0 * n_rows + r) * RF_BLOCK;
            row[i] = cos(angle);
            row[len + i] = sin(angle);
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Gram matrices. The features are taken block by block of RF_BLOCK columns, and within a block the
 * refits in order, so each block of every row is read from memory once and the rows of a refit's
 * window stay in the level-1 cache for the next refits. Per block and refit: the window sums of
 * every feature slide by one row (deviations from an anchor row, re-anchored every `window`
 * refits), then come the weights w_p, the weighted training rows t_b = w * f_b, and tiles of dot
 * products f_a . t_b held in registers, a running over the training and prediction rows.
 *
 * Summation order of a dot product: within a block, four lanes (lane l sums the features
 * p = l mod 4 in increasing p) added as (l0 + l1) + (l2 + l3); the block totals are added in
 * increasing block order.
 * ------------------------------------------------------------------------------------------- */
#define TILE 3

/* A tile: `height` (TILE or 1) rows f_a against the TILE weighted training rows t_b = w * f_b of
 * a column group. Rows are indexed in the refit's row list: training rows 0 .. window - 1, then
 * prediction rows. Columns past the last training row repeat it; keep[i][k] says whether a dot
 * product is needed. The first tile of a column group (`weigh`) computes its t_b and stores them
 * for the others (the stores then overlap the arithmetic instead of taking a pass of their own). */
typedef struct {
    int height, weigh;
    int row[TILE];
    int col[TILE];
    int keep[TILE][TILE];
} Tile;

/* Tiles covering the needed pairs: (training a, training b) with a <= b (the upper triangle of
 * the Gram matrix) and (prediction c, training b), column group by column group. Rows are grouped
 * by TILE from the first, so the diagonal tiles of the Gram matrix are aligned; the one or two rows
 * left over get tiles of height 1. Returns the number of tiles written. */
static int plan_tiles(long window, long max_served, Tile *tiles) {
    const long n_rows = window + max_served, grouped = n_rows - n_rows % TILE;
    int n = 0;
    for (long c0 = 0; c0 < window; c0 += TILE) {
        int first = 1;
        for (long r0 = 0; r0 < n_rows; r0 += r0 < grouped ? TILE : 1) {
            const int height = r0 < grouped ? TILE : 1;
            Tile t = {.height = height, .weigh = first};
            int any = 0;
            for (int i = 0; i < TILE; i++) {
                const long r = r0 + (i < height ? i : 0);
                t.row[i] = (int)r;
                for (int k = 0; k < TILE; k++) {
                    const long c = c0 + k < window ? c0 + k : window - 1;
                    t.col[k] = (int)c;
                    t.keep[i][k] = i < height && c0 + k < window && (r >= window || r <= c);
                    any |= t.keep[i][k];
                }
            }
            if (any) {
                tiles[n++] = t;
                first = 0;
            }
        }
    }
    return n;
}

static inline __attribute__((always_inline)) double lane_sum(v4d v) { return (v[0] + v[1]) + (v[2] + v[3]); }

/* Column k of a tile at features p .. p + 3: t_b, computed (and stored) or loaded. */
static inline __attribute__((always_inline)) v4d column(const double *f, const double *weight, double *t, int weigh,
                                                       long p) {
    if (!weigh) return load4(t + p);
    v4d y = load4(f + p) * load4(weight + p);
    memcpy(t + p, &y, sizeof y);
    return y;
}

/* out[i][k] = f_row[i] . t_col[k] over len features (a multiple of 4). 3 x 3: nine accumulators,
 * three rows, one column and one product fit the 16 vector registers of AVX2 without spilling
 * (a multiply and an add, not a fused multiply-add). Height 1 keeps the same lane order, so a dot
 * product does not depend on the tile that computes it. */
static inline __attribute__((always_inline)) void tile3(const double *const *rows, const double *weight, double *t,
                                                       int weigh, long len, const Tile *tile, double out[TILE][TILE]) {
    const double *x0 = rows[tile->row[0]], *x1 = rows[tile->row[1]], *x2 = rows[tile->row[2]];
    const double *f0 = rows[tile->col[0]], *f1 = rows[tile->col[1]], *f2 = rows[tile->col[2]];
    double *t0 = t + (long)tile->col[0] * RF_BLOCK, *t1 = t + (long)tile->col[1] * RF_BLOCK,
           *t2 = t + (long)tile->col[2] * RF_BLOCK;
    v4d c00 = {0}, c01 = {0}, c02 = {0}, c10 = {0}, c11 = {0}, c12 = {0}, c20 = {0}, c21 = {0}, c22 = {0};
    for (long p = 0; p < len; p += 4) {
        v4d a0 = load4(x0 + p), a1 = load4(x1 + p), a2 = load4(x2 + p), b;
        b = column(f0, weight, t0, weigh, p);
        c00 += a0 * b; c10 += a1 * b; c20 += a2 * b;
        b = column(f1, weight, t1, weigh, p);
        c01 += a0 * b; c11 += a1 * b; c21 += a2 * b;
        b = column(f2, weight, t2, weigh, p);
        c02 += a0 * b; c12 += a1 * b; c22 += a2 * b;
    }
    out[0][0] = lane_sum(c00); out[0][1] = lane_sum(c01); out[0][2] = lane_sum(c02);
    out[1][0] = lane_sum(c10); out[1][1] = lane_sum(c11); out[1][2] = lane_sum(c12);
    out[2][0] = lane_sum(c20); out[2][1] = lane_sum(c21); out[2][2] = lane_sum(c22);
}

static inline __attribute__((always_inline)) void tile1(const double *const *rows, const double *weight, double *t,
                                                       int weigh, long len, const Tile *tile, double out[TILE][TILE]) {
    const double *x0 = rows[tile->row[0]];
    const double *f0 = rows[tile->col[0]], *f1 = rows[tile->col[1]], *f2 = rows[tile->col[2]];
    double *t0 = t + (long)tile->col[0] * RF_BLOCK, *t1 = t + (long)tile->col[1] * RF_BLOCK,
           *t2 = t + (long)tile->col[2] * RF_BLOCK;
    v4d c00 = {0}, c01 = {0}, c02 = {0};
    for (long p = 0; p < len; p += 4) {
        v4d a0 = load4(x0 + p);
        c00 += a0 * column(f0, weight, t0, weigh, p);
        c01 += a0 * column(f1, weight, t1, weigh, p);
        c02 += a0 * column(f2, weight, t2, weigh, p);
    }
    out[0][0] = lane_sum(c00); out[0][1] = lane_sum(c01); out[0][2] = lane_sum(c02);
}

/* Sums over the training window of the deviations of each feature from the anchor row, and of
 * their squares: recomputed from the window when `anchor` == `start`, else slid from the window
 * starting at `previous`. */
static inline __attribute__((always_inline)) void window_sums(const double *block, long len, long window, long anchor,
                                                             long previous, long start, double *sum1, double *sum2) {
    const double *base = block + anchor * RF_BLOCK;
    if (anchor == start) {
        for (long p = 0; p < len; p++) sum1[p] = sum2[p] = 0.0;
        for (long s = start; s < start + window; s++) {
            const double *f = block + s * RF_BLOCK;
            for (long p = 0; p < len; p++) {
                double d = f[p] - base[p];
                sum1[p] += d;
                sum2[p] += d * d;
            }
        }
        return;
    }
    for (long leaving = previous; leaving < start; leaving++) {
        const double *out = block + leaving * RF_BLOCK, *in = block + (leaving + window) * RF_BLOCK;
        for (long p = 0; p < len; p++) {
            double d = out[p] - base[p];
            sum1[p] -= d;
            sum2[p] -= d * d;
            d = in[p] - base[p];
            sum1[p] += d;
            sum2[p] += d * d;
        }
    }
}

PLANTED_CLONES
int rf_grams(const double *features, long n_rows, long n_features, const ptrdiff_t *starts, const ptrdiff_t *served,
             long n_refits, long window, long max_served, double *grams, double *kernels) {
    const long n_list = window + max_served;
    Tile *tiles = malloc((n_list * ((window + TILE - 1) / TILE)) * sizeof *tiles);
    double *t = aligned_alloc(64, window * RF_BLOCK * sizeof *t); /* aligned: no store splits a cache line */
    const double **rows = malloc(n_list * sizeof *rows);
    if (!tiles || !t || !rows) {
        free(tiles);
        free(t);
        free(rows);
        return -1;
    }
    const int n_tiles = plan_tiles(window, max_served, tiles);
    const double inv_window = 1.0 / (double)window, dof = (double)window - 1.0;
    double sum1[RF_BLOCK] __attribute__((aligned(64))), sum2[RF_BLOCK] __attribute__((aligned(64)));
    double weight[RF_BLOCK] __attribute__((aligned(64))), dots[TILE][TILE];
    memset(grams, 0, n_refits * window * window * sizeof *grams);
    if (max_served > 0) memset(kernels, 0, n_refits * max_served * window * sizeof *kernels);
    for (long p0 = 0; p0 < n_features; p0 += RF_BLOCK) {
        const long len = n_features - p0 < RF_BLOCK ? n_features - p0 : RF_BLOCK;
        const double *block = features + (p0 / RF_BLOCK) * n_rows * RF_BLOCK; /* (n_rows x RF_BLOCK) */
        long previous = -window, anchor = 0;
        for (long j = 0; j < n_refits; j++) {
            const long start = starts[j];
            if (start - previous >= window || start - anchor >= window) anchor = start;
            window_sums(block, len, window, anchor, previous, start, sum1, sum2);
            previous = start;
            int degenerate = 0;
            for (long p = 0; p < len; p++) {
                double spread = sum2[p] - (sum1[p] * sum1[p]) * inv_window; /* (window - 1) * variance */
                weight[p] = dof / spread;
                degenerate |= !(spread > 0.0);
            }
            if (degenerate) /* a constant feature (only from degenerate inputs) gets weight 0 */
                for (long p = 0; p < len; p++) weight[p] = sum2[p] - (sum1[p] * sum1[p]) * inv_window > 0.0 ? weight[p] : 0.0;
            for (long b = 0; b < window; b++) rows[b] = block + (start + b) * RF_BLOCK;
            /* Prediction rows past served[j] repeat the last training row (their results are dropped). */
            for (long c = 0; c < max_served; c++)
                rows[window + c] = block + (c < served[j] ? start + window + c : start + window - 1) * RF_BLOCK;
            double *gram = grams + j * window * window;
            double *kern = max_served > 0 ? kernels + j * max_served * window : NULL;
            for (int k = 0; k < n_tiles; k++) {
                const Tile *tile = &tiles[k];
                if (tile->height == TILE) {
                    if (tile->weigh) tile3(rows, weight, t, 1, len, tile, dots);
                    else tile3(rows, weight, t, 0, len, tile, dots);
                } else {
                    if (tile->weigh) tile1(rows, weight, t, 1, len, tile, dots);
                    else tile1(rows, weight, t, 0, len, tile, dots);
                }
                for (int i = 0; i < tile->height; i++) {
                    const long r = tile->row[i];
                    for (int m = 0; m < TILE; m++) {
                        if (!tile->keep[i][m]) continue;
                        if (r < window) gram[r * window + tile->col[m]] += dots[i][m];
                        else if (r - window < served[j]) kern[(r - window) * window + tile->col[m]] += dots[i][m];
                    }
                }
            }
        }
    }
    for (long j = 0; j < n_refits; j++) { /* the lower triangle from the upper one */
        double *gram = grams + j * window * window;
        for (long a = 1; a < window; a++)
            for (long b = 0; b < a; b++) gram[a * window + b] = gram[b * window + a];
    }
    free(tiles);
    free(t);
    free(rows);
    return 0;
}
