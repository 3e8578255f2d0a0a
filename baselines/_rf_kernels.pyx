# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Python bindings of the compiled random Fourier features kernels (``rf_kernels.c``).

Thin wrappers: the arrays are checked for dtype, layout and shape here (a wrong one raises
``ValueError``), the work runs in C without the GIL. The conventions are those of
:mod:`planted.baselines.rf_ridge`, which is the interface to use.
"""

cdef extern from "rf_kernels.h":
    void rf_sincos(const double *angles, long n, double *out_cos, double *out_sin) nogil
    int rf_grams(const double *inputs, long n_inputs, const double *scaled_weights_t, long half,
                 const Py_ssize_t *starts, const Py_ssize_t *served, long n_refits, long window, long max_served,
                 double *grams, double *kernels) nogil

def sincos(const double[::1] angles, double[::1] out_cos, double[::1] out_sin):
    """Write cos and sin of ``angles`` (1-D float64) into ``out_cos`` and ``out_sin``."""
    if out_cos.shape[0] != angles.shape[0] or out_sin.shape[0] != angles.shape[0]:
        raise ValueError("out_cos and out_sin must have the length of angles")
    with nogil:
        rf_sincos(&angles[0] if angles.shape[0] else NULL, angles.shape[0],
                  &out_cos[0] if angles.shape[0] else NULL, &out_sin[0] if angles.shape[0] else NULL)


def grams(const double[:, ::1] inputs, const double[:, ::1] scaled_weights_t, const Py_ssize_t[::1] starts,
          const Py_ssize_t[::1] served, double[:, :, ::1] grams, double[:, :, ::1] kernels):
    """Gram matrices and kernel rows of the scaled random Fourier features of each refit.

    ``inputs`` (n_rows, K) are the standardised inputs, one row a month; ``scaled_weights_t`` is
    gamma * W transposed, shape (K, half), half even. ``grams`` has shape (n_refits, window,
    window) and ``kernels`` (n_refits, max_served, window); refit j trains on rows ``starts[j] ..
    starts[j] + window - 1`` and predicts the ``served[j]`` rows after them (definitions in
    ``rf_kernels.h``).
    """
    cdef long n_rows = inputs.shape[0], n_inputs = inputs.shape[1], half = scaled_weights_t.shape[1]
    cdef long n_refits = starts.shape[0], window = grams.shape[1], max_served = kernels.shape[1], j
    if scaled_weights_t.shape[0] != n_inputs or n_inputs < 1:
        raise ValueError("scaled_weights_t must have shape (K, half) with K = inputs.shape[1] >= 1")
    if half < 2 or half % 2:
        raise ValueError(f"the number of frequencies must be even and positive, got {half}")
    if window < 2 or grams.shape[2] != window or kernels.shape[2] != window:
        raise ValueError("grams must be (n_refits, window, window) and kernels (n_refits, max_served, window)")
    if served.shape[0] != n_refits or grams.shape[0] != n_refits or kernels.shape[0] != n_refits:
        raise ValueError("starts, served, grams and kernels must have one entry per refit")
    for j in range(n_refits):
        if starts[j] < 0 or (j > 0 and starts[j] <= starts[j - 1]):
            raise ValueError("starts must be non-negative and increasing")
        if served[j] < 0 or served[j] > max_served or starts[j] + window + served[j] > n_rows:
            raise ValueError(f"refit {j} reads rows outside the inputs or serves too many rows")
    if n_refits == 0:
        return
    cdef int status
    with nogil:
        status = rf_grams(&inputs[0, 0], n_inputs, &scaled_weights_t[0, 0], half, &starts[0], &served[0],
                          n_refits, window, max_served, &grams[0, 0, 0], &kernels[0, 0, 0] if max_served else NULL)
    if status != 0:
        raise MemoryError("rf_grams could not allocate its workspace")
