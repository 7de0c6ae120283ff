/*
 * demo.c: a first tour of tensorasync from C.
 *
 * Build and run:  make -C examples-c demo
 *
 * Two threads submit small pipelines to one runtime. Neither waits between
 * its steps: each thread submits in program order, and the library orders
 * every read and write of a tensor in the order they were submitted (its
 * epoch queue), running independent work in parallel.
 *
 *   thread "left"   x = copy_in(host_x)          host memory -> tensor
 *                   x = 2 * x                     ta_scale
 *                   x = x*x + 1                   a user kernel ("square_plus_one")
 *                   total += x                    ta_axpy on the SHARED tensor
 *                   completion: a callback        (ta_submit.callback)
 *
 *   thread "right"  w = a copy of host_w          ta_tensor_new_copy
 *                   y = 0.5 everywhere            ta_fill
 *                   y += 3 * w                    ta_axpy
 *                   z = y                         ta_copy (z starts unconstructed)
 *                   total += z                    ta_axpy on the SHARED tensor
 *                   z -> host_z                   ta_copy_out
 *                   completion: a poll loop       (ta_event_poll)
 *
 *   main            total -> host_total           ta_copy_out, after both threads
 *                   completion: a completion queue whose file descriptor is
 *                   watched with poll(2), as an event loop would (ta_cq_fd)
 *
 * Ordering on the shared tensor `total`: both threads only ADD to it, and
 * addition commutes. The two updates are ordered by whichever thread submits
 * first, and either order gives the same result (all values here are small
 * multiples of 1/4, so even the floating-point sums are exact). Main submits
 * its read of `total` after joining both threads, so that read is enrolled
 * after both updates and sees both, without any waiting in between.
 *
 * Finally, errors are values: a kernel that fails poisons what it writes, and
 * every later reader reports the same error, with the kernel's message and name.
 *
 * Every result is checked against plain C; the program exits non-zero on any
 * mismatch.
 */
#define _POSIX_C_SOURCE 200809L

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tensorasync.h>

#define N 8

static ta_runtime *rt;   /* one pool of worker threads for everything */
static ta_tensor *total; /* shared by both threads */
static int failures;

/* Stop on a failed call, printing the library's message for it. Functions
 * declare `ta_error *err = NULL;` and pass `&err` as the last argument of
 * calls that take one: on failure it receives an error object with details. */
static void check(ta_status s, ta_error *err, const char *what) {
    if (s == TA_STATUS_OK) return;
    char msg[256] = "";
    if (!err) ta_last_error(&err); /* calls without an error argument */
    ta_error_message(err, msg, sizeof msg, NULL);
    fprintf(stderr, "%s failed: %s: %s\n", what, ta_status_name(s), msg);
    exit(1);
}
#define OK(call) do { ta_status s_ = (call); check(s_, err, #call); } while (0)

static void verify(const char *what, const double *got, const double *want) {
    for (int i = 0; i < N; i++) {
        if (got[i] != want[i]) {
            printf("MISMATCH %s[%d]: got %g, expected %g\n", what, i, got[i], want[i]);
            failures++;
            return;
        }
    }
    printf("verified: %s matches the plain-C result\n", what);
}

/* Options for one submission: our runtime, everything else zero. */
static ta_submit on_rt(void) {
    ta_submit s;
    memset(&s, 0, sizeof s);
    s.runtime = rt;
    return s;
}

static ta_scalar real(double v) {
    ta_scalar s = { v, 0.0 };
    return s;
}

/* ---------------------------------------------------------------------------
 * A user kernel: x[i] = x[i]^2 + 1. It receives one resolved view per
 * declared access; views are strided, so index with strides[], not with i.
 */
static ta_status square_plus_one(const ta_view *v, size_t nviews, void *userdata, ta_kernel_ctx *ctx) {
    (void)userdata;
    if (nviews != 1 || v[0].dtype != TA_DTYPE_F64 || v[0].rank != 1) {
        ta_kernel_set_error(ctx, "square_plus_one expects one rank-1 f64 tensor");
        return 1;
    }
    double *x = v[0].data;
    for (size_t i = 0; i < v[0].extents[0]; i++) {
        double *p = x + (ptrdiff_t)i * v[0].strides[0];
        *p = *p * *p + 1.0;
    }
    return TA_STATUS_OK;
}

/* ---------------------------------------------------------------------------
 * Thread "left": completion by callback. The thread submits and returns at
 * once; the callback reports when the last step has run.
 */
static double host_x[N];
static pthread_mutex_t left_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t left_cv = PTHREAD_COND_INITIALIZER;
static int left_done;
static ta_status left_status;

