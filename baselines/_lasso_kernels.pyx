# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Python binding of the compiled lasso solver (``lasso_kernels.c``).

A thin wrapper: the arrays are checked for dtype, layout and shape here (a wrong one raises
``ValueError``), the work runs in C without the GIL. The interface to use is
:func:`planted.baselines.lasso.lasso_gram`.
"""

cdef extern from "lasso_kernels.h":
    enum: LASSO_MAX_FEATURES
    long lasso_gram_solve(const double *gram, const double *xy, const double *penalty, double *coef,
                          long n_problems, long n_features, long max_rounds, double kkt_slack) nogil


def gram_solve(const double[:, :, ::1] gram, const double[:, ::1] xy, const double[::1] penalty, double[:, ::1] coef,
               long max_rounds, double kkt_slack):
    """Solve the lasso problems ``(gram[b], xy[b], penalty[b])`` in place in ``coef`` (the start on entry).

    Returns the number of problems not solved within ``max_rounds`` rounds (see ``lasso_kernels.h``).
    """
    cdef long n_problems = xy.shape[0], n_features = xy.shape[1], unsolved
    if gram.shape[0] != n_problems or gram.shape[1] != n_features or gram.shape[2] != n_features:
        raise ValueError("gram must have shape (B, K, K) with (B, K) the shape of xy")
    if penalty.shape[0] != n_problems or coef.shape[0] != n_problems or coef.shape[1] != n_features:
        raise ValueError("penalty must have shape (B,) and coef (B, K)")
    if n_features > LASSO_MAX_FEATURES:
        raise ValueError(f"at most {LASSO_MAX_FEATURES} predictors, got {n_features}")
    if n_problems == 0 or n_features == 0:
        return 0
    with nogil:
        unsolved = lasso_gram_solve(&gram[0, 0, 0], &xy[0, 0], &penalty[0], &coef[0, 0], n_problems, n_features,
                                    max_rounds, kkt_slack)
    return unsolved
