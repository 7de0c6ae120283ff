/*
 * test_faults: callbacks that free the handle they were called for, and
 * exit() from main while operations are pending.
 *
 * 1. A ta_event_on_complete callback frees the event handle it was attached
 *    to: deferred (the operation is held by a gated kernel, so the callback
 *    runs on a worker) and immediate (the operation has completed, so the
 *    callback runs inside ta_event_on_complete). The handle is gone after
 *    the callback (STALE_HANDLE), and the library keeps running.
 * 2. A submission callback frees the tensor handle its operation was
 *    submitted on, while later operations on that tensor are still queued
 *    (they keep the value alive): each of those completes OK, and copy_out
 *    through a shared handle sees their result.
 * 3. A child process submits 10^4 operations with callbacks (kernels that
 *    take a little time, so most are pending) and calls exit(0) from main
 *    without waiting. The parent waits for it (at most 120 s): it must exit
 *    normally with status 0, neither crash nor hang. A second child does the
 *    same while a kernel is blocked forever at a gate that never opens.
 */
#include "check.h"

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static gate g;

/* ---- 1: a callback that frees its event handle ---------------------------- */

typedef struct {
    ta_event *ev;
    long calls;
    ta_status status;
    ta_status free_status;
} ev_box;

static void free_own_event(ta_status status, void *userdata) {
    ev_box *b = userdata;
    b->status = status;
    b->free_status = ta_event_free(b->ev);
    atomic_inc(&b->calls);
}

static void callback_frees_its_event(void) {
    size_t ext[1] = {8};
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, ext, TA_ORDER_ROW_MAJOR, &t, NULL));

    /* Deferred: the event completes on a worker after the gate opens. */
    gate_init(&g);
    ta_access acc = {t, TA_MODE_UPDATE};
    ta_event *held = NULL;
    MUST(ta_kernel_submit(gate_kernel, &g, "held", &acc, 1, NULL, &held, NULL));
    ev_box deferred = {NULL, 0, 0xffffffffu, 0xffffffffu};
    MUST(ta_fill(t, (ta_scalar){3.0, 0.0}, NULL, &deferred.ev, NULL));
    MUST(ta_event_on_complete(deferred.ev, free_own_event, &deferred));
    CHECK(gate_await_entered(&g, 1, 30.0), "the gated kernel never started");
    CHECK(atomic_get(&deferred.calls) == 0, "the callback ran before its operation");
    gate_open(&g);
    CHECK_STATUS(ta_event_wait(held, SECONDS(30)), TA_STATUS_OK);
    MUST(ta_event_free(held));
    CHECK_STATUS(ta_tensor_wait(t, SECONDS(30), NULL), TA_STATUS_OK);
    for (int i = 0; i < 3000 && atomic_get(&deferred.calls) == 0; i++) sleep_ms(10);
    CHECK(atomic_get(&deferred.calls) == 1, "deferred callback ran %ld times", atomic_get(&deferred.calls));
    CHECK_STATUS(deferred.status, TA_STATUS_OK);
    CHECK_STATUS(deferred.free_status, TA_STATUS_OK);
    CHECK_STATUS(ta_event_poll(deferred.ev), TA_STATUS_STALE_HANDLE);
    gate_destroy(&g);

    /* Immediate: the operation has completed, the callback runs in the call. */
    ev_box now = {NULL, 0, 0xffffffffu, 0xffffffffu};
    MUST(ta_scale(t, (ta_scalar){2.0, 0.0}, NULL, &now.ev, NULL));
    CHECK_STATUS(ta_event_wait(now.ev, SECONDS(30)), TA_STATUS_OK);
    CHECK_STATUS(ta_event_on_complete(now.ev, free_own_event, &now), TA_STATUS_OK);
    CHECK(now.calls == 1, "immediate callback ran %ld times", now.calls);
    CHECK_STATUS(now.free_status, TA_STATUS_OK);
    CHECK_STATUS(ta_event_free(now.ev), TA_STATUS_DOUBLE_FREE);

    double out[8];
    ta_event *ev = NULL;
    MUST(ta_copy_out(t, out, 8, NULL, NULL, &ev, NULL));
    CHECK_STATUS(ta_event_wait(ev, SECONDS(30)), TA_STATUS_OK);
    MUST(ta_event_free(ev));
    for (int i = 0; i < 8; i++) CHECK(out[i] == 6.0, "out[%d] = %g, want 6", i, out[i]);
    MUST(ta_tensor_free(t));
}

/* ---- 2: a submission callback that frees its tensor handle -------------- */

typedef struct {
    ta_tensor *t;
    long calls;
    ta_status status;
    ta_status free_status;
} t_box;

static void free_own_tensor(ta_status status, void *userdata) {
    t_box *b = userdata;
    b->status = status;
    b->free_status = ta_tensor_free(b->t);
    atomic_inc(&b->calls);
}

static long later_calls;
static long later_bad;
static void count_ok(ta_status status, void *userdata) {
    (void)userdata;
    if (status != TA_STATUS_OK) atomic_inc(&later_bad);
    atomic_inc(&later_calls);
}

