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

/* cos and sin of n angles (any n): four at a time, the last one to three padded with zeros. */
static inline __attribute__((always_inline)) void sincos_array(const double *angles, long n, double *out_cos,
                                                              double *out_sin) {
    v4i large = {0};
    v4d c, s;
    long i = 0;
    for (; i + 4 <= n; i += 4) {
        sincos4(load4(angles + i), &c, &s, &large);
        memcpy(out_cos + i, &c, sizeof c);
        memcpy(out_sin + i, &s, sizeof s);
    }
    if (i < n) {
        double tail[4] = {0.0, 0.0, 0.0, 0.0};
        memcpy(tail, angles + i, (n - i) * sizeof *tail);
        sincos4(load4(tail), &c, &s, &large);
        for (long k = 0; k < n - i; k++) {
            out_cos[i + k] = c[k];
            out_sin[i + k] = s[k];
        }
    }
    if (!(large[0] | large[1] | large[2] | large[3])) return;
    for (i = 0; i < n; i++) { /* never reached with standardised inputs */
        if (!(fabs(angles[i]) <= REDUCTION_LIMIT)) {
            out_cos[i] = cos(angles[i]);
            out_sin[i] = sin(angles[i]);
        }
    }
}

PLANTED_CLONES
void rf_sincos(const double *angles, long n, double *out_cos, double *out_sin) {
    sincos_array(angles, n, out_cos, out_sin);
}

/* ---------------------------------------------------------------------------------------------
 * Features. One row of a block: the angles a_h = sum_k x_k * scaled_weights_t[k, h] (k = 0, 1, ...
 * in this order; four vectors at a time, so the multiply-adds of different angles overlap), then
 * their cosines and sines.
 * ------------------------------------------------------------------------------------------- */
static inline __attribute__((always_inline)) void feature_row(const double *x, long n_inputs,
                                                             const double *scaled_weights_t, long half, long h0,
                                                             long n_freq, double *angles, double *row) {
    long h = 0;
    for (; h + 16 <= n_freq; h += 16) {
        const double *w = scaled_weights_t + h0 + h;
        v4d a0 = x[0] * load4(w), a1 = x[0] * load4(w + 4), a2 = x[0] * load4(w + 8), a3 = x[0] * load4(w + 12);
        for (long k = 1; k < n_inputs; k++) {
            const double *wk = w + k * half, xk = x[k];
            a0 += xk * load4(wk);
            a1 += xk * load4(wk + 4);
            a2 += xk * load4(wk + 8);
            a3 += xk * load4(wk + 12);
        }
        memcpy(angles + h, &a0, sizeof a0);
        memcpy(angles + h + 4, &a1, sizeof a1);
        memcpy(angles + h + 8, &a2, sizeof a2);
        memcpy(angles + h + 12, &a3, sizeof a3);
    }
    for (; h < n_freq; h++) {
        double a = x[0] * scaled_weights_t[h0 + h];
        for (long k = 1; k < n_inputs; k++) a += x[k] * scaled_weights_t[k * half + h0 + h];
        angles[h] = a;
    }
    sincos_array(angles, n_freq, row, row + n_freq); /* cosines, then sines */
}

/* ---------------------------------------------------------------------------------------------
 * Gram matrices. The features are made block by block of RF_BLOCK columns and, within a block,
 * row by row as the refits (in increasing order of start) first need them, into a ring of rows
 * that stays in the level-1 cache; no feature array is ever stored. Per block and refit: the
 * window sums of every feature slide by one row (deviations from an anchor row, re-anchored every
 * `window` refits), then come the weights w_p, and register tiles of the dot products
 * f_a . t_b with the weighted training rows t_b = w * f_b, a running over the training and
 * prediction rows. A tile adds its block's products to four-lane accumulators kept per refit.
 *
 * Summation order of a dot product: four lanes, lane l summing the features p = l mod 4 of each
 * block in increasing p, block after block; at the end the lanes are added as (l0 + l1) + (l2 + l3).
 *
 * Memory: rows, weighted rows and window sums are RF_BLOCK + PAD doubles apart (PAD: a cache
 * line), so that equal offsets in different rows do not fall on the same level-1 cache sets and
 * store-to-load forwarding does not see false dependencies between them (4 KiB aliasing).
 * ------------------------------------------------------------------------------------------- */
