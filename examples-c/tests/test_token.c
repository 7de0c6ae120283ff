/* Deferred completion (ta_kernel_defer) and external operations
 * (ta_external_submit, ta_token_views, ta_token_finish). */
#include "check.h"

static ta_tensor *vec4(double a, double b, double c, double d) {
    double v[4] = { a, b, c, d };
    size_t n = 4;
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, &n, NULL, TA_ORDER_ROW_MAJOR, v, &t, NULL));
    return t;
}

static ta_status fail_kernel(const ta_view *views, size_t nviews, void *userdata, ta_kernel_ctx *ctx) {
    (void)views; (void)nviews; (void)userdata;
    ta_kernel_set_error(ctx, "upstream failure");
    return 3;
}

/* A thread that doubles the token's one view and finishes the token. */
typedef struct job {
    ta_token *token;
    ta_status views_status, finish_status;
} job;

static void *finisher(void *arg) {
    job *j = (job *)arg;
    ta_view v[2];
    size_t n = 0;
    j->views_status = ta_token_views(j->token, v, 2, &n);
    if (j->views_status == TA_STATUS_OK && n == 1) {
        double *d = (double *)v[0].data;
        for (size_t i = 0; i < v[0].extents[0]; i++) d[i * (size_t)v[0].strides[0]] *= 2;
    }
    j->finish_status = ta_token_finish(j->token, TA_STATUS_OK, NULL);
    return NULL;
}

/* A kernel that defers: hands its token out through userdata. */
typedef struct deferral {
    ta_token *token;
    ta_status second;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} deferral;

static ta_status deferring_kernel(const ta_view *views, size_t nviews, void *userdata, ta_kernel_ctx *ctx) {
    (void)views; (void)nviews;
    deferral *d = (deferral *)userdata;
    ta_token *tok = NULL;
    ta_status s = ta_kernel_defer(ctx, &tok);
    ta_token *again = NULL;
    d->second = ta_kernel_defer(ctx, &again);
    pthread_mutex_lock(&d->mu);
    d->token = s == TA_STATUS_OK ? tok : NULL;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    return 99; /* ignored once deferred */
}

/* A kernel that defers and finishes its own token before it returns. */
static ta_status self_finishing_kernel(const ta_view *views, size_t nviews, void *userdata, ta_kernel_ctx *ctx) {
    (void)nviews;
    ta_status *out = (ta_status *)userdata;
    ta_token *tok = NULL;
    out[0] = ta_kernel_defer(ctx, &tok);
    ((double *)views[0].data)[0] = 123;
    out[1] = ta_token_finish(tok, 9, "finished inside the kernel");
    return TA_STATUS_OK; /* ignored: the token's status counts */
}

static size_t g_released;
static void on_release(void *ud, void *data) { (void)ud; (void)data; atomic_inc((long *)&g_released); }

static void read4(const ta_tensor *t, double *out) { read_back(t, NULL, out, 4); }

