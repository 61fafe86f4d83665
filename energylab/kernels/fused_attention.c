/* Fused attention kernels: the tile loops of energylab/kernels/attention.py in C (issue 55).
 *
 * Not compiled on its own: energylab/kernels/fused_attention.py prepends, per dtype, `typedef float real;` (or
 * double), the BLAS gemm type and the exponential exp2_any of energylab/kernels/sphere_symmetric.py, then compiles
 * it with the system's C compiler. The matrix products are the BLAS gemm that PyTorch itself calls (MKL's sgemm_ /
 * dgemm_ in libtorch_cpu, passed in as a function pointer); what C adds over the Python loop is that each tile's
 * elementwise work is one pass (or two) over the score tile while it sits in the cache, and that no Python runs
 * per tile. The derivations of the backward passes are in the docstrings of attention.py; the steps below follow
 * them line by line.
 *
 * Layout: every (B, H, N, d_h) tensor is passed as a pointer and three strides in elements (batch, head, row);
 * its last dimension is contiguous. Gradients and outputs the kernels allocate are contiguous (B, H, N, d_h), except
 * the symmetric forms' output and input gradient, written through strides of their own (the layout of the input:
 * heads of a (B, N, d) projection then merge back with no copy). A score tile holds `rows` query rows against all
 * N keys (the causal kernel: only the keys a row can see). */
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef void (*gemm_fn)(const char*, const char*, const int*, const int*, const int*, const real*, const real*,
                        const int*, const real*, const int*, const real*, real*, const int*);
typedef int (*threads_fn)(int);
#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* row-major C (m, n) = alpha op(A) op(B) + beta C through the column-major BLAS: Cᵀ = op(B)ᵀ op(A)ᵀ */
static void mm(gemm_fn gemm, int ta, int tb, int m, int n, int k, real alpha, const real* a, long lda,
               const real* b, long ldb, real beta, real* c, long ldc) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {  /* an empty sum: BLAS may leave C untouched when beta is 0 */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) c[i * ldc + j] = beta == 0 ? 0 : beta * c[i * ldc + j];
        return;
    }
    char cb = tb ? 'T' : 'N', ca = ta ? 'T' : 'N';
    int ia = (int)lda, ib = (int)ldb, ic = (int)ldc;
    gemm(&cb, &ca, &n, &m, &k, &alpha, b, &ib, a, &ia, &beta, c, &ic);
}

#define AT(p, s, bb, hh) ((p) + (long)(bb) * (s)[0] + (long)(hh) * (s)[1])
static const real LOG2E = (real)1.4426950408889634;

/* ----------------------------------------------------------------------------- expressive attention (paper 001)
 * y_m = Σ_k w_mk v_k / N_m, w = s²/(1+s²), s = scale q kᵀ; a masked (causal) score is 0. Writes y and N (B, H, N). */
void expressive_forward(gemm_fn gemm, int B, int H, int N, int dh, int causal, real scale, int rows,
                        const real* q, const long* sq, const real* k, const long* sk, const real* v, const long* sv,
                        real* y, real* norm, real tiny, real* work) {
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const real *Q = AT(q, sq, b, h), *K = AT(k, sk, b, h), *V = AT(v, sv, b, h);
            real *Y = y + ((long)b * H + h) * N * dh, *nrm = norm + ((long)b * H + h) * N;
            for (int r0 = 0; r0 < N; r0 += rows) {
                int R = MIN(rows, N - r0), n = causal ? MIN(N, r0 + R) : N;
                real* S = work;
                mm(gemm, 0, 1, R, n, dh, scale, Q + r0 * sq[2], sq[2], K, sk[2], 0, S, n);
                for (int i = 0; i < R; i++) {
                    real* s = S + (long)i * n;
                    int lim = causal ? r0 + i + 1 : n;
                    real acc = 0;
#pragma omp simd reduction(+ : acc)
                    for (int j = 0; j < n; j++) {
                        real x2 = s[j] * s[j], w = j < lim ? x2 / (1 + x2) : 0;
                        s[j] = w;
                        acc += w;
                    }
                    nrm[r0 + i] = acc;
                }
                mm(gemm, 0, 0, R, dh, n, 1, S, n, V, sv[2], 0, Y + (long)r0 * dh, dh);
                for (int i = 0; i < R; i++) {  /* a row of zero scores returns zeros (0 / tiny) */
                    real z = nrm[r0 + i] > tiny ? nrm[r0 + i] : tiny;
                    for (int c = 0; c < dh; c++) Y[(long)(r0 + i) * dh + c] /= z;
                }
            }
        }
}

