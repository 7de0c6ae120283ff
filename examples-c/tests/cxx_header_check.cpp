// cxx_header_check: the C header compiles as C++17 (-Wall -Wextra -Werror),
// links from C++, and works: a kernel with C linkage, a callback, an error
// object, RAII cleanup through std::unique_ptr with the ta_*_free functions.
#include <tensorasync.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

template <typename T, ta_status (*Free)(T *)>
struct Deleter {
    void operator()(T *p) const { Free(p); }
};
using Runtime = std::unique_ptr<ta_runtime, Deleter<ta_runtime, ta_runtime_free>>;
using Tensor = std::unique_ptr<ta_tensor, Deleter<ta_tensor, ta_tensor_free>>;
using Event = std::unique_ptr<ta_event, Deleter<ta_event, ta_event_free>>;
using Error = std::unique_ptr<ta_error, Deleter<ta_error, ta_error_free>>;

int failures = 0;

void expect(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "FAIL: %s\n", what);
        ++failures;
    }
}

std::atomic<int> callback_status{-1};

extern "C" void on_done(ta_status status, void *) { callback_status = static_cast<int>(status); }

// x[i] = x[i] * 10 + i, honouring the view's stride.
extern "C" ta_status times_ten_plus_index(const ta_view *views, size_t, void *, ta_kernel_ctx *ctx) {
    const ta_view &v = views[0];
    if (v.dtype != TA_DTYPE_I64) {
        ta_kernel_set_error(ctx, "expected i64");
        return 1;
    }
    auto *x = static_cast<int64_t *>(v.data);
    for (size_t i = 0; i < v.extents[0]; ++i) x[static_cast<ptrdiff_t>(i) * v.strides[0]] = x[static_cast<ptrdiff_t>(i) * v.strides[0]] * 10 + static_cast<int64_t>(i);
    return TA_STATUS_OK;
}

}  // namespace

int main() {
    expect(std::string(ta_version()) == TA_VERSION_STRING, "ta_version() equals TA_VERSION_STRING");
    expect(std::string(ta_status_name(TA_STATUS_ALIAS)) == "TA_STATUS_ALIAS", "ta_status_name");

    ta_runtime *raw_rt = nullptr;
    if (ta_runtime_new(2, &raw_rt, nullptr) != TA_STATUS_OK) return 2;
    Runtime rt(raw_rt);

    const size_t n = 5;
    std::vector<int64_t> host = {1, 2, 3, 4, 5}, out(n, 0);
    ta_tensor *raw_t = nullptr;
    if (ta_tensor_new_copy(TA_DTYPE_I64, 1, &n, nullptr, TA_ORDER_ROW_MAJOR, host.data(), &raw_t, nullptr) != TA_STATUS_OK)
        return 2;
    Tensor t(raw_t);

    ta_submit opts{};
    opts.runtime = rt.get();
    opts.callback = on_done;
    ta_access acc{t.get(), TA_MODE_UPDATE};
    expect(ta_kernel_submit(times_ten_plus_index, nullptr, "times_ten_plus_index", &acc, 1, &opts, nullptr, nullptr) ==
               TA_STATUS_OK,
           "ta_kernel_submit");

    ta_submit plain{};
    plain.runtime = rt.get();
    ta_event *raw_ev = nullptr;
    expect(ta_copy_out(t.get(), out.data(), n, nullptr, &plain, &raw_ev, nullptr) == TA_STATUS_OK, "ta_copy_out");
    Event ev(raw_ev);
    expect(ta_event_wait(ev.get(), TA_WAIT_FOREVER) == TA_STATUS_OK, "copy_out completes");
    for (size_t i = 0; i < n; ++i) expect(out[i] == host[i] * 10 + static_cast<int64_t>(i), "kernel result");

    // An error object through the out-parameter.
    ta_error *raw_err = nullptr;
    expect(ta_axpy(t.get(), ta_scalar{1.0, 0.0}, t.get(), &plain, nullptr, &raw_err) == TA_STATUS_ALIAS, "alias rejected");
    Error err(raw_err);
    ta_status st = TA_STATUS_OK;
    expect(err && ta_error_status(err.get(), &st) == TA_STATUS_OK && st == TA_STATUS_ALIAS, "error status");
    char msg[256] = "";
    size_t len = 0;
    expect(ta_error_message(err.get(), msg, sizeof msg, &len) == TA_STATUS_OK && len == std::strlen(msg) && len > 0,
           "error message");

    ev.reset();
    t.reset();
    rt.reset();  // ta_runtime_free drains: the callback has fired
    expect(callback_status.load() == static_cast<int>(TA_STATUS_OK), "callback fired with TA_STATUS_OK");

    std::printf("cxx_header_check: %s (C++%ld, header %s)\n", failures ? "FAILED" : "all checks passed",
                static_cast<long>(__cplusplus / 100 % 100), TA_VERSION_STRING);
    return failures ? 1 : 0;
}
