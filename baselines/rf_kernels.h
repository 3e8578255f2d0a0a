/* Compiled kernels of the random Fourier features ridge (planted.baselines.rf_ridge).
 *
 * Every function is a pure loop over caller-owned, C-contiguous float64 buffers. Results do not
 * depend on the machine: no floating-point contraction (-ffp-contract=off), no reassociation, and
 * a fixed summation order, so the AVX2 and the baseline builds of each function (selected at run
 * time) return the same bits.
 */
#ifndef PLANTED_RF_KERNELS_H
#define PLANTED_RF_KERNELS_H

#include <stddef.h>

/* cos and sin of n angles (radians); see rf_kernels.c for the method and its accuracy. */
void rf_sincos(const double *angles, long n, double *out_cos, double *out_sin);

/* Feature layout. The features of frequency h are cos(a_h) and sin(a_h); they are stored in
 * blocks of RF_BLOCK / 2 frequencies, block k holding, for every row, the cosines of its
 * frequencies followed by their sines:
 *   cos(a[r, h]) at features[(k * n_rows + r) * RF_BLOCK + i],
 *   sin(a[r, h]) at features[(k * n_rows + r) * RF_BLOCK + len_k + i],
 * with k = h / (RF_BLOCK / 2), i = h % (RF_BLOCK / 2) and len_k the number of frequencies of block k
 * (RF_BLOCK / 2 except in the last block): an array of shape (ceil(2 half / RF_BLOCK), n_rows,
 * RF_BLOCK) whose last block may be partly unused. A block of every row is one contiguous stretch
 * of memory, and the order of the features does not matter to the sums over them below. */
#define RF_BLOCK 256

/* Random Fourier features of n_rows input rows, in the layout above, with
 *   a[r, h] = sum_k inputs[r, k] * scaled_weights_t[k, h]   (k = 0, 1, ... in this order)
 * and scaled_weights_t the (n_inputs x half) transpose of gamma * W. */
void rf_features(const double *inputs, long n_rows, long n_inputs, const double *scaled_weights_t, long half,
                 double *features);

/* Gram matrices and kernel rows of the scaled features of each refit.
 *
 * features: n_rows rows of n_features = 2 half features in the layout above, half a multiple of 2
 * (so that every block holds a multiple of 4 features). Refit j trains on the `window` rows
 * starts[j] .. starts[j] + window - 1 and predicts the served[j] rows that follow. With
 * w_p = (window - 1) / sum_s (f_sp - mean_p)^2 over the training rows (0 when that sum is 0):
 *   grams[j, a, b]   = sum_p w_p f[start + a, p] f[start + b, p]              (window x window)
 *   kernels[j, c, b] = sum_p w_p f[start + window + c, p] f[start + b, p]     (max_served x window)
 * Rows c >= served[j] of kernels[j] are set to 0. Refits must come in increasing order of start.
 * Returns 0, or -1 if the workspace could not be allocated. */
int rf_grams(const double *features, long n_rows, long n_features, const ptrdiff_t *starts, const ptrdiff_t *served,
             long n_refits, long window, long max_served, double *grams, double *kernels);

#endif
