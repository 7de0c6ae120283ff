/* Host access mappings: ta_tensor_acquire, ta_tensor_acquire_async,
 * ta_mapping_view, ta_mapping_free. */
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
    ta_kernel_set_error(ctx, "mapping test failure");
    return 3;
}

/* A kernel that tries to map a tensor it accesses itself. */
static ta_status self_map_kernel(const ta_view *views, size_t nviews, void *userdata, ta_kernel_ctx *ctx) {
    (void)views; (void)nviews; (void)ctx;
    void **args = (void **)userdata;
    ta_mapping *m = NULL;
    ta_status *out = (ta_status *)args[1];
    *out = ta_tensor_acquire((const ta_tensor *)args[0], TA_MODE_READ, TA_WAIT_FOREVER, &m, NULL);
    if (m) ta_mapping_free(m);
    return TA_STATUS_OK;
}

static void read4(const ta_tensor *t, double *out) { read_back(t, NULL, out, 4); }

int main(void) {
    double got[4];

    /* A granted READ mapping shows the data; a writer waits for it and runs after its free. */
    {
        ta_tensor *t = vec4(1, 2, 3, 4);
        ta_mapping *m = NULL;
        CHECK_STATUS(ta_tensor_acquire(t, TA_MODE_READ, SECONDS(60), &m, NULL), TA_STATUS_OK);
        ta_view v;
        CHECK_STATUS(ta_mapping_view(m, &v), TA_STATUS_OK);
        CHECK(v.rank == 1 && v.extents[0] == 4 && v.strides[0] == 1 && v.dtype == TA_DTYPE_F64 && v.mode == TA_MODE_READ
                  && v.domain == TA_DOMAIN_HOST && v.conj == 0, "read view geometry");
        const double *d = (const double *)v.data;
        CHECK(d[0] == 1 && d[1] == 2 && d[2] == 3 && d[3] == 4, "mapped data %g %g %g %g", d[0], d[1], d[2], d[3]);
        ta_event *fill = NULL;
        MUST(ta_fill(t, real(9), NULL, &fill, NULL));
        /* Readers are not held up by a live read mapping. */
        ta_mapping *m2 = NULL;
        CHECK_STATUS(ta_tensor_acquire(t, TA_MODE_WRITE, 0, &m2, NULL), TA_STATUS_TIMEOUT);
        CHECK(m2 == NULL, "a timed-out acquisition returns no mapping");
        CHECK_STATUS(ta_event_poll(fill), TA_STATUS_PENDING);
        CHECK_STATUS(ta_event_wait(fill, SECONDS(0.05)), TA_STATUS_TIMEOUT);
        CHECK(d[0] == 1 && d[3] == 4, "the data did not change under a live read mapping");
        CHECK_STATUS(ta_mapping_free(m), TA_STATUS_OK);
        CHECK_STATUS(wait_event(fill, 60), TA_STATUS_OK);
        ta_event_free(fill);
        read4(t, got);
        CHECK(got[0] == 9 && got[3] == 9, "the writer ran after the free: %g", got[0]);
        CHECK_STATUS(ta_mapping_free(m), TA_STATUS_DOUBLE_FREE);
        CHECK_STATUS(ta_mapping_view(m, &v), TA_STATUS_STALE_HANDLE);
        CHECK_STATUS(ta_mapping_free(NULL), TA_STATUS_OK);
        CHECK_STATUS(ta_mapping_view(NULL, &v), TA_STATUS_NULL_HANDLE);
        ta_tensor_free(t);
    }

    /* Readers (mappings and kernels) run beside a live read mapping. */
    {
        ta_tensor *t = vec4(1, 2, 3, 4);
        ta_mapping *m1 = NULL, *m2 = NULL;
        MUST(ta_tensor_acquire(t, TA_MODE_READ, SECONDS(60), &m1, NULL));
        CHECK_STATUS(ta_tensor_acquire(t, TA_MODE_READ, SECONDS(60), &m2, NULL), TA_STATUS_OK);
        ta_tensor *u = zeros1(TA_DTYPE_F64, 4);
        ta_event *cp = NULL;
        MUST(ta_copy(u, t, NULL, &cp, NULL));
        CHECK_STATUS(wait_event(cp, 60), TA_STATUS_OK);
        ta_event_free(cp);
        read4(u, got);
        CHECK(got[2] == 3, "a reader ran while read mappings lived: %g", got[2]);
        ta_mapping_free(m1);
        ta_mapping_free(m2);
        ta_tensor_free(u);
        ta_tensor_free(t);
    }

    /* A WRITE mapping's data is what later readers see; it cleans poison. */
    {
        ta_tensor *t = vec4(0, 0, 0, 0);
        ta_access a = { t, TA_MODE_WRITE };
        ta_event *fe = NULL;
        MUST(ta_kernel_submit(fail_kernel, NULL, "failing", &a, 1, NULL, &fe, NULL));
        ta_mapping *m = NULL;
        ta_error *e = NULL;
        CHECK_STATUS(ta_tensor_acquire(t, TA_MODE_READ, SECONDS(60), &m, &e), TA_STATUS_KERNEL_FAILED);
        CHECK(m == NULL, "a failed acquisition returns no mapping");
        ta_error *e_op = event_error(fe);
        CHECK(e && e_op && err_same(e, e_op) == 1, "the mapping fails with the failing operation's error object");
        char msg[64];
        CHECK(strcmp(err_message(e, msg, sizeof msg), "mapping test failure") == 0, "message: %s", msg);
        ta_error_free(e);
        e = NULL;
        CHECK_STATUS(ta_tensor_acquire(t, TA_MODE_UPDATE, SECONDS(60), &m, &e), TA_STATUS_KERNEL_FAILED);
        CHECK(e && err_same(e, e_op) == 1, "an UPDATE mapping fails with the same error");
        ta_error_free(e);
        ta_error_free(e_op);
        ta_event_free(fe);
        CHECK_STATUS(ta_tensor_acquire(t, TA_MODE_WRITE, SECONDS(60), &m, NULL), TA_STATUS_OK);
        ta_view v;
        MUST(ta_mapping_view(m, &v));
        CHECK(v.mode == TA_MODE_WRITE, "write view mode");
        double *d = (double *)v.data;
        for (int i = 0; i < 4; i++) d[i] = 10 + i;
        ta_mapping_free(m);
        CHECK_STATUS(ta_tensor_wait(t, SECONDS(60), NULL), TA_STATUS_OK);
        read4(t, got);
        CHECK(got[0] == 10 && got[1] == 11 && got[2] == 12 && got[3] == 13, "written data %g %g %g %g", got[0], got[1], got[2], got[3]);
        ta_tensor_free(t);
    }

    /* Timeout: nothing returned, and the access is released once granted. */
    {
        ta_tensor *t = vec4(1, 2, 3, 4);
        gate g;
        gate_init(&g);
        ta_access a = { t, TA_MODE_UPDATE };
        ta_event *w = NULL;
        MUST(ta_kernel_submit(gate_kernel, &g, "gated", &a, 1, NULL, &w, NULL));
        ta_mapping *m = NULL;
        ta_error *e = NULL;
        CHECK_STATUS(ta_tensor_acquire(t, TA_MODE_WRITE, SECONDS(0.02), &m, &e), TA_STATUS_TIMEOUT);
        CHECK(m == NULL, "no mapping on timeout");
        CHECK(err_status(e) == TA_STATUS_TIMEOUT, "timeout error object");
        ta_error_free(e);
        ta_event *fill = NULL;
        MUST(ta_fill(t, real(5), NULL, &fill, NULL));
        gate_open(&g);
        CHECK_STATUS(wait_event(w, 60), TA_STATUS_OK);
        CHECK_STATUS(wait_event(fill, 60), TA_STATUS_OK);
        CHECK_STATUS(ta_tensor_wait(t, SECONDS(60), NULL), TA_STATUS_OK);
        read4(t, got);
        CHECK(got[0] == 5, "the later writer ran: %g", got[0]);
        ta_event_free(w);
        ta_event_free(fill);
        gate_destroy(&g);
        ta_tensor_free(t);
    }

    /* The asynchronous form. */
    {
        ta_tensor *t = vec4(1, 2, 3, 4);
        gate g;
        gate_init(&g);
        ta_access a = { t, TA_MODE_UPDATE };
        MUST(ta_kernel_submit(gate_kernel, &g, "gated", &a, 1, NULL, NULL, NULL));
        ta_mapping *m = NULL;
        ta_event *ev = NULL;
        CHECK_STATUS(ta_tensor_acquire_async(t, TA_MODE_UPDATE, &m, &ev, NULL), TA_STATUS_OK);
        ta_view v;
        CHECK_STATUS(ta_mapping_view(m, &v), TA_STATUS_PENDING);
        CHECK_STATUS(ta_event_poll(ev), TA_STATUS_PENDING);
        gate_open(&g);
        CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
        CHECK_STATUS(ta_mapping_view(m, &v), TA_STATUS_OK);
        ((double *)v.data)[1] = 20;
        ta_mapping_free(m);
        ta_event_free(ev);
        read4(t, got);
        CHECK(got[0] == 1 && got[1] == 20, "update mapping data %g %g", got[0], got[1]);
        gate_destroy(&g);

        /* Freed before the grant: released when granted, nothing committed. */
        gate g2;
        gate_init(&g2);
        MUST(ta_kernel_submit(gate_kernel, &g2, "gated", &a, 1, NULL, NULL, NULL));
        MUST(ta_tensor_acquire_async(t, TA_MODE_WRITE, &m, NULL, NULL));
        ta_mapping_free(m);
        ta_event *fill = NULL;
        MUST(ta_fill(t, real(7), NULL, &fill, NULL));
        gate_open(&g2);
        CHECK_STATUS(wait_event(fill, 60), TA_STATUS_OK);
        ta_event_free(fill);
        gate_destroy(&g2);

        /* Poisoned: the event fails, the view gives the status. */
        ta_access w = { t, TA_MODE_WRITE };
        MUST(ta_kernel_submit(fail_kernel, NULL, "failing", &w, 1, NULL, NULL, NULL));
        MUST(ta_tensor_acquire_async(t, TA_MODE_READ, &m, &ev, NULL));
        CHECK_STATUS(wait_event(ev, 60), TA_STATUS_KERNEL_FAILED);
        CHECK_STATUS(ta_mapping_view(m, &v), TA_STATUS_KERNEL_FAILED);
        ta_error *e = event_error(ev);
        char msg[64];
        CHECK(strcmp(err_message(e, msg, sizeof msg), "mapping test failure") == 0, "async failure message: %s", msg);
        ta_error_free(e);
        ta_mapping_free(m);
        ta_event_free(ev);
        ta_tensor_free(t);
    }

    /* Views: the mapping is of the view's elements only. */
    {
        size_t ext[2] = { 3, 4 };
        ta_tensor *t = zeros(TA_DTYPE_F64, 2, ext);
        ta_slice s[2] = { { 1, 3, 1, 0 }, { 0, 4, 2, 0 } };
        ta_tensor *vw = NULL;
        MUST(ta_tensor_slice(t, s, 2, &vw, NULL));
        ta_mapping *m = NULL;
        MUST(ta_tensor_acquire(vw, TA_MODE_WRITE, SECONDS(60), &m, NULL));
        ta_view v;
        MUST(ta_mapping_view(m, &v));
        CHECK(v.rank == 2 && v.extents[0] == 2 && v.extents[1] == 2 && v.strides[0] == 4 && v.strides[1] == 2,
              "view geometry %zu %zu %td %td", v.extents[0], v.extents[1], v.strides[0], v.strides[1]);
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; j < 2; j++) ((double *)v.data)[(ptrdiff_t)i * v.strides[0] + (ptrdiff_t)j * v.strides[1]] = 1 + (double)(2 * i + j);
        ta_mapping_free(m);
        double all[12];
        read_back(t, NULL, all, 12);
        double want[12] = { 0, 0, 0, 0, 1, 0, 2, 0, 3, 0, 4, 0 };
        int same = 1;
        for (int i = 0; i < 12; i++) same &= all[i] == want[i];
        CHECK(same, "writes through a strided view mapping land on the view's elements");
        ta_tensor_free(vw);
        ta_tensor_free(t);
    }

    /* Submission-time statuses. */
    {
        ta_tensor *u = NULL;
        MUST(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &u, NULL));
        ta_mapping *m = NULL;
        CHECK_STATUS(ta_tensor_acquire(u, TA_MODE_READ, 0, &m, NULL), TA_STATUS_UNCONSTRUCTED);
        ta_tensor_free(u);
        double c[2] = { 1, 2 };
        size_t n2 = 2;
        ta_tensor *ro = NULL;
        MUST(ta_tensor_wrap_const(TA_DTYPE_F64, 1, &n2, NULL, TA_ORDER_ROW_MAJOR, c, NULL, NULL, &ro, NULL));
        CHECK_STATUS(ta_tensor_acquire(ro, TA_MODE_WRITE, 0, &m, NULL), TA_STATUS_READ_ONLY);
        CHECK_STATUS(ta_tensor_acquire(ro, TA_MODE_UPDATE, 0, &m, NULL), TA_STATUS_READ_ONLY);
        CHECK_STATUS(ta_tensor_acquire(ro, 9, 0, &m, NULL), TA_STATUS_INVALID_ARGUMENT);
        CHECK_STATUS(ta_tensor_acquire(ro, TA_MODE_READ, SECONDS(60), NULL, NULL), TA_STATUS_NULL_POINTER);
        CHECK_STATUS(ta_tensor_acquire_async(ro, TA_MODE_WRITE, &m, NULL, NULL), TA_STATUS_READ_ONLY);
        CHECK_STATUS(ta_tensor_acquire(ro, TA_MODE_READ, SECONDS(60), &m, NULL), TA_STATUS_OK);
        ta_view v;
        MUST(ta_mapping_view(m, &v));
        CHECK(((const double *)v.data)[1] == 2, "read mapping of wrapped const memory");
        ta_mapping_free(m);
        ta_tensor_free(ro);
        CHECK_STATUS(ta_tensor_acquire(ro, TA_MODE_READ, 0, &m, NULL), TA_STATUS_STALE_HANDLE);
        CHECK_STATUS(ta_tensor_acquire(NULL, TA_MODE_READ, 0, &m, NULL), TA_STATUS_NULL_HANDLE);
    }

    /* From a kernel, on a tensor the kernel accesses: WOULD_DEADLOCK. */
    {
        ta_tensor *t = vec4(1, 2, 3, 4);
        ta_status inner = TA_STATUS_INTERNAL;
        void *args[2] = { t, &inner };
        ta_access a = { t, TA_MODE_UPDATE };
        ta_event *ev = NULL;
        MUST(ta_kernel_submit(self_map_kernel, args, "self-map", &a, 1, NULL, &ev, NULL));
        CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
        CHECK_STATUS(inner, TA_STATUS_WOULD_DEADLOCK);
        ta_event_free(ev);
        ta_tensor_free(t);
    }

    /* An idle tensor is granted at once: a zero-timeout acquire succeeds every
     * time, and the async form's event is complete when the call returns. */
    {
        ta_tensor *t = vec4(1, 2, 3, 4);
        int late = 0, pending = 0;
        for (int k = 0; k < 200; k++) {
            ta_mapping *m = NULL;
            ta_mode mode = (k & 1) ? TA_MODE_UPDATE : TA_MODE_READ;
            if (ta_tensor_acquire(t, mode, 0, &m, NULL) != TA_STATUS_OK) late++;
            ta_mapping_free(m);
            ta_event *ev = NULL;
            MUST(ta_tensor_acquire_async(t, mode, &m, &ev, NULL));
            if (ta_event_poll(ev) != TA_STATUS_OK) pending++;
            ta_event_free(ev);
            ta_mapping_free(m);
        }
        CHECK(late == 0, "%d of 200 zero-timeout acquires of an idle tensor timed out", late);
        CHECK(pending == 0, "%d of 200 async acquires of an idle tensor were not granted at once", pending);
        ta_tensor_free(t);
    }

    return finish("test_mapping");
}