static void left_finished(ta_status status, void *userdata) {
    (void)userdata; /* runs on a worker thread, once */
    pthread_mutex_lock(&left_mu);
    left_status = status;
    left_done = 1;
    pthread_cond_signal(&left_cv);
    pthread_mutex_unlock(&left_mu);
}

static void *left(void *arg) {
    (void)arg;
    for (int i = 0; i < N; i++) host_x[i] = i - 3.5; /* must stay valid until copy_in ran */
    size_t n = N;
    ta_error *err = NULL;
    ta_tensor *x = NULL;
    ta_submit o = on_rt();

    OK(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &x, &err));            /* unconstructed */
    OK(ta_copy_in(x, host_x, 1, &n, NULL, &o, NULL, &err));               /* constructs x  */
    OK(ta_scale(x, real(2.0), &o, NULL, &err));
    ta_access acc = { x, TA_MODE_UPDATE };
    OK(ta_kernel_submit(square_plus_one, NULL, "square_plus_one", &acc, 1, &o, NULL, &err));

    ta_submit notify = on_rt();
    notify.callback = left_finished;
    OK(ta_axpy(total, real(1.0), x, &notify, NULL, &err));                 /* total += x */

    /* Releasing a handle never blocks or cancels: the pending steps keep x alive. */
    ta_tensor_free(x);
    printf("left:  submitted 4 steps and returned (completion comes by callback)\n");
    return NULL;
}

/* ---------------------------------------------------------------------------
 * Thread "right": completion by polling an event while doing other work.
 */
static double host_w[N], host_z[N];

static void *right(void *arg) {
    (void)arg;
    for (int i = 0; i < N; i++) host_w[i] = 0.25 * i;
    size_t n = N;
    ta_error *err = NULL;
    ta_tensor *w = NULL, *y = NULL, *z = NULL;
    ta_event *done = NULL;
    ta_submit o = on_rt();

    /* A host tensor holding a copy of host_w, made before the call returns. */
    OK(ta_tensor_new_copy(TA_DTYPE_F64, 1, &n, NULL, TA_ORDER_ROW_MAJOR, host_w, &w, &err));
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &y, &err));
    OK(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &z, &err));
    OK(ta_fill(y, real(0.5), &o, NULL, &err));
    OK(ta_axpy(y, real(3.0), w, &o, NULL, &err));                          /* y += 3 w   */
    OK(ta_copy(z, y, &o, NULL, &err));                                      /* z = y      */
    OK(ta_axpy(total, real(1.0), z, &o, NULL, &err));                      /* total += z */
    OK(ta_copy_out(z, host_z, N, NULL, &o, &done, &err));                  /* z -> host  */
    ta_tensor_free(w);
    ta_tensor_free(y);
    ta_tensor_free(z);

    long spins = 0;
    ta_status s;
    while ((s = ta_event_poll(done)) == TA_STATUS_PENDING) {
        spins++; /* ... a real program would do useful work here ... */
        struct timespec t = { 0, 100000 };
        nanosleep(&t, NULL);
    }
    ta_event_free(done);
    printf("right: copy_out finished with %s after %ld polls\n", ta_status_name(s), spins);

    double want[N];
    for (int i = 0; i < N; i++) want[i] = 0.5 + 3.0 * host_w[i];
    if (s != TA_STATUS_OK) failures++;
    verify("z (thread right)", host_z, want);
    return NULL;
}

/* ---------------------------------------------------------------------------
 * Errors are values: a kernel that refuses a zero input poisons its output,
 * and later operations on that output report the same error.
 */
static ta_status checked_reciprocal(const ta_view *v, size_t nviews, void *userdata, ta_kernel_ctx *ctx) {
    (void)nviews; (void)userdata;
    const double *in = v[0].data;
    double *out = v[1].data;
    for (size_t i = 0; i < v[0].extents[0]; i++) {
        double a = in[(ptrdiff_t)i * v[0].strides[0]];
        if (a == 0) {
            char msg[96];
            snprintf(msg, sizeof msg, "element %zu is zero", i);
            ta_kernel_set_error(ctx, msg);
            return 7; /* any non-zero value fails; it is kept as the error's code */
        }
        out[(ptrdiff_t)i * v[1].strides[0]] = 1.0 / a;
    }
    return TA_STATUS_OK;
}