#define TILE 3
#define PAD 8
#define STRIDE (RF_BLOCK + PAD)

/* A tile: rows f_a against the TILE weighted training rows t_b = w * f_b of a column group. Rows
 * are indexed in the refit's row list: training rows 0 .. window - 1, then prediction rows.
 * Kinds: FULL, TILE rows by TILE columns; ROW, one row; DIAG, a diagonal block of the Gram matrix
 * (rows = columns; its upper triangle) plus the single prediction row against its columns, nine
 * products where a FULL diagonal tile and a ROW tile would take twelve in two passes. Columns past
 * the last training row repeat it. Accumulator s of a tile holds the dot product of rows
 * dot_row[s] and dot_col[s] (dot_row[s] = -1: not needed). The first tile of a column group
 * (`weigh`) computes the group's t_b and stores them for the others (the stores then overlap the
 * arithmetic instead of taking a pass of their own); the TILE weighted rows of one group at a time
 * are kept, in slots col % TILE. */
enum { FULL, ROW, DIAG };

typedef struct {
    int kind, weigh;
    int row[TILE + 1];
    int col[TILE];
    int dot_row[TILE * TILE], dot_col[TILE * TILE];
} Tile;

static Tile make_tile(int kind, int weigh, long r0, long c0, long window, long n_rows) {
    Tile t = {.kind = kind, .weigh = weigh};
    for (int k = 0; k < TILE; k++) t.col[k] = (int)(c0 + k < window ? c0 + k : window - 1);
    for (int i = 0; i <= TILE; i++) t.row[i] = (int)(kind != ROW && i < TILE ? r0 + i : r0);
    if (kind == DIAG) t.row[TILE] = (int)window; /* the prediction row */
    for (int s = 0; s < TILE * TILE; s++) {
        int i = s / TILE, k = s % TILE;
        if (kind == DIAG) { /* (0,0) (0,1) (0,2) (1,1) (1,2) (2,2), then the prediction row */
            static const int diag_i[TILE * TILE] = {0, 0, 0, 1, 1, 2, 3, 3, 3};
            static const int diag_k[TILE * TILE] = {0, 1, 2, 1, 2, 2, 0, 1, 2};
            i = diag_i[s];
            k = diag_k[s];
        }
        const long r = t.row[i], c = c0 + k;
        const int needed = (kind != ROW || i == 0) && c < window && r < n_rows && (r >= window || r <= c);
        t.dot_row[s] = needed ? (int)r : -1;
        t.dot_col[s] = (int)c;
    }
    return t;
}

/* Tiles covering the needed pairs: (training a, training b) with a <= b (the upper triangle of
 * the Gram matrix) and (prediction c, training b), column group by column group. Rows are grouped
 * by TILE from the first, so the diagonal tiles of the Gram matrix are aligned; the one or two rows
 * left over get ROW tiles. With a single prediction row left over, a full diagonal block and the
 * prediction row share a DIAG tile. Returns the number of tiles written. */
static int plan_tiles(long window, long max_served, Tile *tiles) {
    const long n_rows = window + max_served, grouped = n_rows - n_rows % TILE;
    int n = 0;
    for (long c0 = 0; c0 < window; c0 += TILE) {
        /* a DIAG tile when the prediction row is a row of its own and the diagonal block is full */
        const int diag = max_served == 1 && window >= grouped && c0 + TILE <= window;
        int first = 1;
        for (long r0 = 0; r0 < n_rows; r0 += r0 < grouped ? TILE : 1) {
            if (diag && r0 == window) continue; /* the prediction row is in the DIAG tile */
            const int kind = diag && r0 == c0 ? DIAG : (r0 < grouped ? FULL : ROW);
            Tile t = make_tile(kind, first, r0, c0, window, n_rows);
            int any = 0;
            for (int s = 0; s < TILE * TILE; s++) any |= t.dot_row[s] >= 0;
            if (any) {
                tiles[n++] = t;
                first = 0;
            }
        }
    }
    return n;
}

/* Column k of a tile at features p .. p + 3: t_b, computed (and stored) or loaded. */
static inline __attribute__((always_inline)) v4d column(const double *f, const double *weight, double *t, int weigh,
                                                       long p) {
    if (!weigh) return load4(t + p);
    v4d y = load4(f + p) * load4(weight + p);
    memcpy(t + p, &y, sizeof y);
    return y;
}

