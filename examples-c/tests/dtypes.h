/*
 * dtypes.h: the four floating-point dtypes of the tests, with element access
 * through double complex, test values and a strided comparison.
 *
 * Test values are small multiples of 1/4 (imaginary parts of 1/2), so sums
 * and products with small dyadic scalars are exact in float and double: the
 * reference arithmetic may use double complex, and results compare exactly.
 */
#ifndef TA_TEST_DTYPES_H
#define TA_TEST_DTYPES_H

#include "check.h"

#include <complex.h>

typedef struct dtinfo {
    ta_dtype dt;
    const char *name;
    size_t size;
    int cplx;
} dtinfo;

static const dtinfo FLOATS[] = {
    { TA_DTYPE_F32, "f32", sizeof(float), 0 },
    { TA_DTYPE_F64, "f64", sizeof(double), 0 },
    { TA_DTYPE_C64, "complex64", sizeof(float complex), 1 },
    { TA_DTYPE_C128, "complex128", sizeof(double complex), 1 },
};

/* Element i of a buffer of dtype d, as double complex. */
static inline double complex get(const dtinfo *d, const void *buf, ptrdiff_t i) {
    switch (d->dt) {
    case TA_DTYPE_F32: return ((const float *)buf)[i];
    case TA_DTYPE_F64: return ((const double *)buf)[i];
    case TA_DTYPE_C64: return ((const float complex *)buf)[i];
    default: return ((const double complex *)buf)[i];
    }
}

static inline void put(const dtinfo *d, void *buf, ptrdiff_t i, double complex z) {
    switch (d->dt) {
    case TA_DTYPE_F32: ((float *)buf)[i] = (float)creal(z); break;
    case TA_DTYPE_F64: ((double *)buf)[i] = creal(z); break;
    case TA_DTYPE_C64: ((float complex *)buf)[i] = (float complex)z; break;
    default: ((double complex *)buf)[i] = z; break;
    }
}

/* The k-th test value (real dtypes drop the imaginary part). */
static inline double complex val(const dtinfo *d, long k, int salt) {
    double re = (double)((k * 7 + salt * 3) % 23 - 11) * 0.25;
    double im = (double)((k * 5 + salt) % 13 - 6) * 0.5;
    return d->cplx ? re + im * I : re;
}

static inline ta_scalar scalar_of(const dtinfo *d, double complex z) {
    ta_scalar s = { creal(z), d->cplx ? cimag(z) : 0.0 };
    return s;
}

static inline double complex alpha_of(const dtinfo *d, double re, double im) { return d->cplx ? re + im * I : re; }

static inline void *alloc(const dtinfo *d, size_t n) {
    void *p = calloc(n ? n : 1, d->size);
    if (!p) exit(2);
    return p;
}

/* Compare `got` (row-major dense, R x C) with want(i, j) given as a buffer and strides. */
static inline int compare2(const dtinfo *d, const char *what, const void *got, ptrdiff_t gs0, ptrdiff_t gs1,
                    const void *want, ptrdiff_t ws0, ptrdiff_t ws1, size_t R, size_t C) {
    for (size_t i = 0; i < R; i++)
        for (size_t j = 0; j < C; j++) {
            double complex g = get(d, got, (ptrdiff_t)i * gs0 + (ptrdiff_t)j * gs1);
            double complex w = get(d, want, (ptrdiff_t)i * ws0 + (ptrdiff_t)j * ws1);
            if (g != w) {
                CHECK(0, "%s %s: [%zu,%zu] = %g%+gi, expected %g%+gi", d->name, what, i, j, creal(g), cimag(g),
                      creal(w), cimag(w));
                return 0;
            }
        }
    CHECK(1, "ok");
    return 1;
}

#endif /* TA_TEST_DTYPES_H */
