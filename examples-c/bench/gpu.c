/*
 * gpu.c: the GPU benchmark, one run, two columns:
 *
 *   ours    tensorasync through its C ABI: device tensors
 *           (ta_tensor_new_zeros with domain 0), ta_copy_in, ta_gemm,
 *           ta_event_wait; the chain through ta_scale on a device tensor;
 *   cuBLAS  raw cuBLAS called directly on the same GPU, same process.
 *
 * Measurements:
 *   1. gemm C = A*B at n x n (default 8192), f32 and f64, column-major,
 *      alpha 1, beta 0; reps alternate ours / cuBLAS; best and median
 *      TFLOP/s of `reps` (default 5) after one warm-up each; results compared.
 *   2. a chain of `chain` (default 10000) small device operations, x = 1*x on a
 *      64-element f64 vector, one stream, no host synchronisation in between,
 *      one wait at the end: microseconds per operation.
 *   ratio = ours / cuBLAS (TFLOP/s for gemm, target >= 0.95; us/op for the chain).
 *
 * No build-time CUDA dependency: the driver (libcuda.so.1) and cuBLAS
 * (libcublas.so.13, .12, .11 or .so) are dlopen'ed, and the few types and
 * function pointer types used are declared below. Build and run (or let
 * scripts/gpu-check.sh do it):
 *
 *   gcc -O2 -std=gnu11 -Wall -Wextra -Iinclude examples-c/bench/gpu.c \
 *       -Ltarget/release -ltensorasync -Wl,-rpath,$PWD/target/release -ldl -lm -o target/release/gpu-bench
 *   target/release/gpu-bench [n] [reps] [chain]
 *
 * The "ours" column runs only where the library reports CUDA devices
 * (ta_cuda_device_count == TA_STATUS_OK); it prints "n/a" otherwise, for
 * instance while the library has no device tensors yet.
 * Lines starting with "RESULT " are for scripts (key=value pairs).
 * Exit status: 0 done; 1 a failure (CUDA error, wrong results); 2 no GPU.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tensorasync.h>

#include "harness.h"

/* Being added to the library; declared here (weak) so that this program
 * builds and runs before and after it lands. */
ta_status ta_cuda_device_count(size_t *count_out, ta_error **error);
#pragma weak ta_cuda_device_count

/* ---------------------------------------------------------------------------
 * The CUDA driver and cuBLAS, loaded at run time. */

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;
typedef void *cublasHandle_t;
typedef int cublasStatus_t;
enum { CUBLAS_OP_N = 0 };
enum { CU_STREAM_NON_BLOCKING = 1 };

static struct {
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*GetErrorName)(CUresult, const char **);
} cu;

static struct {
    cublasStatus_t (*Create)(cublasHandle_t *);
    cublasStatus_t (*Destroy)(cublasHandle_t);
    cublasStatus_t (*SetStream)(cublasHandle_t, CUstream);
    cublasStatus_t (*Sgemm)(cublasHandle_t, int, int, int, int, int, const float *, const float *, int, const float *,
                            int, const float *, float *, int);
    cublasStatus_t (*Dgemm)(cublasHandle_t, int, int, int, int, int, const double *, const double *, int,
                            const double *, int, const double *, double *, int);
    cublasStatus_t (*Dscal)(cublasHandle_t, int, const double *, double *, int);
} blas;

static void *sym(void *lib, const char *libname, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "%s has no %s\n", libname, name);
        exit(1);
    }
    return p;
}

#define LOAD(table, lib, libname, field, name) \
    do { *(void **)&table.field = sym(lib, libname, name); } while (0)

