/*
 * NAME
 *   hpclab_simd.h - the few vector operations a kernel needs to store its results past the
 *   cache (non-temporal, "streaming" stores): the Jacobi sweeps and the stencil's operators,
 *   C and Cython alike.
 *
 * PURPOSE
 *   A plain store first reads the line it writes into the cache (write-allocate): a loop
 *   whose output does not fit the cache moves 16 bytes from memory for every double it
 *   writes, not 8. A streaming store writes a whole line to memory without reading it.
 *   Compilers do not emit them for a loop of plain C (GCC also ignores OpenMP's
 *   `simd nontemporal` clause), so the kernels use these operations on groups of HPCLAB_VW
 *   doubles (a whole vector register), with the widest instruction set the build targets
 *   (-march of the kernel's declaration).
 *
 * NOTES
 *   HPCLAB_VW is 8 with AVX-512, 4 with AVX, 2 with SSE2 (every x86-64), and 0 where none of
 *   them is available (another architecture): the kernels then never stream. A streamed
 *   group's address must be a multiple of HPCLAB_VW doubles; the loads need not be aligned.
 *   Streaming stores are weakly ordered: hpclab_vfence() after the last of a pass, before
 *   any other thread or process may read the output (the halo exchange, the next pass).
 */
#ifndef HPCLAB_SIMD_H
#define HPCLAB_SIMD_H

#include <stdint.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#define HPCLAB_VW 8
#define HPCLAB_V(op) _mm512_##op
typedef __m512d hpclab_vd;
#elif defined(__AVX__)
#include <immintrin.h>
#define HPCLAB_VW 4
#define HPCLAB_V(op) _mm256_##op
typedef __m256d hpclab_vd;
#elif defined(__SSE2__)
#include <emmintrin.h>
#define HPCLAB_VW 2
#define HPCLAB_V(op) _mm_##op
typedef __m128d hpclab_vd;
#else
#define HPCLAB_VW 0
typedef double hpclab_vd;
#endif

#if HPCLAB_VW > 0
static inline hpclab_vd hpclab_vload(const double *p) { return HPCLAB_V(loadu_pd)(p); }
static inline hpclab_vd hpclab_vset(double x) { return HPCLAB_V(set1_pd)(x); }
static inline hpclab_vd hpclab_vadd(hpclab_vd a, hpclab_vd b) { return HPCLAB_V(add_pd)(a, b); }
static inline hpclab_vd hpclab_vmul(hpclab_vd a, hpclab_vd b) { return HPCLAB_V(mul_pd)(a, b); }
static inline void hpclab_vstream(double *p, hpclab_vd v) { HPCLAB_V(stream_pd)(p, v); }
#else
/* one double at a time, plain stores: the kernels never stream here */
static inline hpclab_vd hpclab_vload(const double *p) { return *p; }
static inline hpclab_vd hpclab_vset(double x) { return x; }
static inline hpclab_vd hpclab_vadd(hpclab_vd a, hpclab_vd b) { return a + b; }
static inline hpclab_vd hpclab_vmul(hpclab_vd a, hpclab_vd b) { return a * b; }
static inline void hpclab_vstream(double *p, hpclab_vd v) { *p = v; }
#endif

/* Ask for the line holding p[HPCLAB_AHEAD] (in the Jacobi sweeps: a load of the next plane
 * of u, or of f, that a streamed sweep reads from memory): the hardware prefetcher follows these streams too, but
 * alongside the stores past the cache and the planes read from L2 it fell behind. One rank
 * here, L = 128, C with it over the same loop without it (the Cython sweep then): 1.05 to
 * 1.13 at distances of 32 to 256 doubles, alike within the noise. */
#define HPCLAB_AHEAD 128
static inline void hpclab_vprefetch(const double *p)
{
#if defined(__GNUC__)
    __builtin_prefetch(p + HPCLAB_AHEAD, 0, 3);
#else
    (void)p;
#endif
}

/* the streaming stores before it are visible to every later load, of any process */
static inline void hpclab_vfence(void)
{
#if HPCLAB_VW > 0
    _mm_sfence();
#endif
}

/* doubles from p to the next address where a streamed group may start (0 when p is one) */
static inline long hpclab_vpeel(const double *p)
{
#if HPCLAB_VW > 0
    const uintptr_t bytes = (uintptr_t)(HPCLAB_VW * sizeof(double));
    const uintptr_t off = (uintptr_t)p % bytes;

    return off ? (long)((bytes - off) / sizeof(double)) : 0;
#else
    (void)p;
    return 0;
#endif
}

#endif