/* Backward, with r = 1/(1+s²), w = s² r, dw/ds = 2 s r², g = ∂L/∂y / N (0 on a zero row):
 * ∂L/∂v += wᵀ g, ∂L/∂s = 2 s r² (g vᵀ − g·y), ∂L/∂q = scale ∂L/∂s k, ∂L/∂k += scale ∂L/∂sᵀ q. */
void expressive_backward(gemm_fn gemm, int B, int H, int N, int dh, int causal, real scale, int rows,
                         const real* q, const long* sq, const real* k, const long* sk, const real* v, const long* sv,
                         const real* y, const real* norm, const real* gy, const long* sg, real tiny,
                         real* dq, real* dk, real* dv, real* work) {
    real *S = work, *W = work + (long)rows * N, *G = W + (long)rows * N, *gdot = G + (long)rows * dh;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const real *Q = AT(q, sq, b, h), *K = AT(k, sk, b, h), *V = AT(v, sv, b, h), *GY = AT(gy, sg, b, h);
            long o = ((long)b * H + h) * N * dh;
            const real *Y = y + o, *nrm = norm + ((long)b * H + h) * N;
            real *dQ = dq + o, *dK = dk + o, *dV = dv + o;
            memset(dK, 0, sizeof(real) * N * dh);
            memset(dV, 0, sizeof(real) * N * dh);
            for (int r0 = 0; r0 < N; r0 += rows) {
                int R = MIN(rows, N - r0), n = causal ? MIN(N, r0 + R) : N;
                for (int i = 0; i < R; i++) {  /* g = ∂L/∂y / N and −2 g·y, per row */
                    real z = nrm[r0 + i], dot = 0;
                    for (int c = 0; c < dh; c++) {
                        real g = z > tiny ? GY[(long)(r0 + i) * sg[2] + c] / z : 0;
                        G[i * dh + c] = g;
                        dot += g * Y[(long)(r0 + i) * dh + c];
                    }
                    gdot[i] = -2 * dot;
                }
                mm(gemm, 0, 1, R, n, dh, scale, Q + r0 * sq[2], sq[2], K, sk[2], 0, S, n);
                for (int i = 0; i < R; i++) {  /* W = s² r, and S becomes s r² */
                    real *s = S + (long)i * n, *w = W + (long)i * n;
                    int lim = causal ? r0 + i + 1 : n;
#pragma omp simd
                    for (int j = 0; j < n; j++) {
                        real x = j < lim ? s[j] : 0, r = 1 / (1 + x * x), xr = x * r;
                        w[j] = x * xr;
                        s[j] = xr * r;
                    }
                }
                mm(gemm, 1, 0, n, dh, R, 1, W, n, G, dh, 1, dV, dh);  /* ∂L/∂v += wᵀ g */
                mm(gemm, 0, 1, R, n, dh, 2, G, dh, V, sv[2], 0, W, n);  /* 2 g vᵀ */
                for (int i = 0; i < R; i++) {  /* ∂L/∂s = (2 g vᵀ − 2 g·y) s r² */
                    real *s = S + (long)i * n, *w = W + (long)i * n, d = gdot[i];
#pragma omp simd
                    for (int j = 0; j < n; j++) w[j] = (w[j] + d) * s[j];
                }
                mm(gemm, 0, 0, R, dh, n, scale, W, n, K, sk[2], 0, dQ + (long)r0 * dh, dh);
                mm(gemm, 1, 0, n, dh, R, scale, W, n, Q + r0 * sq[2], sq[2], 1, dK, dh);
            }
        }
}

