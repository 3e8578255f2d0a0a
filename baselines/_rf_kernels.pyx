# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Python bindings of the compiled random Fourier features kernels (``rf_kernels.c``).

Thin wrappers: the arrays are checked for dtype, layout and shape here (a wrong one raises
``ValueError``), the work runs in C without the GIL. The conventions are those of
:mod:`planted.baselines.rf_ridge`, which is the interface to use.
"""

cdef extern from "rf_kernels.h":
    enum: RF_BLOCK
    void rf_sincos(const double *angles, long n, double *out_cos, double *out_sin) nogil
    void rf_features(const double *inputs, long n_rows, long n_inputs, const double *scaled_weights_t, long half,
                     double *features) nogil
    int rf_grams(const double *features, long n_rows, long n_features, const Py_ssize_t *starts,
                 const Py_ssize_t *served, long n_refits, long window, long max_served, double *grams,
                 double *kernels) nogil

BLOCK = RF_BLOCK
"""Features per block of the feature layout (see :func:`features`)."""


def sincos(const double[::1] angles, double[::1] out_cos, double[::1] out_sin):
    """Write cos and sin of ``angles`` (1-D float64) into ``out_cos`` and ``out_sin``."""
    if out_cos.shape[0] != angles.shape[0] or out_sin.shape[0] != angles.shape[0]:
        raise ValueError("out_cos and out_sin must have the length of angles")
    with nogil:
        rf_sincos(&angles[0] if angles.shape[0] else NULL, angles.shape[0],
                  &out_cos[0] if angles.shape[0] else NULL, &out_sin[0] if angles.shape[0] else NULL)


def features(const double[:, ::1] inputs, const double[:, ::1] scaled_weights_t, double[:, :, ::1] out):
    """Random Fourier features of the rows of ``inputs`` (n_rows, K) in the block layout ``out``.

    ``scaled_weights_t`` is gamma * W transposed, shape (K, half), half even; ``out`` has shape
    (ceil(2 half / BLOCK), n_rows, BLOCK).
    """
    cdef long n_rows = inputs.shape[0], n_inputs = inputs.shape[1], half = scaled_weights_t.shape[1]
    if scaled_weights_t.shape[0] != n_inputs or n_inputs < 1:
        raise ValueError("scaled_weights_t must have shape (K, half) with K = inputs.shape[1] >= 1")
    if half < 2 or half % 2:
        raise ValueError(f"the number of frequencies must be even and positive, got {half}")
    if out.shape[0] != (2 * half + RF_BLOCK - 1) // RF_BLOCK or out.shape[1] != n_rows or out.shape[2] != RF_BLOCK:
        raise ValueError("out must have shape (ceil(2 half / BLOCK), n_rows, BLOCK)")
    if n_rows == 0:
        return
    with nogil:
        rf_features(&inputs[0, 0], n_rows, n_inputs, &scaled_weights_t[0, 0], half, &out[0, 0, 0])


def grams(const double[:, :, ::1] features, long n_features, const Py_ssize_t[::1] starts,
          const Py_ssize_t[::1] served, double[:, :, ::1] grams, double[:, :, ::1] kernels):
    """Gram matrices and kernel rows of the scaled features of each refit (see ``rf_kernels.h``).

    ``grams`` has shape (n_refits, window, window) and ``kernels`` (n_refits, max_served, window);
    refit j trains on rows ``starts[j] .. starts[j] + window - 1`` and predicts the ``served[j]``
    rows after them.
    """
    cdef long n_blocks = features.shape[0], n_rows = features.shape[1], n_refits = starts.shape[0]
    cdef long window = grams.shape[1], max_served = kernels.shape[1], j
    if features.shape[2] != RF_BLOCK or n_blocks != (n_features + RF_BLOCK - 1) // RF_BLOCK or n_features % 4:
        raise ValueError("features must be in the block layout of features(), n_features a multiple of 4")
    if window < 2 or grams.shape[2] != window or kernels.shape[2] != window:
        raise ValueError("grams must be (n_refits, window, window) and kernels (n_refits, max_served, window)")
    if served.shape[0] != n_refits or grams.shape[0] != n_refits or kernels.shape[0] != n_refits:
        raise ValueError("starts, served, grams and kernels must have one entry per refit")
    for j in range(n_refits):
        if starts[j] < 0 or (j > 0 and starts[j] <= starts[j - 1]):
            raise ValueError("starts must be non-negative and increasing")
        if served[j] < 0 or served[j] > max_served or starts[j] + window + served[j] > n_rows:
            raise ValueError(f"refit {j} reads rows outside the features or serves too many rows")
    if n_refits == 0:
        return
    cdef int status
    with nogil:
        status = rf_grams(&features[0, 0, 0], n_rows, n_features, &starts[0], &served[0], n_refits, window,
                          max_served, &grams[0, 0, 0], &kernels[0, 0, 0] if max_served else NULL)
    if status != 0:
        raise MemoryError("rf_grams could not allocate its workspace")