/* acc[TILE * i + k] += f_row[i] * t_col[k] lane by lane over len features (a multiple of 4).
 * 3 x 3: nine accumulators, three rows, one column and one product fit the 16 vector registers
 * of AVX2 without spilling (a multiply and an add, not a fused multiply-add). ROW and DIAG tiles
 * keep the same lane order, so a dot product does not depend on the tile that computes it. */
static inline __attribute__((always_inline)) void tile3(const double *const *rows, const double *weight, double *t,
                                                       int weigh, long len, const Tile *tile, v4d *acc) {
    const double *x0 = rows[tile->row[0]], *x1 = rows[tile->row[1]], *x2 = rows[tile->row[2]];
    const double *f0 = rows[tile->col[0]], *f1 = rows[tile->col[1]], *f2 = rows[tile->col[2]];
    double *t0 = t + (tile->col[0] % TILE) * STRIDE, *t1 = t + (tile->col[1] % TILE) * STRIDE,
           *t2 = t + (tile->col[2] % TILE) * STRIDE;
    v4d c00 = acc[0], c01 = acc[1], c02 = acc[2], c10 = acc[3], c11 = acc[4], c12 = acc[5], c20 = acc[6],
        c21 = acc[7], c22 = acc[8];
#pragma GCC unroll 2
    for (long p = 0; p < len; p += 4) {
        v4d a0 = load4(x0 + p), a1 = load4(x1 + p), a2 = load4(x2 + p), b;
        b = column(f0, weight, t0, weigh, p);
        c00 += a0 * b; c10 += a1 * b; c20 += a2 * b;
        b = column(f1, weight, t1, weigh, p);
        c01 += a0 * b; c11 += a1 * b; c21 += a2 * b;
        b = column(f2, weight, t2, weigh, p);
        c02 += a0 * b; c12 += a1 * b; c22 += a2 * b;
    }
    acc[0] = c00; acc[1] = c01; acc[2] = c02;
    acc[3] = c10; acc[4] = c11; acc[5] = c12;
    acc[6] = c20; acc[7] = c21; acc[8] = c22;
}

static inline __attribute__((always_inline)) void tile1(const double *const *rows, const double *weight, double *t,
                                                       int weigh, long len, const Tile *tile, v4d *acc) {
    const double *x0 = rows[tile->row[0]];
    const double *f0 = rows[tile->col[0]], *f1 = rows[tile->col[1]], *f2 = rows[tile->col[2]];
    double *t0 = t + (tile->col[0] % TILE) * STRIDE, *t1 = t + (tile->col[1] % TILE) * STRIDE,
           *t2 = t + (tile->col[2] % TILE) * STRIDE;
    v4d c00 = acc[0], c01 = acc[1], c02 = acc[2];
    for (long p = 0; p < len; p += 4) {
        v4d a0 = load4(x0 + p);
        c00 += a0 * column(f0, weight, t0, weigh, p);
        c01 += a0 * column(f1, weight, t1, weigh, p);
        c02 += a0 * column(f2, weight, t2, weigh, p);
    }
    acc[0] = c00; acc[1] = c01; acc[2] = c02;
}

static inline __attribute__((always_inline)) void tile_diag(const double *const *rows, const double *weight, double *t,
                                                           int weigh, long len, const Tile *tile, v4d *acc) {
    const double *x0 = rows[tile->row[0]], *x1 = rows[tile->row[1]], *x2 = rows[tile->row[2]], *xp = rows[tile->row[3]];
    double *t0 = t + (tile->col[0] % TILE) * STRIDE, *t1 = t + (tile->col[1] % TILE) * STRIDE,
           *t2 = t + (tile->col[2] % TILE) * STRIDE;
    v4d d00 = acc[0], d01 = acc[1], d02 = acc[2], d11 = acc[3], d12 = acc[4], d22 = acc[5], p0 = acc[6], p1 = acc[7],
        p2 = acc[8];
#pragma GCC unroll 2
    for (long p = 0; p < len; p += 4) {
        v4d a0 = load4(x0 + p), a1 = load4(x1 + p), a2 = load4(x2 + p), ap = load4(xp + p), b;
        b = column(x0, weight, t0, weigh, p);
        d00 += a0 * b; p0 += ap * b;
        b = column(x1, weight, t1, weigh, p);
        d01 += a0 * b; d11 += a1 * b; p1 += ap * b;
        b = column(x2, weight, t2, weigh, p);
        d02 += a0 * b; d12 += a1 * b; d22 += a2 * b; p2 += ap * b;
    }
    acc[0] = d00; acc[1] = d01; acc[2] = d02;
    acc[3] = d11; acc[4] = d12; acc[5] = d22;
    acc[6] = p0; acc[7] = p1; acc[8] = p2;
}