/* ----------------------------------------------------------------------------- Hyper-SET's symmetric forms (004)
 * Both take their input rows either as they are or RMS-normalised inside the kernel (rms = 1: Hyper-SET normalises
 * each head's projection before its attention). zn_i = r_i z_i, r_i = (mean_c z_ic² + ε)^(−1/2); backward
 * ∂L/∂z_i = r_i (∂L/∂zn_i − zn_i mean_c(∂L/∂zn_i ⊙ zn_i)). Two passes over a head that is in the cache, where
 * ATen's RMSNorm and its backward had made about fourteen over the whole (B, N, H, d_h) tensor (with the copies
 * between the two layouts, 8% of a Hyper-SET iteration at the 4x4 Sudoku size). The forward writes zn and r
 * (saved for the backward, which gets zn as its z). */
static const real* rms_rows(int N, int dh, real eps, const real* Z, long lz, real* Zn, real* r) {
    for (int i = 0; i < N; i++) {
        const real* z = Z + (long)i * lz;
        real ss = 0;
#pragma omp simd reduction(+ : ss)
        for (int c = 0; c < dh; c++) ss += z[c] * z[c];
        real ri = (real)(1 / sqrt((double)(ss / dh + eps)));
        r[i] = ri;
#pragma omp simd
        for (int c = 0; c < dh; c++) Zn[(long)i * dh + c] = z[c] * ri;
    }
    return Zn;
}

/* The input gradient of one head from ∂L/∂zn (contiguous, N x dh) into dz (row stride ld): through the RMS
 * normalisation (r not NULL; Zn with row stride lz), or copied. */
static void rows_out(int N, int dh, const real* G, const real* Zn, long lz, const real* r, real* dz, long ld) {
    for (int i = 0; i < N; i++) {
        const real *g = G + (long)i * dh, *zn = Zn + (long)i * lz;
        real* o = dz + (long)i * ld;
        if (!r) {
            memcpy(o, g, sizeof(real) * dh);
            continue;
        }
        real m = 0;
#pragma omp simd reduction(+ : m)
        for (int c = 0; c < dh; c++) m += g[c] * zn[c];
        m /= dh;
#pragma omp simd
        for (int c = 0; c < dh; c++) o[c] = r[i] * (g[c] - zn[c] * m);
    }
}

/* Sigmoid: Y = σ'(β Z Zᵀ) Z, σ' = σ(1 − σ). Backward (F = σ'(S) symmetric, G = ∂L/∂Y): ∂L/∂Z = F G + β (D + Dᵀ) Z
 * with D = σ''(S) ⊙ (G Zᵀ), σ'' = σ'(1 − 2σ); every term is accumulated into one ∂L/∂Z. */
static inline real sigmoid(real s) { return 1 / (1 + exp2_any(-s * LOG2E)); }

void sigmoid_forward(gemm_fn gemm, int B, int H, int N, int dh, real beta, int rows, const real* z, const long* sz,
                     int rms, real eps, real* zn, real* rinv, real* y, const long* sy, real* work) {
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const real* Z = AT(z, sz, b, h);
            long lz = sz[2], o = ((long)b * H + h) * N;
            if (rms) {
                Z = rms_rows(N, dh, eps, Z, lz, zn + o * dh, rinv + o);
                lz = dh;
            }
            real* Y = AT(y, sy, b, h);
            for (int r0 = 0; r0 < N; r0 += rows) {
                int R = MIN(rows, N - r0);
                mm(gemm, 0, 1, R, N, dh, beta, Z + r0 * lz, lz, Z, lz, 0, work, N);
#pragma omp simd
                for (long j = 0; j < (long)R * N; j++) {
                    real sg = sigmoid(work[j]);
                    work[j] = sg - sg * sg;
                }
                mm(gemm, 0, 0, R, dh, N, 1, work, N, Z, lz, 0, Y + r0 * sy[2], sy[2]);
            }
        }
}

