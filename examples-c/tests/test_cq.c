/*
 * test_cq: the completion queue and its file descriptor (SPEC §2.6).
 *
 * The descriptor is not readable while the queue is empty, readable (poll(2)
 * with a 0 timeout) while entries are pending, still readable after a partial
 * ta_cq_poll, and not readable once ta_cq_poll has drained it. Batches come
 * out oldest first. poll(2) with a timeout wakes when an operation completes.
 * ta_event_notify on a completed event pushes its entry at once (with the
 * error of a failed one). Several queues and events can be used together.
 */
#include "check.h"

#include <poll.h>

#define CHAIN 23
#define BATCH 4

static ta_runtime *rt;
static gate g;

/* Readable now? (poll with timeout_ms; 0 = just look) */
static int readable(int fd, int timeout_ms) {
    struct pollfd p = { fd, POLLIN, 0 };
    int r = poll(&p, 1, timeout_ms);
    return r == 1 && (p.revents & POLLIN);
}

static ta_status fail_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ud;
    ta_kernel_set_error(ctx, "deliberate failure");
    return 5;
}

int main(void) {
    gate_init(&g);
    MUST(ta_runtime_new(2, &rt, NULL));
    ta_cq *cq = NULL;
    MUST(ta_cq_new(&cq, NULL));
    int fd = -1;
    MUST(ta_cq_fd(cq, &fd));
    CHECK(fd >= 0, "ta_cq_fd gave %d", fd);
    int fd2 = -2;
    MUST(ta_cq_fd(cq, &fd2));
    CHECK(fd2 == fd, "the descriptor changed between calls (%d, %d)", fd, fd2);

    /* Empty: not readable, and polling takes nothing. */
    CHECK(!readable(fd, 0), "fd readable while the queue is empty");
    ta_completion c[CHAIN + 4];
    size_t cnt = 99;
    MUST(ta_cq_poll(cq, c, CHAIN + 4, &cnt));
    CHECK(cnt == 0, "empty queue gave %zu entries", cnt);
    MUST(ta_cq_poll(cq, NULL, 0, &cnt));
    CHECK(cnt == 0, "cap 0 gave %zu entries", cnt);

    /* A chain of CHAIN updates of one tensor behind a blocker: they complete
     * in submission order, so entries must come out with tags 0, 1, 2, ... */
    ta_tensor *t = zeros1(TA_DTYPE_F64, 4);
    ta_submit o = on_runtime(rt);
    ta_access acc = { t, TA_MODE_UPDATE };
    MUST(ta_kernel_submit(gate_kernel, &g, "blocker", &acc, 1, &o, NULL, NULL));
    CHECK(gate_await_entered(&g, 1, 60), "the blocker did not start");
    ta_event *last = NULL;
    for (int k = 0; k < CHAIN; k++) {
        o = on_runtime(rt);
        o.cq = cq;
        o.cq_tag = 1000 + (uint64_t)k;
        MUST(ta_scale(t, real(2), &o, k == CHAIN - 1 ? &last : NULL, NULL));
    }
    CHECK(!readable(fd, 0), "fd readable while every operation is still pending");
    MUST(ta_cq_poll(cq, c, CHAIN + 4, &cnt));
    CHECK(cnt == 0, "%zu entries while pending", cnt);

    gate_open(&g);
    double t0 = now_s();
    CHECK(readable(fd, 60000), "fd did not become readable within 60 s of completion");
    printf("poll(2) woke %.1f ms after the blocker was released\n", 1e3 * (now_s() - t0));
    /* ta_event_wait on a program thread returns once the operation's
     * completion-queue entry has been posted, and the entries of the chain
     * before it were posted before it started (reports follow the edges).
     * (ta_tensor_wait would not do: a wait behind the last operation is
     * released before that operation's entry is pushed.) */
    MUST(ta_event_wait(last, SECONDS(60)));
    CHECK(readable(fd, 0), "fd not readable with %d entries pending", CHAIN);

    /* Take them in batches of BATCH: oldest first; readable until drained. */
    uint64_t next = 1000;
    int batches = 0;
    for (;;) {
        MUST(ta_cq_poll(cq, c, BATCH, &cnt));
        if (cnt == 0) break;
        batches++;
        CHECK(cnt <= BATCH, "batch of %zu entries exceeds the cap %d", cnt, BATCH);
        for (size_t i = 0; i < cnt; i++) {
            CHECK(c[i].tag == next, "entry tag %llu, expected %llu (oldest first)", (unsigned long long)c[i].tag,
                  (unsigned long long)next);
            CHECK(c[i].status == TA_STATUS_OK && c[i].error == NULL, "entry %llu: %s",
                  (unsigned long long)c[i].tag, ta_status_name(c[i].status));
            next++;
            ta_error_free(c[i].error);
        }
        int remaining = (int)(1000 + CHAIN - next);
        CHECK(readable(fd, 0) == (remaining > 0), "after a batch with %d entries left: fd readable = %d", remaining,
              readable(fd, 0));
    }
    CHECK(next == 1000 + CHAIN, "took %llu entries, want %d", (unsigned long long)(next - 1000), CHAIN);
    CHECK(batches == (CHAIN + BATCH - 1) / BATCH, "%d batches", batches);
    CHECK(!readable(fd, 0), "fd readable after the queue was drained");
    printf("%d entries taken in %d batches of at most %d, oldest first; fd readable exactly while pending\n", CHAIN,
           batches, BATCH);

    /* ta_event_notify on completed events pushes at once: success and failure. */
    ta_event *bad = NULL;
    ta_tensor *tf = zeros1(TA_DTYPE_F64, 4);
    ta_access facc = { tf, TA_MODE_UPDATE };
    o = on_runtime(rt);
    MUST(ta_kernel_submit(fail_kernel, NULL, "fail_kernel", &facc, 1, &o, &bad, NULL));
    CHECK_STATUS(wait_event(bad, 60), TA_STATUS_KERNEL_FAILED);
    CHECK(!readable(fd, 0), "fd readable before notify");
    MUST(ta_event_notify(last, cq, 7));
    CHECK(readable(fd, 0), "fd not readable right after ta_event_notify on a completed event");
    MUST(ta_event_notify(bad, cq, 8));
    MUST(ta_cq_poll(cq, c, CHAIN + 4, &cnt));
    CHECK(cnt == 2, "notify gave %zu entries", cnt);
    if (cnt == 2) {
        CHECK(c[0].tag == 7 && c[0].status == TA_STATUS_OK && c[0].error == NULL, "notify entry for a success");
        char msg[128];
        CHECK(c[1].tag == 8 && c[1].status == TA_STATUS_KERNEL_FAILED && c[1].error &&
                  err_status(c[1].error) == TA_STATUS_KERNEL_FAILED &&
                  strcmp(err_message(c[1].error, msg, sizeof msg), "deliberate failure") == 0,
              "notify entry for a failure: tag %llu, %s, '%s'", (unsigned long long)c[1].tag,
              ta_status_name(c[1].status), msg);
        ta_error *orig = event_error(bad);
        CHECK(err_same(orig, c[1].error) == 1, "the entry's error is not the operation's error object");
        ta_error_free(orig);
    }
    for (size_t i = 0; i < cnt; i++) ta_error_free(c[i].error);
    CHECK(!readable(fd, 0), "fd readable after draining the notify entries");

    /* ta_event_notify on a pending event pushes on completion; two queues at once. */
    gate g2;
    gate_init(&g2);
    ta_cq *cq2 = NULL;
    MUST(ta_cq_new(&cq2, NULL));
    int fdb = -1;
    MUST(ta_cq_fd(cq2, &fdb));
    CHECK(fdb != fd, "two queues share a descriptor");
    ta_event *pend = NULL;
    o = on_runtime(rt);
    o.cq = cq;
    o.cq_tag = 50;
    MUST(ta_kernel_submit(gate_kernel, &g2, "blocker2", &acc, 1, &o, &pend, NULL));
    MUST(ta_event_notify(pend, cq2, 51));
    CHECK(gate_await_entered(&g2, 1, 60), "the second blocker did not start");
    CHECK(!readable(fd, 0) && !readable(fdb, 0), "a queue became readable before the operation completed");
    gate_open(&g2);
    CHECK(readable(fd, 60000) && readable(fdb, 60000), "both queues readable after completion");
    MUST(ta_cq_poll(cq2, c, 4, &cnt));
    CHECK(cnt == 1 && c[0].tag == 51 && c[0].status == TA_STATUS_OK, "second queue entry");
    MUST(ta_cq_poll(cq, c, 4, &cnt));
    CHECK(cnt == 1 && c[0].tag == 50 && c[0].status == TA_STATUS_OK, "first queue entry");
    CHECK(!readable(fd, 0) && !readable(fdb, 0), "queues readable after draining");
    printf("ta_event_notify: immediate for completed events (with errors), deferred for pending ones\n");

    ta_event_free(pend);
    ta_event_free(last);
    ta_event_free(bad);
    ta_tensor_free(t);
    ta_tensor_free(tf);
    MUST(ta_cq_free(cq2));
    MUST(ta_cq_free(cq));
    MUST(ta_runtime_free(rt));
    gate_destroy(&g);
    gate_destroy(&g2);
    return finish("test_cq");
}