/* 0: loaded; 2: no driver or no device (reason printed). */
static int load_cuda(void) {
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv) {
        printf("no CUDA driver: %s\n", dlerror());
        return 2;
    }
    LOAD(cu, drv, "libcuda.so.1", Init, "cuInit");
    LOAD(cu, drv, "libcuda.so.1", DeviceGetCount, "cuDeviceGetCount");
    LOAD(cu, drv, "libcuda.so.1", DeviceGet, "cuDeviceGet");
    LOAD(cu, drv, "libcuda.so.1", DeviceGetName, "cuDeviceGetName");
    LOAD(cu, drv, "libcuda.so.1", DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    LOAD(cu, drv, "libcuda.so.1", CtxSetCurrent, "cuCtxSetCurrent");
    LOAD(cu, drv, "libcuda.so.1", StreamCreate, "cuStreamCreate");
    LOAD(cu, drv, "libcuda.so.1", StreamSynchronize, "cuStreamSynchronize");
    LOAD(cu, drv, "libcuda.so.1", MemAlloc, "cuMemAlloc_v2");
    LOAD(cu, drv, "libcuda.so.1", MemFree, "cuMemFree_v2");
    LOAD(cu, drv, "libcuda.so.1", MemcpyHtoD, "cuMemcpyHtoD_v2");
    LOAD(cu, drv, "libcuda.so.1", MemcpyDtoH, "cuMemcpyDtoH_v2");
    LOAD(cu, drv, "libcuda.so.1", GetErrorName, "cuGetErrorName");

    const char *names[] = { "libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so" };
    void *lib = NULL;
    const char *libname = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++) {
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        libname = names[i];
    }
    if (!lib) {
        fprintf(stderr, "cuBLAS not found (libcublas.so.13/.12/.11): %s\n", dlerror());
        exit(1);
    }
    printf("cuBLAS: %s\n", libname);
    LOAD(blas, lib, libname, Create, "cublasCreate_v2");
    LOAD(blas, lib, libname, Destroy, "cublasDestroy_v2");
    LOAD(blas, lib, libname, SetStream, "cublasSetStream_v2");
    LOAD(blas, lib, libname, Sgemm, "cublasSgemm_v2");
    LOAD(blas, lib, libname, Dgemm, "cublasDgemm_v2");
    LOAD(blas, lib, libname, Dscal, "cublasDscal_v2");
    return 0;
}

static void cu_check(CUresult r, const char *what) {
    if (r == 0) return;
    const char *name = "?";
    cu.GetErrorName(r, &name);
    fprintf(stderr, "%s failed: %s (%d)\n", what, name ? name : "?", r);
    exit(1);
}
#define CU(call) cu_check((call), #call)

static void blas_check(cublasStatus_t s, const char *what) {
    if (s == 0) return;
    fprintf(stderr, "%s failed: cuBLAS status %d\n", what, s);
    exit(1);
}
#define BLAS(call) blas_check((call), #call)

/* ---------------------------------------------------------------------------
 * tensorasync helpers: a failure of ours is reported and fails the run. */

static int failed;

static int ta_ok(ta_status s, ta_error *err, const char *what) {
    if (s == TA_STATUS_OK) return 1;
    char msg[512] = "";
    if (!err) ta_last_error(&err);
    if (err) ta_error_message(err, msg, sizeof msg, NULL);
    fprintf(stderr, "%s failed: %s: %s\n", what, ta_status_name(s), msg);
    ta_error_free(err);
    failed = 1;
    return 0;
}
#define TA(call) ({ ta_error *err = NULL; ta_status s_ = (call); ta_ok(s_, err, #call); })

static int ta_wait(ta_event *ev) {
    ta_status s = ta_event_wait(ev, -1);
    ta_error *err = NULL;
    if (s != TA_STATUS_OK) ta_event_error(ev, &err);
    ta_event_free(ev);
    return ta_ok(s, err, "ta_event_wait");
}

/* ---------------------------------------------------------------------------
 * Timing and statistics. */

/* Seconds. */
static double now(void) { return now_ns() * 1e-9; }

static void fill(void *p, int f64, size_t count, uint64_t seed) {
    uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (size_t i = 0; i < count; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double v = (double)(s >> 11) / 9007199254740992.0 - 0.5;
        if (f64)
            ((double *)p)[i] = v;
        else
            ((float *)p)[i] = (float)v;
    }
}

/* The table: one row per measurement; "ours" < 0 means not measured. */
static void row(const char *op, size_t n, const char *unit, double ours, double theirs, int higher_is_better) {
    char o[32] = "n/a", r[16] = "-";
    if (ours >= 0) {
        snprintf(o, sizeof o, "%.3f", ours);
        snprintf(r, sizeof r, "%.3f", ours / theirs);
    }
    printf("%-22s %6zu %12s %12.3f %8s  %s%s\n", op, n, o, theirs, r, unit,
           ours >= 0 && higher_is_better && ours / theirs < 0.95 ? "  (below the 0.95 target)" : "");
    printf("RESULT op=%s n=%zu unit=%s ours=%s cublas=%.4f ratio=%s\n", op, n, unit, o, theirs, r);
}

/* ---------------------------------------------------------------------------
 * 1. gemm. */