/* rinv NULL: z is the input as it is; else z is the forward's zn and rinv its r. */
void sigmoid_backward(gemm_fn gemm, int B, int H, int N, int dh, real beta, int rows, const real* z, const long* sz,
                      const real* g, const long* sg, const real* rinv, real* dz, const long* sdz, real* work) {
    real *F = work, *D = work + (long)rows * N, *dZ = D + (long)rows * N;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const real *Z = AT(z, sz, b, h), *Gr = AT(g, sg, b, h);
            memset(dZ, 0, sizeof(real) * N * dh);
            for (int r0 = 0; r0 < N; r0 += rows) {
                int R = MIN(rows, N - r0);
                const real *Zr = Z + r0 * sz[2], *Gg = Gr + r0 * sg[2];
                mm(gemm, 0, 1, R, N, dh, beta, Zr, sz[2], Z, sz[2], 0, D, N);
#pragma omp simd
                for (long j = 0; j < (long)R * N; j++) {  /* F = σ', D = σ'' (for now) */
                    real sg_ = sigmoid(D[j]), f = sg_ - sg_ * sg_;
                    F[j] = f;
                    D[j] = f * (1 - 2 * sg_);
                }
                mm(gemm, 0, 0, R, dh, N, 1, F, N, Gr, sg[2], 1, dZ + (long)r0 * dh, dh);  /* F G */
                mm(gemm, 0, 1, R, N, dh, 1, Gg, sg[2], Z, sz[2], 0, F, N);  /* G Zᵀ */
#pragma omp simd
                for (long j = 0; j < (long)R * N; j++) D[j] *= F[j];
                mm(gemm, 0, 0, R, dh, N, beta, D, N, Z, sz[2], 1, dZ + (long)r0 * dh, dh);
                mm(gemm, 1, 0, N, dh, R, beta, D, N, Zr, sz[2], 1, dZ, dh);
            }
            rows_out(N, dh, dZ, Z, sz[2], rinv ? rinv + ((long)b * H + h) * N : 0, AT(dz, sdz, b, h), sdz[2]);
        }
}

/* Bi-softmax: Y = (A + Aᵀ) Z, A = softmax_row(β Z Zᵀ); writes Y and A Z (saved for the backward).
 * Backward: ∂L/∂Z = A G + Aᵀ G + β (D + Dᵀ) Z, D = A ⊙ (G Zᵀ + Z Gᵀ − δ), δ_i = g_i·(A Z)_i + z_i·(A G)_i. */
/* Rows of S (R, n) to their softmax; with `causal`, row i (query r0 + i) sees keys j <= r0 + i only (the rest 0). */
static void softmax_rows(int R, int n, real* S, int causal, int r0) {
    for (int i = 0; i < R; i++) {
        real *s = S + (long)i * n, m = s[0], sum = 0;
        int lim = causal ? r0 + i + 1 : n;
#pragma omp simd reduction(max : m)
        for (int j = 1; j < lim; j++) m = s[j] > m ? s[j] : m;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < lim; j++) {
            real e = exp2_any((s[j] - m) * LOG2E);
            s[j] = e;
            sum += e;
        }
        real inv = 1 / sum;
#pragma omp simd
        for (int j = 0; j < lim; j++) s[j] *= inv;
        for (int j = lim; j < n; j++) s[j] = 0;
    }
}

/* The whole symmetric score matrix S (N, N) to Aᵀ, A = softmax_row(S): row i's max and sum are column i's, so
 * the passes run along the rows of memory, a vector of columns at a time, with no horizontal reduction per row
 * (at N = 16 those had cost more than the matrix products). mx, sum: N reals of scratch. */
static void softmax_cols(int N, real* S, real* mx, real* sum) {
    memcpy(mx, S, sizeof(real) * N);
    for (int i = 1; i < N; i++) {
        const real* s = S + (long)i * N;
#pragma omp simd
        for (int j = 0; j < N; j++) mx[j] = s[j] > mx[j] ? s[j] : mx[j];
    }
    memset(sum, 0, sizeof(real) * N);
    for (int i = 0; i < N; i++) {
        real* s = S + (long)i * N;
#pragma omp simd
        for (int j = 0; j < N; j++) {
            real e = exp2_any((s[j] - mx[j]) * LOG2E);
            s[j] = e;
            sum[j] += e;
        }
    }
    for (int j = 0; j < N; j++) sum[j] = 1 / sum[j];
    for (int i = 0; i < N; i++) {
        real* s = S + (long)i * N;
#pragma omp simd
        for (int j = 0; j < N; j++) s[j] *= sum[j];
    }
}

