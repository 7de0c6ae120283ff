/*
 * test_cuda: the CUDA domain through the C ABI (SPEC §2.7).
 *
 * Run without arguments, it checks what this machine has: on a machine with
 * no driver or GPU, ta_cuda_device_count reports TA_STATUS_CUDA_UNAVAILABLE
 * with a reason, device tensors cannot be made, and host work is unaffected;
 * with a GPU, the count is positive. Then it re-runs itself with
 * TA_SIMULATED_DEVICES=2 (simulated devices: host memory behind the device
 * interface) and checks device tensors end to end: creation, uploads,
 * scale/axpy/gemm on the device, downloads, mixed-domain statuses and the
 * transfer flag, and that every handle is freed.
 */
#include "check.h"

#include <sys/wait.h>
#include <unistd.h>

static ta_runtime *rt;

static ta_submit opts(void) { return on_runtime(rt); }

static void what_this_machine_has(void) {
    size_t n = 99;
    ta_error *err = NULL;
    ta_status s = ta_cuda_device_count(&n, &err);
    char msg[512];
    if (s == TA_STATUS_OK) {
        CHECK(n > 0, "a device count of %zu", n);
        printf("test_cuda: %zu CUDA device(s)\n", n);
    } else {
        CHECK_STATUS(s, TA_STATUS_CUDA_UNAVAILABLE);
        CHECK(n == 99, "the output is written only on success");
        CHECK(err && strstr(err_message(err, msg, sizeof msg), "CUDA is not available"), "reason: %s", msg);
        printf("test_cuda: no CUDA here (%s)\n", msg);
        ta_error_free(err);
        err = NULL;
        size_t ext[1] = { 4 };
        ta_tensor *t = NULL;
        CHECK_STATUS(ta_tensor_new_zeros(TA_DTYPE_F64, 0, 1, ext, TA_ORDER_ROW_MAJOR, &t, &err), TA_STATUS_CUDA_UNAVAILABLE);
        CHECK(t == NULL, "no tensor");
        ta_error_free(err);
    }
    /* The host is unaffected either way. */
    double v[2] = { 1, 2 }, got[2];
    size_t e1[1] = { 2 };
    ta_tensor *h = NULL;
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 1, e1, NULL, TA_ORDER_ROW_MAJOR, v, &h, NULL));
    ta_submit o = opts();
    MUST(ta_scale(h, real(3.0), &o, NULL, NULL));
    read_back(h, rt, got, 2);
    CHECK(got[0] == 3 && got[1] == 6, "host scale: %g %g", got[0], got[1]);
    ta_tensor_free(h);
}

static ta_tensor *device_matrix(int dev, size_t rows, size_t cols, const double *data) {
    size_t ext[2] = { rows, cols };
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_zeros(TA_DTYPE_F64, dev, 2, ext, TA_ORDER_ROW_MAJOR, &t, NULL));
    ta_submit o = opts();
    MUST(ta_copy_in(t, data, 2, ext, NULL, &o, NULL, NULL));
    return t;
}