static void callback_frees_its_tensor(void) {
    size_t ext[1] = {8};
    t_box b = {NULL, 0, 0xffffffffu, 0xffffffffu};
    MUST(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, ext, TA_ORDER_ROW_MAJOR, &b.t, NULL));
    ta_tensor *keep = NULL;
    MUST(ta_tensor_share(b.t, &keep));

    gate_init(&g);
    ta_access acc = {b.t, TA_MODE_UPDATE};
    MUST(ta_kernel_submit(gate_kernel, &g, "held", &acc, 1, NULL, NULL, NULL));
    ta_submit opts = {0};
    opts.callback = free_own_tensor;
    opts.callback_userdata = &b;
    MUST(ta_fill(b.t, (ta_scalar){1.0, 0.0}, &opts, NULL, NULL));
    /* Queued behind it, on the handle the callback will free. */
    ta_submit later = {0};
    later.callback = count_ok;
    for (int i = 0; i < 20; i++) MUST(ta_scale(b.t, (ta_scalar){2.0, 0.0}, &later, NULL, NULL));
    CHECK(gate_await_entered(&g, 1, 30.0), "the gated kernel never started");
    gate_open(&g);

    double out[8];
    ta_event *ev = NULL;
    MUST(ta_copy_out(keep, out, 8, NULL, NULL, &ev, NULL));
    CHECK_STATUS(ta_event_wait(ev, SECONDS(60)), TA_STATUS_OK);
    MUST(ta_event_free(ev));
    for (int i = 0; i < 3000 && atomic_get(&later_calls) < 20; i++) sleep_ms(10);
    CHECK(atomic_get(&b.calls) == 1, "freeing callback ran %ld times", atomic_get(&b.calls));
    CHECK_STATUS(b.status, TA_STATUS_OK);
    CHECK_STATUS(b.free_status, TA_STATUS_OK);
    CHECK(atomic_get(&later_calls) == 20 && atomic_get(&later_bad) == 0, "later callbacks: %ld, %ld not OK",
          atomic_get(&later_calls), atomic_get(&later_bad));
    for (int i = 0; i < 8; i++) CHECK(out[i] == 1048576.0, "out[%d] = %g, want 2^20", i, out[i]);
    CHECK_STATUS(ta_tensor_free(b.t), TA_STATUS_DOUBLE_FREE);
    MUST(ta_tensor_free(keep));
    gate_destroy(&g);
}

/* ---- 3: exit() with pending operations ---------------------------------- */

#define EXIT_OPS 10000

static long exit_calls;
static void count_call(ta_status status, void *userdata) {
    (void)status; (void)userdata;
    atomic_inc(&exit_calls);
    /* A callback that uses the library while the process may be exiting. */
    size_t live;
    ta_handles_live(&live);
}

static ta_status slow_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)n; (void)ud; (void)ctx;
    double *a = v[0].data;
    for (int r = 0; r < 200; r++)
        for (size_t j = 0; j < v[0].extents[0]; j++) a[(ptrdiff_t)j * v[0].strides[0]] += 1.0;
    return TA_STATUS_OK;
}

/* The child: EXIT_OPS operations with callbacks and events over 8 tensors,
 * then exit(0) from main's call chain. With `block`, a kernel waits forever
 * at a gate first. */
static void child(int block) {
    ta_tensor *ts[8];
    size_t ext[1] = {64};
    for (int i = 0; i < 8; i++) MUST(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, ext, TA_ORDER_ROW_MAJOR, &ts[i], NULL));
    if (block) {
        gate_init(&g);
        ta_access acc = {ts[0], TA_MODE_UPDATE};
        MUST(ta_kernel_submit(gate_kernel, &g, "forever", &acc, 1, NULL, NULL, NULL));
    }
    ta_submit opts = {0};
    opts.callback = count_call;
    for (int k = 0; k < EXIT_OPS; k++) {
        ta_tensor *t = ts[k % 8];
        ta_event *ev = NULL;
        if (k % 3 == 0) {
            ta_access acc = {t, TA_MODE_UPDATE};
            MUST(ta_kernel_submit(slow_kernel, NULL, "slow", &acc, 1, &opts, &ev, NULL));
        } else {
            MUST(ta_axpy(t, (ta_scalar){0.5, 0.0}, ts[(k + 1) % 8], &opts, &ev, NULL));
        }
        if (k % 2 == 0) MUST(ta_event_on_complete(ev, count_call, NULL));
        if (k % 4 == 0) MUST(ta_event_free(ev)); /* the rest stay live */
    }
    for (int i = 0; i < 4; i++) MUST(ta_tensor_free(ts[i])); /* the rest stay live */
    printf("child: %d operations submitted, %ld callbacks so far; exiting\n", EXIT_OPS, atomic_get(&exit_calls));
    exit(0);
}

static void exit_with_pending_work(int block) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        CHECK(0, "fork failed: %s", strerror(errno));
        return;
    }
    if (pid == 0) child(block);
    int status = 0;
    pid_t got = 0;
    double deadline = now_s() + 120.0;
    while ((got = waitpid(pid, &status, WNOHANG)) == 0 && now_s() < deadline) sleep_ms(10);
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        CHECK(0, "exit() with pending work hung (block = %d): killed after 120 s", block);
        return;
    }
    CHECK(got == pid, "waitpid: %s", strerror(errno));
    CHECK(WIFEXITED(status), "the child did not exit normally (block = %d): %s %d", block,
          WIFSIGNALED(status) ? "signal" : "status", WIFSIGNALED(status) ? WTERMSIG(status) : status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child exited with %d (block = %d)", WEXITSTATUS(status), block);
}

int main(void) {
    /* The children first: forked before this process has used the library,
     * each starts the default runtime's workers itself. */
    exit_with_pending_work(0);
    exit_with_pending_work(1);
    callback_frees_its_event();
    callback_frees_its_tensor();
    return finish("test_faults");
}
