/* ta_tensor_wrap_ex: the release of wrapped memory reported through a
 * completion queue (and/or a callback), read-only wrapping by flag. */
#include "check.h"

#include <poll.h>

static long g_calls;
static void *g_data;
static void on_release(void *ud, void *data) {
    atomic_inc((long *)ud);
    g_data = data;
}

static int readable(int fd) {
    struct pollfd p = { fd, POLLIN, 0 };
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

int main(void) {
    ta_cq *cq = NULL;
    MUST(ta_cq_new(&cq, NULL));
    int fd = -1;
    MUST(ta_cq_fd(cq, &fd));
    double mem[4] = { 1, 2, 3, 4 };
    size_t n4 = 4;

    /* Release through the queue only, after the last access. */
    {
        ta_wrap_options o;
        memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        o.release_cq = cq;
        o.release_tag = 77;
        ta_tensor *t = NULL;
        CHECK_STATUS(ta_tensor_wrap_ex(TA_DTYPE_F64, 1, &n4, NULL, TA_ORDER_ROW_MAJOR, mem, &o, &t, NULL), TA_STATUS_OK);
        gate g;
        gate_init(&g);
        ta_access a = { t, TA_MODE_UPDATE };
        ta_event *ev = NULL;
        MUST(ta_kernel_submit(gate_kernel, &g, "gated", &a, 1, NULL, &ev, NULL));
        ta_tensor_free(t);
        ta_completion c;
        size_t n = 5;
        MUST(ta_cq_poll(cq, &c, 1, &n));
        CHECK(n == 0 && !readable(fd), "no release entry while an access is pending");
        gate_open(&g);
        CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
        struct pollfd p = { fd, POLLIN, 0 };
        CHECK(poll(&p, 1, 60000) == 1, "the queue becomes readable");
        MUST(ta_cq_poll(cq, &c, 1, &n));
        CHECK(n == 1 && c.tag == 77 && c.status == TA_STATUS_OK && c.error == NULL, "release entry {%llu, %u}",
              (unsigned long long)c.tag, (unsigned)c.status);
        ta_event_free(ev);
        gate_destroy(&g);
    }

    /* Both a callback and an entry; READ_ONLY by flag. */
    {
        ta_wrap_options o;
        memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        o.flags = TA_WRAP_READ_ONLY;
        o.release = on_release;
        o.release_userdata = &g_calls;
        o.release_cq = cq;
        o.release_tag = 5;
        ta_tensor *t = NULL;
        MUST(ta_tensor_wrap_ex(TA_DTYPE_F64, 1, &n4, NULL, TA_ORDER_ROW_MAJOR, mem, &o, &t, NULL));
        int32_t ro = 0;
        MUST(ta_tensor_is_read_only(t, &ro));
        CHECK(ro == 1, "TA_WRAP_READ_ONLY gives a read-only tensor");
        CHECK_STATUS(ta_fill(t, real(0), NULL, NULL, NULL), TA_STATUS_READ_ONLY);
        double out[4] = { 0 };
        read_back(t, NULL, out, 4);
        CHECK(out[3] == 4, "read through the wrap: %g", out[3]);
        ta_tensor_free(t);
        CHECK(atomic_get(&g_calls) == 1 && g_data == mem, "the callback ran once with the data pointer");
        ta_completion c;
        size_t n = 0;
        MUST(ta_cq_poll(cq, &c, 1, &n));
        CHECK(n == 1 && c.tag == 5, "and the entry was queued");
    }

    /* NULL options: writable, no notification. */
    {
        ta_tensor *t = NULL;
        MUST(ta_tensor_wrap_ex(TA_DTYPE_F64, 1, &n4, NULL, TA_ORDER_ROW_MAJOR, mem, NULL, &t, NULL));
        ta_event *ev = NULL;
        MUST(ta_fill(t, real(6), NULL, &ev, NULL));
        CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
        ta_event_free(ev);
        ta_tensor_free(t);
        CHECK(mem[0] == 6 && mem[3] == 6, "writes land in the user's memory: %g", mem[0]);
        ta_completion c;
        size_t n = 0;
        MUST(ta_cq_poll(cq, &c, 1, &n));
        CHECK(n == 0, "nothing queued");
    }

    /* Bad options: nothing called, nothing queued. */
    {
        ta_wrap_options o;
        memset(&o, 0, sizeof o);
        o.struct_size = 8;
        o.release = on_release;
        o.release_userdata = &g_calls;
        ta_tensor *t = NULL;
        CHECK_STATUS(ta_tensor_wrap_ex(TA_DTYPE_F64, 1, &n4, NULL, TA_ORDER_ROW_MAJOR, mem, &o, &t, NULL), TA_STATUS_INVALID_ARGUMENT);
        o.struct_size = sizeof o;
        o.flags = 0x10;
        CHECK_STATUS(ta_tensor_wrap_ex(TA_DTYPE_F64, 1, &n4, NULL, TA_ORDER_ROW_MAJOR, mem, &o, &t, NULL), TA_STATUS_INVALID_ARGUMENT);
        o.flags = 0;
        CHECK_STATUS(ta_tensor_wrap_ex(TA_DTYPE_F64, 1, &n4, NULL, TA_ORDER_ROW_MAJOR, NULL, &o, &t, NULL), TA_STATUS_NULL_POINTER);
        CHECK(t == NULL && atomic_get(&g_calls) == 1, "a failed wrap calls nothing");
    }

    ta_cq_free(cq);
    return finish("test_wrap_ex");
}
