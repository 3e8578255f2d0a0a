/* Compiled lasso solver; the contract is in lasso_kernels.h.
 *
 * Every sum runs over its index in increasing order, in IEEE-754 double precision without fused
 * multiply-adds (-ffp-contract=off), so a problem's solution does not depend on the machine or on
 * the other problems of the batch.
 */
#include "lasso_kernels.h"

#include <math.h>
#include <string.h>

/* gradient = c - G w */
static void residual_gradient(const double *gram, const double *xy, const double *coef, long k, double *gradient) {
    for (long i = 0; i < k; i++) {
        double s = 0.0;
        for (long l = 0; l < k; l++) s += gram[i * k + l] * coef[l];
        gradient[i] = xy[i] - s;
    }
}

static double soft_threshold(double z, double penalty) {
    const double magnitude = fabs(z) - penalty;
    return magnitude > 0.0 ? copysign(magnitude, z) : 0.0;
}

/* `sweeps` cyclic coordinate-descent sweeps on coef, the gradient kept up to date. */
static void cd_sweeps(const double *gram, const double *xy, double penalty, const double *inverse, double *coef,
                      long k, long sweeps, double *gradient) {
    residual_gradient(gram, xy, coef, k, gradient);
    for (long sweep = 0; sweep < sweeps; sweep++) {
        for (long j = 0; j < k; j++) {
            const double old = coef[j], diagonal = gram[j * k + j];
            const double updated = soft_threshold(gradient[j] + diagonal * old, penalty) * inverse[j];
            if (updated == old) continue;
            const double step = updated - old;
            for (long i = 0; i < k; i++) gradient[i] -= step * gram[i * k + j];
            coef[j] = updated;
        }
    }
}

/* Solve the n x n system a x = b in place (b becomes x) by Gaussian elimination with partial
 * pivoting (the first row of largest |pivot|). Returns 0, or -1 on an exactly zero pivot. */
static int solve_in_place(double *a, double *b, long n) {
    for (long col = 0; col < n; col++) {
        long pivot = col;
        for (long r = col + 1; r < n; r++)
            if (fabs(a[r * n + col]) > fabs(a[pivot * n + col])) pivot = r;
        if (a[pivot * n + col] == 0.0) return -1;
        if (pivot != col) {
            for (long c = 0; c < n; c++) {
                const double tmp = a[col * n + c];
                a[col * n + c] = a[pivot * n + c];
                a[pivot * n + c] = tmp;
            }
            const double tmp = b[col];
            b[col] = b[pivot];
            b[pivot] = tmp;
        }
        for (long r = col + 1; r < n; r++) {
            const double factor = a[r * n + col] / a[col * n + col];
            for (long c = col + 1; c < n; c++) a[r * n + c] -= factor * a[col * n + c];
            b[r] -= factor * b[col];
        }
    }
    for (long r = n - 1; r >= 0; r--) {
        double s = b[r];
        for (long c = r + 1; c < n; c++) s -= a[r * n + c] * b[c];
        b[r] = s / a[r * n + r];
    }
    return 0;
}

/* The exact solution on the iterate's active set and signs, written to `solution`; returns whether
 * it satisfies the Karush-Kuhn-Tucker conditions. */
static int polish(const double *gram, const double *xy, double penalty, double kkt_slack, const double *coef, long k,
                  double *solution, double *gradient) {
    long active[LASSO_MAX_FEATURES], n_active = 0;
    double system[LASSO_MAX_FEATURES * LASSO_MAX_FEATURES], rhs[LASSO_MAX_FEATURES];
    for (long j = 0; j < k; j++)
        if (coef[j] != 0.0) active[n_active++] = j;
    for (long a = 0; a < n_active; a++) {
        for (long b = 0; b < n_active; b++) system[a * n_active + b] = gram[active[a] * k + active[b]];
        rhs[a] = xy[active[a]] - penalty * copysign(1.0, coef[active[a]]);
    }
    if (solve_in_place(system, rhs, n_active) != 0) return 0;
    memset(solution, 0, k * sizeof *solution);
    for (long a = 0; a < n_active; a++) solution[active[a]] = rhs[a];
    residual_gradient(gram, xy, solution, k, gradient);
    for (long j = 0, a = 0; j < k; j++) {
        if (a < n_active && active[a] == j) {
            if (!(solution[j] * copysign(1.0, coef[j]) > 0.0)) return 0;
            a++;
        } else if (!(fabs(gradient[j]) <= penalty * (1.0 + kkt_slack))) {
            return 0;
        }
    }
    return 1;
}

long lasso_gram_solve(const double *gram, const double *xy, const double *penalty, double *coef, long n_problems,
                      long n_features, long max_rounds, double kkt_slack) {
    if (n_features > LASSO_MAX_FEATURES) return -1;
    const long k = n_features;
    double inverse[LASSO_MAX_FEATURES], gradient[LASSO_MAX_FEATURES], solution[LASSO_MAX_FEATURES];
    long unsolved = 0;
    for (long b = 0; b < n_problems; b++) {
        const double *g = gram + b * k * k, *c = xy + b * k;
        double *w = coef + b * k;
        for (long j = 0; j < k; j++) inverse[j] = g[j * k + j] > 0.0 ? 1.0 / g[j * k + j] : 0.0;
        int solved = 0;
        for (long round = 0; round < max_rounds && !solved; round++) {
            cd_sweeps(g, c, penalty[b], inverse, w, k, round + 2 < 20 ? round + 2 : 20, gradient);
            solved = polish(g, c, penalty[b], kkt_slack, w, k, solution, gradient);
        }
        if (solved) memcpy(w, solution, k * sizeof *w);
        else unsolved++;
    }
    return unsolved;
}
