"""The C text a translation unit starts with: the helpers every kernel may call, written once for C and
CUDA (which differ only in their headers and in how a helper function is declared), and the dense
contraction routines of C kernels (``tl_gemm`` and ``tl_gemv``: BLAS where the run time hands it over,
tiled loops otherwise)."""
from __future__ import annotations

from .build import VECTOR_MATH_DECLS

__all__ = ["c_prelude", "cuda_prelude", "BLAS_HELPERS"]

_C_HEADERS = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
typedef %s real;
"""

_CUDA_HEADERS = r"""
#ifdef __CUDACC_RTC__
typedef long long int64_t;
typedef int int32_t;
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
#else
#include <cstdint>
#endif
"""

_MIN_MAX = r"""#define tl_min(a, b) ((a) < (b) ? (a) : (b))
#define tl_max(a, b) ((a) > (b) ? (a) : (b))
"""

# max, min and sign in black boxes (relu, max, min, abs' derivative) and maxima: NaN in, NaN out, as in NumPy;
# of two zeros the first, as C's fmax gives it; written as one comparison and a select, which compilers
# vectorise (C's fmax they do not, without -ffast-math)
_NAN_MIN_MAX = r"""%s double tl_fmax(double a, double b) { return (a >= b || a != a) ? a : b; }
%s double tl_fmin(double a, double b) { return (a <= b || a != a) ? a : b; }
%s double tl_sign(double a) { return a != a ? a : (double)((a > 0) - (a < 0)); }
"""

# the bytes a temporary takes in a C kernel's workspace: 64-byte aligned, one element more than it holds
_WORKSPACE = r"""#define TL_WS_BYTES(n) (((size_t)((n) + 1) * sizeof(real) + 63) & ~(size_t)63)
"""

_FLOORD = r"""%s int64_t tl_floord(int64_t a, int64_t b) {
  int64_t q = a / b; return (a %% b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
"""

# membership of (r, c) in a CSR relation: a binary search in row r
_CSR_HAS = r"""%s int tl_csr_has(const int32_t *ptr, const int32_t *idx, int64_t r, int64_t c) {
  int64_t lo = ptr[r], hi = ptr[r + 1];
  while (lo < hi) { int64_t mid = (lo + hi) >> 1; if (idx[mid] < c) lo = mid + 1; else hi = mid; }
  return lo < ptr[r + 1] && idx[lo] == c;
}
"""


def c_prelude(real: str) -> str:
    """The helpers of a C translation unit whose scalars are ``real``."""
    qual = "static inline"
    return (_C_HEADERS % real + _MIN_MAX + _NAN_MIN_MAX % (qual, qual, qual) + _WORKSPACE + _FLOORD % qual
            + VECTOR_MATH_DECLS.lstrip("\n") + _CSR_HAS % qual)


def cuda_prelude(real: str) -> str:
    """The helpers of a CUDA translation unit whose scalars are ``real``."""
    qual = "__device__ static inline"
    return (_CUDA_HEADERS + _MIN_MAX + _NAN_MIN_MAX % (qual, qual, qual) + _FLOORD % qual + _CSR_HAS % qual
            + f"typedef {real} real;\n")


BLAS_HELPERS = r"""
/* dense contractions (codegen.contract): the BLAS routine handed over by the run time in tl_blas
   ({gemm, gemv, ilp64 flag}: NumPy's own OpenBLAS or SciPy's), otherwise tiled loops (i-k-j). */
typedef void (*tl_gemm64_t)(const char *, const char *, const int64_t *, const int64_t *, const int64_t *,
  const real *, const real *, const int64_t *, const real *, const int64_t *, const real *, real *, const int64_t *);
typedef void (*tl_gemm32_t)(const char *, const char *, const int32_t *, const int32_t *, const int32_t *,
  const real *, const real *, const int32_t *, const real *, const int32_t *, const real *, real *, const int32_t *);
typedef void (*tl_gemv64_t)(const char *, const int64_t *, const int64_t *, const real *, const real *,
  const int64_t *, const real *, const int64_t *, const real *, real *, const int64_t *);
typedef void (*tl_gemv32_t)(const char *, const int32_t *, const int32_t *, const real *, const real *,
  const int32_t *, const real *, const int32_t *, const real *, real *, const int32_t *);
#define TL_I32(v) ((v) <= 2147483647LL)
/* for (...) { ... } on several threads where the condition holds, else a serial copy that enters no OpenMP
   runtime (as the loop IR's serial copies of the generated loops) */
#define TL_PARALLEL_FOR(work, ...) \
  if (work) { _Pragma("omp parallel for schedule(static)") for __VA_ARGS__ } else { for __VA_ARGS__ }
/* C[i*ldc + j] = alpha * sum_k X(i, k) Y(k, j) for i < M, j < N;
   X(i, k) = xt ? X[k*ldx + i] : X[i*ldx + k];  Y(k, j) = yt ? Y[j*ldy + k] : Y[k*ldy + j]. */
static void tl_gemm(void *const *blas, int64_t M, int64_t N, int64_t K, real alpha,
                    const real *restrict X, int xt, int64_t ldx, const real *restrict Y, int yt, int64_t ldy,
                    real *restrict C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) { for (int64_t i = 0; i < M; i++) for (int64_t j = 0; j < N; j++) C[i * ldc + j] = 0; return; }
  ldx = tl_max(ldx, 1); ldy = tl_max(ldy, 1); ldc = tl_max(ldc, 1);
  if (blas && blas[0]) {
    /* row-major C is column-major C^T = op(Y)^T op(X)^T */
    const char ta = yt ? 'T' : 'N', tb = xt ? 'T' : 'N';
    const real beta = 0;
    if (blas[2]) {
      ((tl_gemm64_t)blas[0])(&ta, &tb, &N, &M, &K, &alpha, Y, &ldy, X, &ldx, &beta, C, &ldc);
      return;
    }
    if (TL_I32(M) && TL_I32(N) && TL_I32(K) && TL_I32(ldx) && TL_I32(ldy) && TL_I32(ldc)) {
      const int32_t m = (int32_t)N, n = (int32_t)M, k = (int32_t)K;
      const int32_t a = (int32_t)ldy, b = (int32_t)ldx, c = (int32_t)ldc;
      ((tl_gemm32_t)blas[0])(&ta, &tb, &m, &n, &k, &alpha, Y, &a, X, &b, &beta, C, &c);
      return;
    }
  }
  real *yt_buf = NULL;
  if (yt) {  /* Y stored as Y[j][k]: transpose it once so the inner loop is contiguous */
    yt_buf = (real *)malloc(sizeof(real) * (size_t)(K * N));
    for (int64_t j = 0; j < N; j++) for (int64_t k = 0; k < K; k++) yt_buf[k * N + j] = Y[j * ldy + k];
    Y = yt_buf; ldy = N;
  }
  TL_PARALLEL_FOR((double)M * (double)N * (double)K >= 2097152.0, (int64_t i0 = 0; i0 < M; i0 += 16) {
    const int64_t i1 = tl_min(i0 + 16, M);
    for (int64_t i = i0; i < i1; i++) for (int64_t j = 0; j < N; j++) C[i * ldc + j] = 0;
    for (int64_t j0 = 0; j0 < N; j0 += 512) {
      const int64_t j1 = tl_min(j0 + 512, N);
      for (int64_t k0 = 0; k0 < K; k0 += 128) {
        const int64_t k1 = tl_min(k0 + 128, K);
        for (int64_t i = i0; i < i1; i++) {
          real *restrict c = C + i * ldc;
          for (int64_t k = k0; k < k1; k++) {
            const real a = xt ? X[k * ldx + i] : X[i * ldx + k];
            const real *restrict y = Y + k * ldy;
            for (int64_t j = j0; j < j1; j++) c[j] += a * y[j];
          }
        }
      }
    }
    if (alpha != 1) for (int64_t i = i0; i < i1; i++) for (int64_t j = 0; j < N; j++) C[i * ldc + j] *= alpha;
  })
  free(yt_buf);
}
/* y[i] = alpha * sum_k X(i, k) v[k] for i < M;  X(i, k) = xt ? X[k*ldx + i] : X[i*ldx + k]. */
static void tl_gemv(void *const *blas, int64_t M, int64_t K, real alpha, const real *restrict X, int xt,
                    int64_t ldx, const real *restrict v, real *restrict y) {
  if (M <= 0) return;
  if (K <= 0) { for (int64_t i = 0; i < M; i++) y[i] = 0; return; }
  ldx = tl_max(ldx, 1);
  if (blas && blas[1]) {
    /* row-major X[i][k] is column-major K x M: y = op^T; X[k][i] is column-major M x K: y = op */
    const char t = xt ? 'N' : 'T';
    const real beta = 0;
    if (blas[2]) {
      const int64_t m = xt ? M : K, n = xt ? K : M, one = 1;
      ((tl_gemv64_t)blas[1])(&t, &m, &n, &alpha, X, &ldx, v, &one, &beta, y, &one);
      return;
    }
    if (TL_I32(M) && TL_I32(K) && TL_I32(ldx)) {
      const int32_t m = (int32_t)(xt ? M : K), n = (int32_t)(xt ? K : M), lda = (int32_t)ldx, one = 1;
      ((tl_gemv32_t)blas[1])(&t, &m, &n, &alpha, X, &lda, v, &one, &beta, y, &one);
      return;
    }
  }
  if (!xt) {
    TL_PARALLEL_FOR((double)M * (double)K >= 2097152.0, (int64_t i = 0; i < M; i++) {
      real acc = 0;
      for (int64_t k = 0; k < K; k++) acc += X[i * ldx + k] * v[k];
      y[i] = alpha * acc;
    })
    return;
  }
  TL_PARALLEL_FOR((double)M * (double)K >= 2097152.0, (int64_t i0 = 0; i0 < M; i0 += 1024) {
    const int64_t i1 = tl_min(i0 + 1024, M);
    for (int64_t i = i0; i < i1; i++) y[i] = 0;
    for (int64_t k = 0; k < K; k++) {
      const real a = v[k];
      const real *restrict x = X + k * ldx;
      for (int64_t i = i0; i < i1; i++) y[i] += x[i] * a;
    }
    if (alpha != 1) for (int64_t i = i0; i < i1; i++) y[i] *= alpha;
  })
}
"""