static void error_demo(void) {
    static double host_in[N] = { 1, 2, 4, 0, 8, 16, 32, 64 };
    double host_out[N];
    size_t n = N;
    ta_error *err = NULL;
    ta_tensor *in = NULL, *out = NULL;
    ta_event *ev = NULL;
    ta_submit o = on_rt();

    OK(ta_tensor_new_copy(TA_DTYPE_F64, 1, &n, NULL, TA_ORDER_ROW_MAJOR, host_in, &in, &err));
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &out, &err));
    ta_access acc[2] = { { in, TA_MODE_READ }, { out, TA_MODE_WRITE } };
    OK(ta_kernel_submit(checked_reciprocal, NULL, "checked_reciprocal", acc, 2, &o, NULL, &err)); /* fails later */
    OK(ta_scale(out, real(2.0), &o, NULL, &err));                 /* accepted: the failure is not known yet */
    OK(ta_copy_out(out, host_out, N, NULL, &o, &ev, &err));

    ta_status s = ta_event_wait(ev, TA_WAIT_FOREVER);
    ta_error *e = NULL;
    OK(ta_event_error(ev, &e));
    char msg[128] = "", origin[64] = "";
    int64_t code = 0;
    ta_error_message(e, msg, sizeof msg, NULL);
    ta_error_origin(e, origin, sizeof origin, NULL);
    ta_error_code(e, &code);
    printf("error: copy_out reported %s, started in '%s' (code %lld): %s\n",
           ta_status_name(s), origin, (long long)code, msg);

    if (s == TA_STATUS_KERNEL_FAILED && strcmp(origin, "checked_reciprocal") == 0 && code == 7 &&
        strcmp(msg, "element 3 is zero") == 0)
        printf("verified: the kernel's error reached a later reader unchanged\n");
    else {
        printf("MISMATCH: unexpected error (%s, '%s', %lld, '%s')\n", ta_status_name(s), origin,
               (long long)code, msg);
        failures++;
    }

    /* An overwrite produces a fresh, clean value. */
    OK(ta_fill(out, real(1.0), &o, NULL, &err));
    s = ta_tensor_wait(out, TA_WAIT_FOREVER, NULL);
    printf("error: after ta_fill the tensor is %s\n", ta_status_name(s));
    if (s != TA_STATUS_OK) failures++;

    ta_error_free(e);
    ta_event_free(ev);
    ta_tensor_free(in);
    ta_tensor_free(out);
}

int main(void) {
    printf("tensorasync %s\n", ta_version());
    size_t n = N;
    ta_error *err = NULL;
    OK(ta_runtime_new(0, &rt, &err)); /* 0: one worker per core */
    OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &total, &err));

    pthread_t tl, tr;
    pthread_create(&tl, NULL, left, NULL);
    pthread_create(&tr, NULL, right, NULL);
    pthread_join(tl, NULL);
    pthread_join(tr, NULL);

    /* Both threads have submitted their updates of `total`; this read comes after them. */
    double host_total[N];
    ta_cq *cq = NULL;
    OK(ta_cq_new(&cq, &err));
    ta_submit o = on_rt();
    o.cq = cq;
    o.cq_tag = 42;
    OK(ta_copy_out(total, host_total, N, NULL, &o, NULL, &err));

    /* Wait the way an event loop does: poll(2) on the queue's descriptor. */
    int fd = -1;
    OK(ta_cq_fd(cq, &fd));
    struct pollfd p = { fd, POLLIN, 0 };
    int ready = poll(&p, 1, 60000);
    ta_completion c[4];
    size_t got = 0;
    OK(ta_cq_poll(cq, c, 4, &got));
    printf("main:  fd %d readable (poll returned %d); took %zu completion(s): tag %llu, %s\n", fd,
           ready, got, got ? (unsigned long long)c[0].tag : 0ULL,
           got ? ta_status_name(c[0].status) : "-");
    if (ready != 1 || got != 1 || c[0].tag != 42 || c[0].status != TA_STATUS_OK) failures++;
    for (size_t i = 0; i < got; i++) ta_error_free(c[i].error);

    /* The callback of thread "left" has fired, or fires soon. */
    pthread_mutex_lock(&left_mu);
    while (!left_done) pthread_cond_wait(&left_cv, &left_mu);
    pthread_mutex_unlock(&left_mu);
    printf("left:  callback reported %s\n", ta_status_name(left_status));
    if (left_status != TA_STATUS_OK) failures++;

    double want[N];
    for (int i = 0; i < N; i++) {
        double x = 2.0 * host_x[i];
        want[i] = (x * x + 1.0) + (0.5 + 3.0 * host_w[i]);
    }
    verify("total (updated by both threads)", host_total, want);

    error_demo();

    ta_cq_free(cq);
    ta_tensor_free(total);
    ta_runtime_free(rt); /* drains, then stops the workers */

    if (failures) {
        printf("demo FAILED (%d mismatches)\n", failures);
        return 1;
    }
    printf("demo OK\n");
    return 0;
}