static void bench_gemm(int f64, size_t n, int reps, int ours_on) {
    size_t elt = f64 ? 8 : 4, count = n * n, bytes = count * elt;
    ta_dtype dt = f64 ? TA_DTYPE_F64 : TA_DTYPE_F32;
    void *ha = malloc(bytes), *hb = malloc(bytes), *hc_ref = malloc(bytes), *hc_ours = malloc(bytes);
    if (!ha || !hb || !hc_ref || !hc_ours) {
        fprintf(stderr, "host allocation of 4 x %zu bytes failed\n", bytes);
        exit(1);
    }
    fill(ha, f64, count, 1);
    fill(hb, f64, count, 2);

    /* Raw cuBLAS on its own stream. */
    CUstream stream;
    CU(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    cublasHandle_t h;
    BLAS(blas.Create(&h));
    BLAS(blas.SetStream(h, stream));
    CUdeviceptr da, db, dc;
    CU(cu.MemAlloc(&da, bytes));
    CU(cu.MemAlloc(&db, bytes));
    CU(cu.MemAlloc(&dc, bytes));
    CU(cu.MemcpyHtoD(da, ha, bytes));
    CU(cu.MemcpyHtoD(db, hb, bytes));
    int ni = (int)n;
    const float one_f = 1.0f, zero_f = 0.0f;
    const double one_d = 1.0, zero_d = 0.0;

    /* Ours: column-major device tensors holding the same matrices. */
    ta_tensor *ta = NULL, *tb = NULL, *tc = NULL;
    size_t ext[2] = { n, n };
    ptrdiff_t colmajor[2] = { 1, (ptrdiff_t)n };
    if (ours_on) {
        ta_event *ev = NULL;
        ours_on = TA(ta_tensor_new_zeros(dt, 0, 2, ext, TA_ORDER_COL_MAJOR, &ta, &err)) &&
                  TA(ta_tensor_new_zeros(dt, 0, 2, ext, TA_ORDER_COL_MAJOR, &tb, &err)) &&
                  TA(ta_tensor_new_zeros(dt, 0, 2, ext, TA_ORDER_COL_MAJOR, &tc, &err)) &&
                  TA(ta_copy_in(ta, ha, 2, ext, colmajor, NULL, &ev, &err)) && ta_wait(ev) &&
                  TA(ta_copy_in(tb, hb, 2, ext, colmajor, NULL, &ev, &err)) && ta_wait(ev);
    }
    ta_scalar one = { 1.0, 0.0 }, zero = { 0.0, 0.0 };

    double *t_ours = calloc((size_t)reps, sizeof(double)), *t_raw = calloc((size_t)reps, sizeof(double));
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up, not recorded */
        if (ours_on) {
            ta_event *ev = NULL;
            double t0 = now();
            ours_on = TA(ta_gemm(tc, one, ta, tb, zero, NULL, &ev, &err)) && ta_wait(ev);
            if (r >= 0) t_ours[r] = now() - t0;
        }
        double t0 = now();
        if (f64)
            BLAS(blas.Dgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one_d, (const double *)(uintptr_t)da, ni,
                            (const double *)(uintptr_t)db, ni, &zero_d, (double *)(uintptr_t)dc, ni));
        else
            BLAS(blas.Sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one_f, (const float *)(uintptr_t)da, ni,
                            (const float *)(uintptr_t)db, ni, &zero_f, (float *)(uintptr_t)dc, ni));
        CU(cu.StreamSynchronize(stream));
        if (r >= 0) t_raw[r] = now() - t0;
    }

    /* Same results? */
    double maxrel = -1;
    if (ours_on) {
        ta_event *ev = NULL;
        if (TA(ta_copy_out(tc, hc_ours, count, colmajor, NULL, &ev, &err)) && ta_wait(ev)) {
            CU(cu.MemcpyDtoH(hc_ref, dc, bytes));
            double scale = 0, diff = 0;
            for (size_t i = 0; i < count; i++) {
                double x = f64 ? ((double *)hc_ref)[i] : ((float *)hc_ref)[i];
                double y = f64 ? ((double *)hc_ours)[i] : ((float *)hc_ours)[i];
                scale = fmax(scale, fabs(x));
                diff = fmax(diff, fabs(x - y));
            }
            maxrel = diff / scale;
            if (!(maxrel < (f64 ? 1e-10 : 1e-3))) {
                fprintf(stderr, "FAIL: gemm %s: ours differs from cuBLAS (max rel diff %.2e)\n", f64 ? "f64" : "f32",
                        maxrel);
                failed = 1;
            }
        } else {
            ours_on = 0;
        }
    }

    double flop = 2.0 * (double)n * (double)n * (double)n;
    char name[32];
    snprintf(name, sizeof name, "gemm_%s_best", f64 ? "f64" : "f32");
    row(name, n, "TFLOP/s", ours_on ? flop / best(t_ours, reps) / 1e12 : -1, flop / best(t_raw, reps) / 1e12, 1);
    snprintf(name, sizeof name, "gemm_%s_median", f64 ? "f64" : "f32");
    row(name, n, "TFLOP/s", ours_on ? flop / median(t_ours, reps) / 1e12 : -1, flop / median(t_raw, reps) / 1e12, 1);
    if (maxrel >= 0) printf("  gemm %s: max rel diff ours vs cuBLAS %.2e\n", f64 ? "f64" : "f32", maxrel);

    ta_tensor_free(ta);
    ta_tensor_free(tb);
    ta_tensor_free(tc);
    CU(cu.MemFree(da));
    CU(cu.MemFree(db));
    CU(cu.MemFree(dc));
    BLAS(blas.Destroy(h));
    free(ha), free(hb), free(hc_ref), free(hc_ours), free(t_ours), free(t_raw);
}