void bisoftmax_forward(gemm_fn gemm, int B, int H, int N, int dh, real beta, int rows, const real* z, const long* sz,
                       int rms, real eps, real* zn, real* rinv, real* y, const long* sy, real* az, real* work) {
    real *mx = work + (long)rows * N, *sum = mx + N;  /* softmax_cols' scratch */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const real* Z = AT(z, sz, b, h);
            long lz = sz[2], ly = sy[2], o = ((long)b * H + h) * N;
            if (rms) {
                Z = rms_rows(N, dh, eps, Z, lz, zn + o * dh, rinv + o);
                lz = dh;
            }
            real *Y = AT(y, sy, b, h), *AZ = az + o * dh;
            for (int i = 0; i < N; i++) memset(Y + i * ly, 0, sizeof(real) * dh);
            for (int r0 = 0; r0 < N; r0 += rows) {
                int R = MIN(rows, N - r0);
                const real* Zr = Z + r0 * lz;
                int t = R == N;  /* one tile: work holds Aᵀ (softmax_cols), so every product flips its transpose */
                mm(gemm, 0, 1, R, N, dh, beta, Zr, lz, Z, lz, 0, work, N);
                if (t)
                    softmax_cols(N, work, mx, sum);
                else
                    softmax_rows(R, N, work, 0, 0);
                mm(gemm, t, 0, R, dh, N, 1, work, N, Z, lz, 0, AZ + (long)r0 * dh, dh);  /* Σ_j A_ij z_j */
                mm(gemm, !t, 0, N, dh, R, 1, work, N, Zr, lz, 1, Y, ly);  /* Σ_i A_ik z_i */
            }
            for (int i = 0; i < N; i++)
#pragma omp simd
                for (int c = 0; c < dh; c++) Y[i * ly + c] += AZ[(long)i * dh + c];
        }
}

/* rinv NULL: z is the input as it is; else z is the forward's zn and rinv its r. */
void bisoftmax_backward(gemm_fn gemm, int B, int H, int N, int dh, real beta, int rows, const real* z, const long* sz,
                        const real* az, const real* g, const long* sg, const real* rinv, real* dz, const long* sdz,
                        real* work) {
    real *A = work, *D = work + (long)rows * N, *AG = D + (long)rows * N, *delta = AG + (long)rows * dh;
    real *mx = delta + rows, *sum = mx + N, *dZ = sum + N;  /* softmax_cols' scratch; this head's ∂L/∂Z */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const real *Z = AT(z, sz, b, h), *Gr = AT(g, sg, b, h);
            const real* AZ = az + ((long)b * H + h) * N * dh;
            memset(dZ, 0, sizeof(real) * N * dh);
            for (int r0 = 0; r0 < N; r0 += rows) {
                int R = MIN(rows, N - r0);
                const real *Zr = Z + r0 * sz[2], *Gg = Gr + r0 * sg[2];
                int t = R == N;  /* one tile: A holds Aᵀ and D will hold Dᵀ (see the forward) */
                mm(gemm, 0, 1, R, N, dh, beta, Zr, sz[2], Z, sz[2], 0, A, N);
                if (t)
                    softmax_cols(N, A, mx, sum);
                else
                    softmax_rows(R, N, A, 0, 0);
                mm(gemm, t, 0, R, dh, N, 1, A, N, Gr, sg[2], 0, AG, dh);  /* (A G) rows */
                mm(gemm, !t, 0, N, dh, R, 1, A, N, Gg, sg[2], 1, dZ, dh);  /* Aᵀ G */
                for (int i = 0; i < R; i++) {
                    real d = 0;
                    for (int c = 0; c < dh; c++)
                        d += Gg[(long)i * sg[2] + c] * AZ[(long)(r0 + i) * dh + c] + Zr[(long)i * sz[2] + c] * AG[i * dh + c];
                    delta[i] = d;
                }
                mm(gemm, 0, 1, R, N, dh, 1, Gg, sg[2], Z, sz[2], 0, D, N);  /* G Zᵀ */
                mm(gemm, 0, 1, R, N, dh, 1, Zr, sz[2], Gr, sg[2], 1, D, N);  /* + Z Gᵀ */
                for (int i = 0; i < R; i++) {  /* one tile: Dᵀ_ij = Aᵀ_ij (M_ij − δ_j), M = G Zᵀ + Z Gᵀ symmetric */
                    real *d = D + (long)i * N, *a = A + (long)i * N, di = delta[i];
                    if (t) {
#pragma omp simd
                        for (int j = 0; j < N; j++) d[j] = (d[j] - delta[j]) * a[j];
                    } else {
#pragma omp simd
                        for (int j = 0; j < N; j++) d[j] = (d[j] - di) * a[j];
                    }
                }
                for (int i = 0; i < R; i++)
                    for (int c = 0; c < dh; c++) dZ[(long)(r0 + i) * dh + c] += AG[i * dh + c];
                mm(gemm, 0, 0, R, dh, N, beta, D, N, Z, sz[2], 1, dZ + (long)r0 * dh, dh);
                mm(gemm, 1, 0, N, dh, R, beta, D, N, Zr, sz[2], 1, dZ, dh);
            }
            rows_out(N, dh, dZ, Z, sz[2], rinv ? rinv + ((long)b * H + h) * N : 0, AT(dz, sdz, b, h), sdz[2]);
        }
}