static void simulated_devices(void) {
    size_t n = 0;
    MUST(ta_cuda_device_count(&n, NULL));
    CHECK(n == 2, "two simulated devices, got %zu", n);
    char info[256] = "";
    MUST(ta_cuda_device_info(1, info, sizeof info, NULL));
    CHECK(strstr(info, "simulated") != NULL, "info: %s", info);
    CHECK_STATUS(ta_cuda_device_info(5, info, sizeof info, NULL), TA_STATUS_CUDA_UNAVAILABLE);

    /* C = 2 * A * B on device 0, then C += A (axpy), then C *= 0.5; download. */
    double a[6] = { 1, 2, 3, 4, 5, 6 }, b[6] = { 1, 0, 2, 1, 0, 1 }, c[4];
    ta_tensor *da = device_matrix(0, 2, 3, a), *db = device_matrix(0, 3, 2, b);
    ta_tensor *dc = NULL;
    MUST(ta_tensor_new(TA_DTYPE_F64, 0, &dc, NULL));
    ta_submit o = opts();
    MUST(ta_assign_product(dc, real(2.0), da, db, &o, NULL, NULL));
    ta_domain dom = -5;
    MUST(ta_tensor_domain(dc, &dom));
    CHECK(dom == 0, "the product lives on device 0 (domain %d)", (int)dom);
    ta_tensor *twos = device_matrix(0, 2, 2, (double[]){ 2, 2, 2, 2 });
    MUST(ta_axpy(dc, real(1.0), twos, &o, NULL, NULL));
    MUST(ta_scale(dc, real(0.5), &o, NULL, NULL));
    read_back(dc, rt, c, 4);
    /* A*B = [[5, 5], [14, 11]], so (2*A*B + 2) / 2 = [[6, 6], [15, 12]]. */
    double want[4] = { 6, 6, 15, 12 };
    for (int i = 0; i < 4; i++) CHECK(c[i] == want[i], "c[%d] = %g, want %g", i, c[i], want[i]);

    /* Device 0 -> device 1 -> a host tensor. */
    ta_tensor *d1 = NULL, *h = NULL;
    MUST(ta_tensor_new(TA_DTYPE_F64, 1, &d1, NULL));
    MUST(ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &h, NULL));
    MUST(ta_copy(d1, dc, &o, NULL, NULL));
    MUST(ta_copy(h, d1, &o, NULL, NULL));
    read_back(h, rt, c, 4);
    for (int i = 0; i < 4; i++) CHECK(c[i] == want[i], "via device 1: c[%d] = %g", i, c[i]);

    /* Mixed domains: a status at submission, unless a transfer is asked for. */
    ta_error *err = NULL;
    char msg[512];
    CHECK_STATUS(ta_axpy(dc, real(1.0), h, &o, NULL, &err), TA_STATUS_DOMAIN_MISMATCH);
    CHECK(err && strstr(err_message(err, msg, sizeof msg), "TA_SUBMIT_TRANSFER"), "message: %s", msg);
    ta_error_free(err);
    ta_submit t = opts();
    t.flags = TA_SUBMIT_TRANSFER;
    MUST(ta_axpy(dc, real(-1.0), h, &t, NULL, NULL));
    read_back(dc, rt, c, 4);
    for (int i = 0; i < 4; i++) CHECK(c[i] == 0, "after subtracting itself: c[%d] = %g", i, c[i]);
    t.flags = 0x80;
    CHECK_STATUS(ta_axpy(dc, real(1.0), dc, &t, NULL, NULL), TA_STATUS_INVALID_ARGUMENT);

    /* Operations no device backend has are refused at submission. */
    ta_tensor *s = NULL;
    MUST(ta_tensor_new(TA_DTYPE_F64, 0, &s, NULL));
    CHECK_STATUS(ta_sum(s, da, 0, NULL, &o, NULL, NULL), TA_STATUS_UNSUPPORTED);

    ta_tensor *all[] = { da, db, dc, twos, d1, h, s };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) ta_tensor_free(all[i]);
}

int main(int argc, char **argv) {
    int sim = argc > 1 && strcmp(argv[1], "--simulated") == 0;
    if (sim) setenv("TA_SIMULATED_DEVICES", "2", 1);
    MUST(ta_runtime_new(2, &rt, NULL));
    if (sim)
        simulated_devices();
    else
        what_this_machine_has();
    MUST(ta_runtime_free(rt));
    int rc = finish(sim ? "test_cuda (simulated devices)" : "test_cuda");
    if (sim || rc != 0) return rc;
    /* The simulated part, in a fresh process (devices are chosen once per process). */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char *args[] = { argv[0], "--simulated", NULL };
        execv(argv[0], args);
        execv("/proc/self/exe", args);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