static inline __attribute__((always_inline)) void run_tile(const double *const *rows, const double *weight, double *t,
                                                          long len, const Tile *tile, v4d *acc) {
    switch (tile->kind) {
    case FULL:
        if (tile->weigh) tile3(rows, weight, t, 1, len, tile, acc);
        else tile3(rows, weight, t, 0, len, tile, acc);
        break;
    case ROW:
        if (tile->weigh) tile1(rows, weight, t, 1, len, tile, acc);
        else tile1(rows, weight, t, 0, len, tile, acc);
        break;
    default:
        if (tile->weigh) tile_diag(rows, weight, t, 1, len, tile, acc);
        else tile_diag(rows, weight, t, 0, len, tile, acc);
    }
}

static inline __attribute__((always_inline)) double lane_sum(v4d v) { return (v[0] + v[1]) + (v[2] + v[3]); }

/* The ring holds row r of the current block in slot r mod n_ring. */
static inline __attribute__((always_inline)) double *ring_row(double *ring, long n_ring, long r) {
    return ring + (r % n_ring) * STRIDE;
}

static inline __attribute__((always_inline)) void store4(double *p, v4d v) { memcpy(p, &v, sizeof v); }

/* One row's contribution to the window sums, added (sign +1) or removed (-1); len a multiple of 4. */
static inline __attribute__((always_inline)) void slide(const double *f, const double *base, long len, double sign,
                                                       double *sum1, double *sum2) {
    for (long p = 0; p < len; p += 4) {
        const v4d d = load4(f + p) - load4(base + p);
        store4(sum1 + p, load4(sum1 + p) + sign * d);
        store4(sum2 + p, load4(sum2 + p) + sign * (d * d));
    }
}

/* w_p = (window - 1) / spread_p, spread_p = sum2_p - sum1_p^2 / window the sum of squared deviations
 * from the window mean; 0 for a constant feature (spread 0, only from degenerate inputs). */
static inline __attribute__((always_inline)) v4d weight4(v4d sum1, v4d sum2, double inv_window, double dof) {
    const v4d spread = sum2 - (sum1 * sum1) * inv_window;
    const v4i positive = spread > 0.0;
    return (v4d)((v4i)(dof / spread) & positive);
}

/* The weights of the training window starting at `start`, from the sums over it of the deviations
 * of each feature from the anchor row `base` and of their squares: recomputed from the window if
 * `fresh`, else slid from the window starting at `previous` (the last row to leave, the row to
 * enter and the weights in one pass). */
static inline __attribute__((always_inline)) void window_weights(double *ring, long n_ring, const double *base,
                                                                long len, long window, int fresh, long previous,
                                                                long start, double *sum1, double *sum2,
                                                                double *weight) {
    const double inv_window = 1.0 / (double)window, dof = (double)window - 1.0;
    if (fresh) {
        for (long p = 0; p < len; p++) sum1[p] = sum2[p] = 0.0;
        for (long s = start; s < start + window; s++) slide(ring_row(ring, n_ring, s), base, len, 1.0, sum1, sum2);
        for (long p = 0; p < len; p += 4)
            store4(weight + p, weight4(load4(sum1 + p), load4(sum2 + p), inv_window, dof));
        return;
    }
    for (long leaving = previous; leaving < start - 1; leaving++) {
        slide(ring_row(ring, n_ring, leaving), base, len, -1.0, sum1, sum2);
        slide(ring_row(ring, n_ring, leaving + window), base, len, 1.0, sum1, sum2);
    }
    const double *out = ring_row(ring, n_ring, start - 1), *in = ring_row(ring, n_ring, start - 1 + window);
    for (long p = 0; p < len; p += 4) {
        const v4d b = load4(base + p), d_out = load4(out + p) - b, d_in = load4(in + p) - b;
        const v4d s1 = (load4(sum1 + p) - d_out) + d_in, s2 = (load4(sum2 + p) - d_out * d_out) + d_in * d_in;
        store4(sum1 + p, s1);
        store4(sum2 + p, s2);
        store4(weight + p, weight4(s1, s2, inv_window, dof));
    }
}

