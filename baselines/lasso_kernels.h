/* Compiled lasso solver of the cross-validated lasso baseline (planted.baselines.lasso).
 *
 * Pure loops over caller-owned, C-contiguous float64 buffers, compiled without floating-point
 * contraction (-ffp-contract=off) and with a fixed order of every sum, so the results do not depend
 * on the machine.
 */
#ifndef PLANTED_LASSO_KERNELS_H
#define PLANTED_LASSO_KERNELS_H

/* Largest number of predictors a problem may have (the workspace lives on the stack). */
#define LASSO_MAX_FEATURES 64

/* Exact solutions of n_problems lasso problems in covariance (Gram) form,
 *   minimise 0.5 w' G w - c' w + penalty * ||w||_1,
 * with G = gram[b] (n_features x n_features, positive semi-definite), c = xy[b] and penalty[b] > 0.
 * coef[b] holds the starting point on entry and the solution on return.
 *
 * Method (Friedman, Hastie and Tibshirani 2010, covariance updates): rounds of cyclic coordinate
 * descent sweeps (2 in the first round, one more each round, at most 20), each round followed by a
 * polish: with the active set A and signs s of the iterate, solve G_AA w_A = c_A - penalty s_A by
 * Gaussian elimination with partial pivoting, and accept it if it satisfies the Karush-Kuhn-Tucker
 * conditions: sign(w_A) = s_A, and |c_j - G_j w| <= penalty (1 + kkt_slack) off A. A singular
 * system (an exactly zero pivot) is not accepted; the sweeps go on. A column with G_jj = 0 gets
 * coefficient 0.
 *
 * Returns the number of problems not solved within max_rounds rounds (their coef holds the last
 * iterate), or -1 if n_features exceeds LASSO_MAX_FEATURES. */
long lasso_gram_solve(const double *gram, const double *xy, const double *penalty, double *coef, long n_problems,
                      long n_features, long max_rounds, double kkt_slack);

#endif
