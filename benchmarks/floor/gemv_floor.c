/* How fast can batch-1 fully connected layers go on this machine? The MNIST MLP of the
 * benchmark suite reads 2.1 MB of weights per run (784x512 and 512x256 floats), more than
 * a core's L2. This times, best of 3000 runs:
 *   - the same two GEMVs over packed weights as onnxc's generated kernel (16-column panels,
 *     AVX2 FMA, 4 KiB software prefetch), and
 *   - a plain read of the same bytes (vector adds, no multiply),
 * so that the model's ratio target can be set against the read floor.
 *
 *   gcc -O3 -march=native -o gemv_floor benchmarks/floor/gemv_floor.c && ./gemv_floor
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NR 16

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void gemv(int64_t N, int64_t K, const float *a, const float *Bp, float *c)
{
    for (int64_t p = 0; p < N; p += NR) {
        const float *panel = Bp + p * K;
        __m256 e0 = _mm256_setzero_ps(), e1 = e0, o0 = e0, o1 = e0;
        for (int64_t k = 0; k + 1 < K; k += 2) {
            const float *b = panel + k * NR;
            __builtin_prefetch(b + 1024);
            __builtin_prefetch(b + 1040);
            const __m256 a0 = _mm256_set1_ps(a[k]), a1 = _mm256_set1_ps(a[k + 1]);
            e0 = _mm256_fmadd_ps(a0, _mm256_load_ps(b), e0);
            e1 = _mm256_fmadd_ps(a0, _mm256_load_ps(b + 8), e1);
            o0 = _mm256_fmadd_ps(a1, _mm256_load_ps(b + 16), o0);
            o1 = _mm256_fmadd_ps(a1, _mm256_load_ps(b + 24), o1);
        }
        _mm256_storeu_ps(c + p, _mm256_add_ps(e0, o0));
        _mm256_storeu_ps(c + p + 8, _mm256_add_ps(e1, o1));
    }
}

__attribute__((noinline)) static float read_all(int64_t n, const float *b)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t i = 0; i < n; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_load_ps(b + i));
        s1 = _mm256_add_ps(s1, _mm256_load_ps(b + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_load_ps(b + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_load_ps(b + i + 24));
    }
    float t[8];
    _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    return t[0];
}

int main(void)
{
    const int64_t K1 = 784, N1 = 512, K2 = 512, N2 = 256;
    float *B1 = aligned_alloc(64, (size_t)(K1 * N1) * 4), *B2 = aligned_alloc(64, (size_t)(K2 * N2) * 4);
    float *a = aligned_alloc(64, 4096), *c = aligned_alloc(64, 16384);
    for (int64_t i = 0; i < K1 * N1; i++) B1[i] = (float)(i % 7) * 0.1f;
    for (int64_t i = 0; i < K2 * N2; i++) B2[i] = (float)(i % 5) * 0.1f;
    for (int i = 0; i < 1024; i++) a[i] = (float)i * 0.001f;
    double best_gemv = 1e9, best_read = 1e9;
    float sink = 0;
    for (int it = 0; it < 3000; it++) {
        const double t0 = now();
        gemv(N1, K1, a, B1, c);
        gemv(N2, K2, c, B2, c + 1024);
        const double t1 = now();
        sink += read_all(K1 * N1, B1) + read_all(K2 * N2, B2);
        const double t2 = now();
        best_gemv = t1 - t0 < best_gemv ? t1 - t0 : best_gemv;
        best_read = t2 - t1 < best_read ? t2 - t1 : best_read;
    }
    const double bytes = (double)(K1 * N1 + K2 * N2) * 4;
    printf("two GEMVs %.1f us, plain read %.1f us (%.0f GB/s) [%g]\n", best_gemv * 1e6, best_read * 1e6,
           bytes / best_read / 1e9, (double)(sink + c[0]));
    return 0;
}