PLANTED_CLONES
int rf_grams(const double *inputs, long n_inputs, const double *scaled_weights_t, long half, const ptrdiff_t *starts,
             const ptrdiff_t *served, long n_refits, long window, long max_served,
             double *grams, double *kernels) {
    const long n_list = window + max_served, n_ring = 2 * window + max_served;
    const long max_tiles = n_list * ((window + TILE - 1) / TILE);
    Tile *tiles = malloc(max_tiles * sizeof *tiles);
    const double **rows = malloc(n_list * sizeof *rows);
    /* one workspace: TILE weighted rows, the ring, sum1, sum2, weight, base, angles */
    double *work = aligned_alloc(64, (TILE + n_ring + 5) * STRIDE * sizeof *work);
    v4d *acc = aligned_alloc(64, n_refits * max_tiles * TILE * TILE * sizeof *acc);
    if (!tiles || !rows || !work || !acc) {
        free(tiles);
        free(rows);
        free(work);
        free(acc);
        return -1;
    }
    double *t = work, *ring = t + TILE * STRIDE, *sum1 = ring + n_ring * STRIDE, *sum2 = sum1 + STRIDE;
    double *weight = sum2 + STRIDE, *base = weight + STRIDE, *angles = base + STRIDE;
    const int n_tiles = plan_tiles(window, max_served, tiles);
    const long per_refit = (long)n_tiles * TILE * TILE;
    memset(acc, 0, n_refits * per_refit * sizeof *acc);
    for (long h0 = 0; h0 < half; h0 += RF_BLOCK / 2) {
        const long n_freq = half - h0 < RF_BLOCK / 2 ? half - h0 : RF_BLOCK / 2, len = 2 * n_freq;
        long previous = -window, anchor = 0, next_row = 0;
        for (long j = 0; j < n_refits; j++) {
            const long start = starts[j];
            const int fresh = start - previous >= window || start - anchor >= window;
            if (fresh && next_row < start) next_row = start; /* rows no refit reads are skipped */
            for (; next_row < start + window + served[j]; next_row++)
                feature_row(inputs + next_row * n_inputs, n_inputs, scaled_weights_t, half, h0, n_freq, angles,
                            ring_row(ring, n_ring, next_row));
            if (fresh) {
                anchor = start;
                memcpy(base, ring_row(ring, n_ring, start), len * sizeof *base);
            }
            window_weights(ring, n_ring, base, len, window, fresh, previous, start, sum1, sum2, weight);
            previous = start;
            for (long b = 0; b < window; b++) rows[b] = ring_row(ring, n_ring, start + b);
            /* Prediction rows past served[j] repeat the last training row (their results are dropped). */
            for (long c = 0; c < max_served; c++)
                rows[window + c] = ring_row(ring, n_ring, c < served[j] ? start + window + c : start + window - 1);
            for (int k = 0; k < n_tiles; k++)
                run_tile(rows, weight, t, len, &tiles[k], acc + j * per_refit + k * TILE * TILE);
        }
    }
    memset(grams, 0, n_refits * window * window * sizeof *grams);
    if (max_served > 0) memset(kernels, 0, n_refits * max_served * window * sizeof *kernels);
    for (long j = 0; j < n_refits; j++) {
        double *gram = grams + j * window * window;
        for (int k = 0; k < n_tiles; k++) {
            const Tile *tile = &tiles[k];
            const v4d *sums = acc + j * per_refit + k * TILE * TILE;
            for (int s = 0; s < TILE * TILE; s++) {
                const long r = tile->dot_row[s], c = tile->dot_col[s];
                if (r < 0) continue;
                if (r < window) gram[r * window + c] = lane_sum(sums[s]);
                else if (r - window < served[j])
                    kernels[(j * max_served + r - window) * window + c] = lane_sum(sums[s]);
            }
        }
        for (long a = 1; a < window; a++) /* the lower triangle from the upper one */
            for (long b = 0; b < a; b++) gram[a * window + b] = gram[b * window + a];
    }
    free(tiles);
    free(rows);
    free(work);
    free(acc);
    return 0;
}
