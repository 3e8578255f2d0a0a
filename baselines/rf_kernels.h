/* Compiled kernels of the random Fourier features ridge (planted.baselines.rf_ridge).
 *
 * Every function reads and writes caller-owned, C-contiguous float64 buffers (rf_grams allocates
 * its own workspace, about 1.5 MB for the SPEC's sizes) and has no other effect. Results do not
 * depend on the machine: no floating-point contraction (-ffp-contract=off), no reassociation, and
 * a fixed summation order, so the AVX2 and the baseline builds of each function (selected at run
 * time) return the same bits.
 */
#ifndef PLANTED_RF_KERNELS_H
#define PLANTED_RF_KERNELS_H

#include <stddef.h>

/* cos and sin of n angles (radians); see rf_kernels.c for the method and its accuracy. */
void rf_sincos(const double *angles, long n, double *out_cos, double *out_sin);

/* Features are made and summed over in blocks of RF_BLOCK: RF_BLOCK / 2 frequencies, their
 * cosines then their sines (the last block may hold fewer). */
#define RF_BLOCK 256

/* Gram matrices and kernel rows of the scaled random Fourier features of each refit.
 *
 * Row r of the features is f[r] = [cos(a[r, 0 .. half - 1]); sin(a[r, 0 .. half - 1])] with
 *   a[r, h] = sum_k inputs[r, k] * scaled_weights_t[k, h]   (k = 0, 1, ... in this order),
 * inputs an (n_rows x n_inputs) array and scaled_weights_t the (n_inputs x half) transpose of
 * gamma * W, half even. Refit j trains on the `window` rows starts[j] .. starts[j] + window - 1
 * and predicts the served[j] rows that follow. With w_p = (window - 1) / sum_s (f_sp - mean_p)^2
 * over the training rows (0 when that sum is 0):
 *   grams[j, a, b]   = sum_p w_p f[start + a, p] f[start + b, p]              (window x window)
 *   kernels[j, c, b] = sum_p w_p f[start + window + c, p] f[start + b, p]     (max_served x window)
 * Rows c >= served[j] of kernels[j] are set to 0. Refits must come in increasing order of start,
 * and every row read must exist (start + window + served[j] <= n_rows: checked by the caller).
 * Features are computed once per row read, never stored whole. Returns 0, or -1 if the workspace
 * could not be allocated. */
int rf_grams(const double *inputs, long n_inputs, const double *scaled_weights_t, long half, const ptrdiff_t *starts,
             const ptrdiff_t *served, long n_refits, long window, long max_served, double *grams, double *kernels);

#endif