int main(void) {
    double got[4];

    /* Finished from another thread; a later writer waits for the token. */
    {
        ta_tensor *t = vec4(1, 2, 3, 4);
        ta_access a = { t, TA_MODE_UPDATE };
        job j = { NULL, 0, 0 };
        ta_event *started = NULL, *done = NULL;
        CHECK_STATUS(ta_external_submit(&a, 1, "ext", NULL, &j.token, &started, &done, NULL), TA_STATUS_OK);
        CHECK_STATUS(wait_event(started, 60), TA_STATUS_OK);
        /* A reader, then a writer, both behind the external operation. */
        double mid[4] = { 0 };
        ta_event *co = NULL;
        MUST(ta_copy_out(t, mid, 4, NULL, NULL, &co, NULL));
        ta_event *fill = NULL;
        MUST(ta_fill(t, real(0), NULL, &fill, NULL));
        CHECK_STATUS(ta_event_poll(done), TA_STATUS_PENDING);
        CHECK_STATUS(ta_event_wait(fill, SECONDS(0.05)), TA_STATUS_TIMEOUT);
        ta_view v;
        size_t n = 0;
        CHECK_STATUS(ta_token_views(j.token, &v, 0, &n), TA_STATUS_BUFFER_TOO_SMALL);
        CHECK(n == 1, "count on a small buffer: %zu", n);
        CHECK_STATUS(ta_event_poll(co), TA_STATUS_PENDING);
        pthread_t th;
        pthread_create(&th, NULL, finisher, &j);
        pthread_join(th, NULL);
        CHECK_STATUS(j.views_status, TA_STATUS_OK);
        CHECK_STATUS(j.finish_status, TA_STATUS_OK);
        CHECK_STATUS(wait_event(done, 60), TA_STATUS_OK);
        CHECK_STATUS(wait_event(co, 60), TA_STATUS_OK);
        CHECK_STATUS(wait_event(fill, 60), TA_STATUS_OK);
        ta_event_free(fill);
        CHECK(mid[0] == 2 && mid[1] == 4 && mid[2] == 6 && mid[3] == 8, "external writes seen by the next reader: %g %g %g %g", mid[0], mid[1], mid[2], mid[3]);
        read4(t, got);
        CHECK(got[0] == 0 && got[3] == 0, "the later fill ran after the token: %g", got[0]);
        CHECK_STATUS(ta_token_finish(j.token, TA_STATUS_OK, NULL), TA_STATUS_DOUBLE_FREE);
        CHECK_STATUS(ta_token_views(j.token, &v, 1, &n), TA_STATUS_STALE_HANDLE);
        ta_event_free(started);
        ta_event_free(done);
        ta_event_free(co);
        ta_tensor_free(t);
    }

    /* A failure: outputs poisoned with KERNEL_FAILED, the status as code, the message, the name as origin. */
    {
        ta_tensor *t = vec4(1, 2, 3, 4);
        ta_access a = { t, TA_MODE_WRITE };
        ta_token *tok = NULL;
        ta_event *started = NULL, *done = NULL;
        MUST(ta_external_submit(&a, 1, "mpi_recv", NULL, &tok, &started, &done, NULL));
        CHECK_STATUS(wait_event(started, 60), TA_STATUS_OK);
        CHECK_STATUS(ta_token_finish(tok, 7, "message truncated"), TA_STATUS_OK);
        CHECK_STATUS(wait_event(done, 60), TA_STATUS_KERNEL_FAILED);
        ta_error *e = event_error(done);
        char msg[64], origin[64];
        int64_t code = 0;
        ta_error_code(e, &code);
        CHECK(strcmp(err_message(e, msg, sizeof msg), "message truncated") == 0, "message %s", msg);
        CHECK(strcmp(err_origin(e, origin, sizeof origin), "mpi_recv") == 0, "origin %s", origin);
        CHECK(code == 7, "code %lld", (long long)code);
        ta_error *te = NULL;
        CHECK_STATUS(ta_tensor_wait(t, SECONDS(60), &te), TA_STATUS_KERNEL_FAILED);
        CHECK(err_same(e, te) == 1, "the output is poisoned with the operation's error");
        ta_error_free(te);
        ta_error_free(e);
        ta_event_free(started);
        ta_event_free(done);

        /* Poisoned input before the start: started and the operation fail; finish is OK. */
        ta_access r = { t, TA_MODE_READ };
        MUST(ta_external_submit(&r, 1, "ext_read", NULL, &tok, &started, &done, NULL));
        CHECK_STATUS(wait_event(started, 60), TA_STATUS_KERNEL_FAILED);
        CHECK_STATUS(wait_event(done, 60), TA_STATUS_KERNEL_FAILED);
        ta_view v;
        size_t n = 0;
        CHECK_STATUS(ta_token_views(tok, &v, 1, &n), TA_STATUS_KERNEL_FAILED);
        ta_error *es = event_error(started), *ed = event_error(done);
        CHECK(err_same(es, ed) == 1, "started and the operation report the input's error");
        CHECK(strcmp(err_message(ed, msg, sizeof msg), "message truncated") == 0, "propagated message %s", msg);
        ta_error_free(es);
        ta_error_free(ed);
        CHECK_STATUS(ta_token_finish(tok, TA_STATUS_OK, NULL), TA_STATUS_OK);
        ta_event_free(started);
        ta_event_free(done);
        ta_tensor_free(t);
    }

    /* Poisoned by a kernel, then read by an external operation. */
    {
        ta_tensor *t = vec4(1, 2, 3, 4), *out = vec4(0, 0, 0, 0);
        ta_access w = { t, TA_MODE_WRITE };
        ta_event *fe = NULL;
        MUST(ta_kernel_submit(fail_kernel, NULL, "failing", &w, 1, NULL, &fe, NULL));
        ta_access a[2] = { { t, TA_MODE_READ }, { out, TA_MODE_WRITE } };
        ta_token *tok = NULL;
        ta_event *started = NULL;
        MUST(ta_external_submit(a, 2, "send", NULL, &tok, &started, NULL, NULL));
        CHECK_STATUS(wait_event(started, 60), TA_STATUS_KERNEL_FAILED);
        ta_error *e1 = event_error(fe), *e2 = NULL;
        CHECK_STATUS(ta_tensor_wait(out, SECONDS(60), &e2), TA_STATUS_KERNEL_FAILED);
        CHECK(err_same(e1, e2) == 1, "the output carries the input's error");
        ta_error_free(e1);
        ta_error_free(e2);
        CHECK_STATUS(ta_token_finish(tok, TA_STATUS_OK, NULL), TA_STATUS_OK);
        ta_event_free(fe);
        ta_event_free(started);
        ta_tensor_free(t);
        ta_tensor_free(out);
    }

    /* Finished before the start: completes once granted. */
    {
        ta_tensor *t = vec4(1, 2, 3, 4);
        gate g;
        gate_init(&g);
        ta_access a = { t, TA_MODE_UPDATE };
        MUST(ta_kernel_submit(gate_kernel, &g, "gated", &a, 1, NULL, NULL, NULL));
        ta_token *tok = NULL;
        ta_event *started = NULL, *done = NULL;
        MUST(ta_external_submit(&a, 1, "early", NULL, &tok, &started, &done, NULL));
        CHECK_STATUS(ta_event_poll(started), TA_STATUS_PENDING);
        CHECK_STATUS(ta_token_finish(tok, TA_STATUS_OK, NULL), TA_STATUS_OK);
        CHECK_STATUS(ta_event_poll(done), TA_STATUS_PENDING);
        gate_open(&g);
        CHECK_STATUS(wait_event(done, 60), TA_STATUS_OK);
        CHECK_STATUS(ta_event_poll(started), TA_STATUS_OK);
        ta_event_free(started);
        ta_event_free(done);
        gate_destroy(&g);
        ta_tensor_free(t);
    }

    /* A kernel that defers its completion. */
    {
        ta_tensor *t = vec4(1, 2, 3, 4);
        deferral d;
        memset(&d, 0, sizeof d);
        pthread_mutex_init(&d.mu, NULL);
        pthread_cond_init(&d.cv, NULL);
        ta_access a = { t, TA_MODE_UPDATE };
        ta_event *ev = NULL;
        MUST(ta_kernel_submit(deferring_kernel, &d, "deferring", &a, 1, NULL, &ev, NULL));
        pthread_mutex_lock(&d.mu);
        while (!d.token) pthread_cond_wait(&d.cv, &d.mu);
        pthread_mutex_unlock(&d.mu);
        CHECK_STATUS(d.second, TA_STATUS_INVALID_ARGUMENT);
        ta_event *fill = NULL;
        MUST(ta_fill(t, real(1), NULL, &fill, NULL));
        CHECK_STATUS(ta_event_wait(ev, SECONDS(0.05)), TA_STATUS_TIMEOUT);
        CHECK_STATUS(ta_event_poll(fill), TA_STATUS_PENDING);
        job j = { d.token, 0, 0 };
        pthread_t th;
        pthread_create(&th, NULL, finisher, &j);
        pthread_join(th, NULL);
        CHECK_STATUS(j.views_status, TA_STATUS_OK);
        CHECK_STATUS(j.finish_status, TA_STATUS_OK);
        CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
        CHECK_STATUS(wait_event(fill, 60), TA_STATUS_OK);
        read4(t, got);
        CHECK(got[0] == 1 && got[3] == 1, "the fill after the deferred kernel: %g", got[0]);
        ta_event_free(ev);
        ta_event_free(fill);
        ta_tensor_free(t);
        CHECK_STATUS(ta_kernel_defer(NULL, &d.token), TA_STATUS_NULL_HANDLE);
        pthread_mutex_destroy(&d.mu);
        pthread_cond_destroy(&d.cv);
    }

    /* A token finished before its kernel returned: the operation completes with the token's status. */
    {
        ta_tensor *t = vec4(1, 2, 3, 4);
        ta_status st[2] = { TA_STATUS_INTERNAL, TA_STATUS_INTERNAL };
        ta_access a = { t, TA_MODE_UPDATE };
        ta_event *ev = NULL;
        MUST(ta_kernel_submit(self_finishing_kernel, st, "self_finishing", &a, 1, NULL, &ev, NULL));
        CHECK_STATUS(wait_event(ev, 60), TA_STATUS_KERNEL_FAILED);
        CHECK_STATUS(st[0], TA_STATUS_OK);
        CHECK_STATUS(st[1], TA_STATUS_OK);
        ta_error *e = event_error(ev);
        char msg[64];
        int64_t code = 0;
        ta_error_code(e, &code);
        CHECK(code == 9 && strcmp(err_message(e, msg, sizeof msg), "finished inside the kernel") == 0, "early finish: code %lld, %s",
              (long long)code, msg);
        ta_error_free(e);
        ta_event_free(ev);
        ta_tensor_free(t);
    }

    /* Shutdown with cancel: completed as cancelled, storage kept until the finish. */
    {
        ta_runtime *rt = NULL;
        MUST(ta_runtime_new(1, &rt, NULL));
        ta_submit o = on_runtime(rt);
        double *mem = calloc(4, sizeof *mem);
        size_t n4 = 4;
        ta_tensor *t = NULL;
        MUST(ta_tensor_wrap(TA_DTYPE_F64, 1, &n4, NULL, TA_ORDER_ROW_MAJOR, mem, on_release, NULL, &t, NULL));
        ta_access a = { t, TA_MODE_WRITE };
        ta_token *tok = NULL;
        ta_event *started = NULL, *done = NULL;
        MUST(ta_external_submit(&a, 1, "irecv", &o, &tok, &started, &done, NULL));
        CHECK_STATUS(wait_event(started, 60), TA_STATUS_OK);
        ta_view v;
        size_t n = 0;
        MUST(ta_token_views(tok, &v, 1, &n));
        ta_event *later = NULL;
        MUST(ta_fill(t, real(3), &o, &later, NULL));
        CHECK_STATUS(ta_runtime_shutdown(rt, TA_SHUTDOWN_CANCEL, NULL), TA_STATUS_OK);
        CHECK_STATUS(ta_event_poll(done), TA_STATUS_CANCELLED);
        CHECK_STATUS(ta_event_poll(later), TA_STATUS_CANCELLED);
        ta_tensor_free(t);
        /* The external work may still write: the memory is still the tensor's. */
        ((double *)v.data)[0] = 42;
        CHECK(atomic_get((long *)&g_released) == 0, "wrapped memory released before the token was finished");
        CHECK_STATUS(ta_token_finish(tok, TA_STATUS_OK, NULL), TA_STATUS_ALREADY_FINISHED);
        CHECK(atomic_get((long *)&g_released) == 1, "wrapped memory released once the token is finished (%ld)", atomic_get((long *)&g_released));
        CHECK_STATUS(ta_token_finish(tok, TA_STATUS_OK, NULL), TA_STATUS_DOUBLE_FREE);
        ta_event_free(started);
        ta_event_free(done);
        ta_event_free(later);
        ta_runtime_free(rt);
        free(mem);
    }

    /* Argument checks. */
    {
        ta_tensor *t = vec4(1, 2, 3, 4);
        ta_access a = { t, 9 };
        ta_token *tok = NULL;
        CHECK_STATUS(ta_external_submit(&a, 1, NULL, NULL, &tok, NULL, NULL, NULL), TA_STATUS_INVALID_ARGUMENT);
        ta_access b[2] = { { t, TA_MODE_READ }, { t, TA_MODE_WRITE } };
        CHECK_STATUS(ta_external_submit(b, 2, NULL, NULL, &tok, NULL, NULL, NULL), TA_STATUS_ALIAS);
        CHECK_STATUS(ta_external_submit(b, 1, NULL, NULL, NULL, NULL, NULL, NULL), TA_STATUS_NULL_POINTER);
        CHECK_STATUS(ta_token_finish(NULL, TA_STATUS_OK, NULL), TA_STATUS_NULL_HANDLE);
        ta_tensor_free(t);
    }

    return finish("test_token");
}