/* ----------------------------------------------------------------------------- MHA2nd1st's Newton direction (000)
 * out = g + s₁ G⁻¹, p = softmax(q kᵀ/T), k̄ = p K, g = q − k̄, u = g G, c = u Kᵀ, r = p ⊙ c, s₁ = (r K − k̄ (k̄·u))/T'.
 * Per head h: T[h], T2[h] (= T'), G and Ginv (H, d_h, d_h) or NULL (the identity). Writes out, k̄ and s₁
 * (contiguous (B, H, N, d_h)); the backward's steps are those of attention.py's _Newton, in its order. */
static void times(gemm_fn gemm, int R, int dh, const real* x, long ldx, const real* M, int transpose, real beta,
                  real* out) {  /* out (R, d_h) = x M (Mᵀ with transpose) + beta out; M NULL is the identity */
    if (M == NULL) {
        for (int i = 0; i < R; i++)
            for (int c = 0; c < dh; c++) out[i * dh + c] = x[i * ldx + c] + (beta == 0 ? 0 : beta * out[i * dh + c]);
    } else {
        mm(gemm, 0, transpose, R, dh, dh, 1, x, ldx, M, dh, beta, out, dh);
    }
}

void newton_forward(gemm_fn gemm, int B, int H, int N, int dh, int causal, int rows, const real* q, const long* sq,
                    const real* k, const long* sk, const real* T, const real* T2, const real* G, const real* Ginv,
                    real* out, real* kbar, real* s1, real* work) {
    real *P = work, *C = P + (long)rows * N, *g = C + (long)rows * N, *u = g + (long)rows * dh;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const real *Q = AT(q, sq, b, h), *K = AT(k, sk, b, h);
            const real *Gh = G ? G + (long)h * dh * dh : NULL, *Gih = Ginv ? Ginv + (long)h * dh * dh : NULL;
            long o = ((long)b * H + h) * N * dh;
            for (int r0 = 0; r0 < N; r0 += rows) {
                int R = MIN(rows, N - r0), n = causal ? MIN(N, r0 + R) : N;
                const real* Qr = Q + r0 * sq[2];
                real *kb = kbar + o + (long)r0 * dh, *s = s1 + o + (long)r0 * dh, *y = out + o + (long)r0 * dh;
                mm(gemm, 0, 1, R, n, dh, 1 / T[h], Qr, sq[2], K, sk[2], 0, P, n);
                softmax_rows(R, n, P, causal, r0);
                mm(gemm, 0, 0, R, dh, n, 1, P, n, K, sk[2], 0, kb, dh);  /* k̄ = p K */
                for (int i = 0; i < R; i++)
                    for (int c = 0; c < dh; c++) g[i * dh + c] = Qr[i * sq[2] + c] - kb[i * dh + c];
                times(gemm, R, dh, g, dh, Gh, 0, 0, u);
                mm(gemm, 0, 1, R, n, dh, 1, u, dh, K, sk[2], 0, C, n);  /* c = u Kᵀ */
#pragma omp simd
                for (long j = 0; j < (long)R * n; j++) C[j] *= P[j];  /* r = p ⊙ c */
                mm(gemm, 0, 0, R, dh, n, 1, C, n, K, sk[2], 0, s, dh);  /* r K */
                for (int i = 0; i < R; i++) {
                    real ku = 0;
                    for (int c = 0; c < dh; c++) ku += kb[i * dh + c] * u[i * dh + c];
                    for (int c = 0; c < dh; c++) s[i * dh + c] = (s[i * dh + c] - kb[i * dh + c] * ku) / T2[h];
                    for (int c = 0; c < dh; c++) y[i * dh + c] = g[i * dh + c];
                }
                times(gemm, R, dh, s, dh, Gih, 0, 1, y);  /* out = g + s₁ G⁻¹ */
            }
        }
}