/* ---------------------------------------------------------------------------
 * 2. A chain of small device operations. */

#define CHAIN_LEN 64

static void bench_chain(int ops, int ours_on) {
    CUstream stream;
    CU(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    cublasHandle_t h;
    BLAS(blas.Create(&h));
    BLAS(blas.SetStream(h, stream));
    CUdeviceptr dx;
    double hx[CHAIN_LEN];
    fill(hx, 1, CHAIN_LEN, 3);
    CU(cu.MemAlloc(&dx, sizeof hx));
    CU(cu.MemcpyHtoD(dx, hx, sizeof hx));
    const double alpha = 1.0;
    double *x = (double *)(uintptr_t)dx;

    ta_tensor *tx = NULL;
    size_t ext[1] = { CHAIN_LEN };
    if (ours_on) ours_on = TA(ta_tensor_new_zeros(TA_DTYPE_F64, 0, 1, ext, TA_ORDER_ROW_MAJOR, &tx, &err));
    ta_scalar a = { 1.0, 0.0 };

    double us_raw = 1e30, us_ours = 1e30;
    for (int round = 0; round < 3; round++) { /* best of 3, the first one warms up */
        double t0 = now();
        for (int i = 0; i < ops; i++) BLAS(blas.Dscal(h, CHAIN_LEN, &alpha, x, 1));
        CU(cu.StreamSynchronize(stream));
        us_raw = fmin(us_raw, (now() - t0) / ops * 1e6);
        if (ours_on) {
            t0 = now();
            for (int i = 0; i < ops && ours_on; i++) ours_on = TA(ta_scale(tx, a, NULL, NULL, &err));
            ours_on = ours_on && TA(ta_tensor_wait(tx, -1, &err));
            us_ours = fmin(us_ours, (now() - t0) / ops * 1e6);
        }
    }
    row("chain_scal_f64", CHAIN_LEN, "us/op", ours_on ? us_ours : -1, us_raw, 0);

    ta_tensor_free(tx);
    CU(cu.MemFree(dx));
    BLAS(blas.Destroy(h));
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : 8192;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    int chain = argc > 3 ? atoi(argv[3]) : 10000;
    if (n == 0 || n > 46340 || reps < 1 || chain < 1) {
        fprintf(stderr, "usage: %s [n (8192)] [reps (5)] [chain (10000)]\n", argv[0]);
        return 1;
    }

    int rc = load_cuda();
    if (rc) return rc;
    CUresult r = cu.Init(0);
    int count = 0;
    if (r == 0) r = cu.DeviceGetCount(&count);
    if (r != 0 || count == 0) {
        const char *name = "no devices";
        if (r) cu.GetErrorName(r, &name);
        printf("no CUDA device: %s\n", name ? name : "?");
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    char devname[256] = "";
    CU(cu.DeviceGet(&dev, 0));
    CU(cu.DeviceGetName(devname, sizeof devname, dev));
    /* The primary context: the one tensorasync uses too. */
    CU(cu.DevicePrimaryCtxRetain(&ctx, dev));
    CU(cu.CtxSetCurrent(ctx));

    int ours_on = 0;
    if (ta_cuda_device_count) {
        size_t ta_count = 0;
        ta_error *err = NULL;
        ta_status s = ta_cuda_device_count(&ta_count, &err);
        if (s == TA_STATUS_OK && ta_count > 0) {
            ours_on = 1;
        } else {
            char msg[512] = "";
            if (err) ta_error_message(err, msg, sizeof msg, NULL);
            printf("tensorasync reports no CUDA device (%s: %s): column \"ours\" is n/a\n", ta_status_name(s), msg);
        }
        ta_error_free(err);
    } else {
        printf("this libtensorasync has no ta_cuda_device_count yet: column \"ours\" is n/a\n");
    }

    printf("GPU: %s; tensorasync %s; n = %zu, %d reps, chain of %d\n\n", devname, ta_version(), n, reps, chain);
    printf("%-22s %6s %12s %12s %8s  %s\n", "op", "n", "ours", "cuBLAS", "ratio", "unit");
    bench_gemm(0, n, reps, ours_on);
    bench_gemm(1, n, reps, ours_on);
    bench_chain(chain, ours_on);
    if (failed) printf("\nFAILED: see the messages above\n");
    return failed ? 1 : 0;
}
