/*
 * test_dump_signal: TA_DUMP_SIGNAL=USR2 makes an unmodified program print
 * the pending-work dump to stderr when it receives SIGUSR2.
 *
 * The variable is set before the first runtime is made (as a user would set
 * it in the environment). A kernel waits for a flag that is set only at the
 * end, with an update and a read of its tensor queued behind it; another
 * thread sends SIGUSR2 to the process. stderr (redirected to a file) then
 * holds a dump that names the running blocker, its waiters and what they
 * wait for. A second signal after everything completed reports none left.
 */
#include "check.h"

#include <signal.h>
#include <unistd.h>

static long g_flag, g_entered;

static ta_status wait_flag_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ud; (void)ctx;
    atomic_inc(&g_entered);
    while (!atomic_get(&g_flag)) sleep_ms(1);
    return TA_STATUS_OK;
}

static ta_status nop_kernel(const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) {
    (void)v; (void)n; (void)ud; (void)ctx;
    return TA_STATUS_OK;
}

static void *send_signal(void *arg) {
    (void)arg;
    kill(getpid(), SIGUSR2);
    return NULL;
}

/* The file's content (caller frees). */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return calloc(1, 1);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = calloc((size_t)n + 1, 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
    fclose(f);
    return s;
}

/* Signal the process from another thread, then wait (up to 60 s) until
 * stderr's file holds `needle`; returns the file's content. */
static char *signal_and_read(const char *path, const char *needle) {
    pthread_t th;
    pthread_create(&th, NULL, send_signal, NULL);
    pthread_join(th, NULL);
    char *text = NULL;
    for (int i = 0; i < 6000; i++) {
        free(text);
        text = slurp(path);
        if (strstr(text, needle)) break;
        sleep_ms(10);
    }
    return text;
}

int main(void) {
    setenv("TA_DUMP_SIGNAL", "USR2", 1);
    char path[] = "/tmp/ta_test_dump_signal_XXXXXX";
    int fd = mkstemp(path);
    MUST(fd >= 0 ? TA_STATUS_OK : TA_STATUS_INTERNAL);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);

    ta_runtime *rt = NULL;
    MUST(ta_runtime_new(2, &rt, NULL));
    size_t ext[1] = {1};
    ta_tensor *x = NULL;
    MUST(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, ext, TA_ORDER_ROW_MAJOR, &x, NULL));
    ta_submit opts;
    memset(&opts, 0, sizeof opts);
    opts.runtime = rt;
    ta_access upd = {x, TA_MODE_UPDATE}, rd = {x, TA_MODE_READ};
    MUST(ta_kernel_submit(wait_flag_kernel, NULL, "blocker", &upd, 1, &opts, NULL, NULL));
    MUST(ta_kernel_submit(nop_kernel, NULL, "next_update", &upd, 1, &opts, NULL, NULL));
    MUST(ta_kernel_submit(nop_kernel, NULL, "then_read", &rd, 1, &opts, NULL, NULL));
    while (!atomic_get(&g_entered)) sleep_ms(1);

    char *text = signal_and_read(path, "waits for op #2 \"next_update\"");
    atomic_set(&g_flag, 1);
    MUST(ta_runtime_wait_idle(rt, TA_WAIT_FOREVER, NULL));
    char *after = signal_and_read(path, "0 unfinished operation(s)");

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    unlink(path);

    CHECK(strstr(text, "op #1 \"blocker\": RUNNING for") != NULL, "no running blocker in the dump:\n%s", text);
    CHECK(strstr(text, "op #2 \"next_update\": WAITING") && strstr(text, "op #3 \"then_read\": WAITING"), "waiters:\n%s", text);
    CHECK(strstr(text, "waits for op #1 \"blocker\" (running) on tensor t0 (f64)") != NULL, "what next_update waits for:\n%s", text);
    CHECK(strstr(text, "waited for by: #2 \"next_update\"") != NULL, "the blocker's waiters:\n%s", text);
    CHECK(strstr(after, "0 unfinished operation(s) observed") != NULL, "second dump:\n%s", after);
    free(text);
    free(after);
    MUST(ta_tensor_free(x));
    MUST(ta_runtime_free(rt));
    return finish("test_dump_signal");
}