/* dT, dT2 (B, H) and dG, dGinv (B, H, d_h, d_h) per batch element (the caller sums over B); dq, dk (B, H, N, d_h). */
void newton_backward(gemm_fn gemm, int B, int H, int N, int dh, int causal, int rows, const real* q, const long* sq,
                     const real* k, const long* sk, const real* T, const real* T2, const real* G, const real* Ginv,
                     const real* kbar, const real* s1, const real* grad, const long* sg, real* dq, real* dk,
                     real* dT, real* dT2, real* dG, real* dGinv, real* work) {
    real *P = work, *C = P + (long)rows * N, *DR = C + (long)rows * N, *DC = DR + (long)rows * N;
    real *g = DC + (long)rows * N, *u = g + (long)rows * dh, *e = u + (long)rows * dh, *du = e + (long)rows * dh;
    real *dg = du + (long)rows * dh, *dkb = dg + (long)rows * dh, *dlk = dkb + (long)rows * dh;
    real *ekb = dlk + (long)rows * dh, *kbu = ekb + rows, *delta = kbu + rows;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const real *Q = AT(q, sq, b, h), *K = AT(k, sk, b, h), *O = AT(grad, sg, b, h);
            const real *Gh = G ? G + (long)h * dh * dh : NULL, *Gih = Ginv ? Ginv + (long)h * dh * dh : NULL;
            long o = ((long)b * H + h) * N * dh, bh = (long)b * H + h;
            real *dQ = dq + o, *dK = dk + o, t = T[h], t2 = T2[h], dt = 0, dt2 = 0;
            real *dGh = dG ? dG + bh * dh * dh : NULL, *dGih = dGinv ? dGinv + bh * dh * dh : NULL;
            memset(dK, 0, sizeof(real) * N * dh);
            if (dGh) memset(dGh, 0, sizeof(real) * dh * dh);
            if (dGih) memset(dGih, 0, sizeof(real) * dh * dh);
            for (int r0 = 0; r0 < N; r0 += rows) {
                int R = MIN(rows, N - r0), n = causal ? MIN(N, r0 + R) : N;
                const real *Qr = Q + r0 * sq[2], *Or = O + r0 * sg[2];
                const real *kb = kbar + o + (long)r0 * dh, *s = s1 + o + (long)r0 * dh;
                mm(gemm, 0, 1, R, n, dh, 1 / t, Qr, sq[2], K, sk[2], 0, P, n);
                softmax_rows(R, n, P, causal, r0);
                for (int i = 0; i < R; i++)
                    for (int c = 0; c < dh; c++) g[i * dh + c] = Qr[i * sq[2] + c] - kb[i * dh + c];
                times(gemm, R, dh, g, dh, Gh, 0, 0, u);
                times(gemm, R, dh, Or, sg[2], Gih, 1, 0, e);  /* ∂L/∂s₁ = o G⁻ᵀ */
                if (dGih) mm(gemm, 1, 0, dh, dh, R, 1, s, dh, Or, sg[2], 1, dGih, dh);
                for (int i = 0; i < R; i++) {
                    real a = 0, ek = 0, ku = 0;
                    for (int c = 0; c < dh; c++) a += e[i * dh + c] * s[i * dh + c];
                    dt2 -= a / t2;
                    for (int c = 0; c < dh; c++) {
                        e[i * dh + c] /= t2;  /* e = ∂L/∂s₀ */
                        ek += e[i * dh + c] * kb[i * dh + c];
                        ku += kb[i * dh + c] * u[i * dh + c];
                    }
                    ekb[i] = ek;
                    kbu[i] = ku;
                }
                mm(gemm, 0, 1, R, n, dh, 1, u, dh, K, sk[2], 0, C, n);  /* c = u Kᵀ */
                mm(gemm, 0, 1, R, n, dh, 1, e, dh, K, sk[2], 0, DR, n);  /* ∂L/∂r = e Kᵀ */
#pragma omp simd
                for (long j = 0; j < (long)R * n; j++) DC[j] = DR[j] * P[j];  /* ∂L/∂c */
                mm(gemm, 0, 0, R, dh, n, 1, DC, n, K, sk[2], 0, du, dh);
                for (int i = 0; i < R; i++)
                    for (int c = 0; c < dh; c++) du[i * dh + c] -= kb[i * dh + c] * ekb[i];
                mm(gemm, 1, 0, n, dh, R, 1, DC, n, u, dh, 1, dK, dh);  /* (∂L/∂c)ᵀ u */
#pragma omp simd
                for (long j = 0; j < (long)R * n; j++) DC[j] = C[j] * P[j];  /* r */
                mm(gemm, 1, 0, n, dh, R, 1, DC, n, e, dh, 1, dK, dh);  /* rᵀ e */
                for (int i = 0; i < R; i++)
                    for (int c = 0; c < dh; c++) dg[i * dh + c] = Or[i * sg[2] + c];
                times(gemm, R, dh, du, dh, Gh, 1, 1, dg);  /* ∂L/∂g = o + (∂L/∂u) Gᵀ */
                if (dGh) mm(gemm, 1, 0, dh, dh, R, 1, g, dh, du, dh, 1, dGh, dh);
                for (int i = 0; i < R; i++) {
                    real d = 0;
                    for (int c = 0; c < dh; c++) {
                        long x = i * dh + c;
                        dkb[x] = -(e[x] * kbu[i] + u[x] * ekb[i] + dg[x]);
                        d += e[x] * (s[x] * t2 + kb[x] * kbu[i]) + dkb[x] * kb[x];
                    }
                    delta[i] = d;
                }
#pragma omp simd
                for (long j = 0; j < (long)R * n; j++) DR[j] *= C[j];  /* c ⊙ ∂L/∂r */
                mm(gemm, 0, 1, R, n, dh, 1, dkb, dh, K, sk[2], 1, DR, n);  /* + (∂L/∂k̄) Kᵀ = ∂L/∂p */
                for (int i = 0; i < R; i++) {  /* ∂L/∂ℓ = p ⊙ (∂L/∂p − δ) */
                    real *d = DR + (long)i * n, *p = P + (long)i * n, di = delta[i];
#pragma omp simd
                    for (int j = 0; j < n; j++) d[j] = (d[j] - di) * p[j];
                }
                mm(gemm, 1, 0, n, dh, R, 1, P, n, dkb, dh, 1, dK, dh);  /* pᵀ ∂L/∂k̄ */
                mm(gemm, 0, 0, R, dh, n, 1, DR, n, K, sk[2], 0, dlk, dh);  /* (∂L/∂ℓ) K */
                for (int i = 0; i < R; i++) {
                    real a = 0;
                    for (int c = 0; c < dh; c++) {
                        dQ[(long)(r0 + i) * dh + c] = dg[i * dh + c] + dlk[i * dh + c] / t;
                        a += Qr[i * sq[2] + c] * dlk[i * dh + c];
                    }
                    dt -= a / (t * t);
                }
                mm(gemm, 1, 0, n, dh, R, 1 / t, DR, n, Qr, sq[2], 1, dK, dh);  /* (∂L/∂ℓ)ᵀ q / T */
            }
            dT[bh] = dt;
            dT2[bh] = dt2;
        }
}
