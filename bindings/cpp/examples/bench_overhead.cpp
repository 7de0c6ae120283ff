// bench_overhead.cpp: the C++ wrapper's per-operation cost against the raw C
// ABI, on the task-overhead patterns of examples-c/bench (same kernel bodies,
// 2 workers, no events requested):
//   (a) N dependent tasks, each incrementing one 1-double tensor
//   (b) N independent tasks, each incrementing its own 1-double tensor
//   (c) N/10 rounds of 1 writer + 8 readers on one 1-double tensor
// and, for the wrapper, (a) again with kernels that capture state: one double
// (carried in the userdata pointer) and four doubles (one heap box and one
// completion callback per task).
// Rounds alternate C and C++ (7 rounds, the first is warm-up); the medians of
// the other 6 are reported as ns per task, with the ratio C++ / C.
// Usage: bench_overhead [N (100000)]. Run by hand; not part of the test suite.
//        bench_overhead N c|cpp [a|b|c]  runs the patterns (all three, or one) once with one
//        implementation only, for instruction counts that the machine's load
//        does not disturb: under `valgrind --tool=callgrind --instr-atstart=no`
//        only the timed regions are counted (N tasks per pattern).
#include <tensorasync.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define TA_BENCH_CALLGRIND 1
#endif

namespace {

double now_ns() {
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The timed regions; under `valgrind --tool=callgrind --instr-atstart=no`
// only they are counted (submissions and the workers' runs of the tasks).
double begin_timed() {
#if defined(TA_BENCH_CALLGRIND)
    CALLGRIND_START_INSTRUMENTATION;
#endif
    return now_ns();
}
double end_timed() {
#if defined(TA_BENCH_CALLGRIND)
    CALLGRIND_STOP_INSTRUMENTATION;
#endif
    return now_ns();
}

void die(ta_status s, const char *what) {
    std::fprintf(stderr, "%s failed: %s\n", what, ta_status_name(s));
    std::exit(2);
}

ta_status c_inc(const ta_view *v, size_t, void *, ta_kernel_ctx *) {
    *static_cast<double *>(v[0].data) += 1.0;
    return TA_STATUS_OK;
}
ta_status c_read(const ta_view *v, size_t, void *, ta_kernel_ctx *) {
    volatile double x = *static_cast<const double *>(v[0].data);
    (void)x;
    return TA_STATUS_OK;
}

ta_tensor *c_scalar() {
    size_t one = 1;
    ta_tensor *t = nullptr;
    ta_status s = ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &one, TA_ORDER_ROW_MAJOR, &t, nullptr);
    if (s) die(s, "ta_tensor_new_zeros");
    return t;
}

void c_submit(ta_kernel_fn k, ta_tensor *t, ta_mode m, const ta_submit *o) {
    ta_access a = {t, m};
    ta_status s = ta_kernel_submit(k, nullptr, nullptr, &a, 1, o, nullptr, nullptr);
    if (s) die(s, "ta_kernel_submit");
}

// ---- raw C
double c_a(ta_runtime *rt, long n) {
    ta_submit o{};
    o.runtime = rt;
    ta_tensor *x = c_scalar();
    double t0 = begin_timed();
    for (long i = 0; i < n; ++i) c_submit(c_inc, x, TA_MODE_UPDATE, &o);
    ta_tensor_wait(x, TA_WAIT_FOREVER, nullptr);
    double t1 = end_timed();
    ta_tensor_free(x);
    return (t1 - t0) / double(n);
}
double c_b(ta_runtime *rt, long n) {
    ta_submit o{};
    o.runtime = rt;
    std::vector<ta_tensor *> xs(static_cast<size_t>(n));
    for (auto &x : xs) x = c_scalar();
    double t0 = begin_timed();
    for (long i = 0; i < n; ++i) c_submit(c_inc, xs[static_cast<size_t>(i)], TA_MODE_UPDATE, &o);
    ta_runtime_wait_idle(rt, TA_WAIT_FOREVER, nullptr);
    double t1 = end_timed();
    for (auto x : xs) ta_tensor_free(x);
    return (t1 - t0) / double(n);
}
double c_c(ta_runtime *rt, long rounds) {
    ta_submit o{};
    o.runtime = rt;
    ta_tensor *x = c_scalar();
    double t0 = begin_timed();
    for (long r = 0; r < rounds; ++r) {
        c_submit(c_inc, x, TA_MODE_UPDATE, &o);
        for (int k = 0; k < 8; ++k) c_submit(c_read, x, TA_MODE_READ, &o);
    }
    ta_tensor_wait(x, TA_WAIT_FOREVER, nullptr);
    double t1 = end_timed();
    ta_tensor_free(x);
    return (t1 - t0) / double(rounds * 9);
}

// ---- C++ wrapper
const auto inc = [](ta::view<double, 1> v) { v(0) += 1.0; };
const auto rd = [](ta::view<const double, 1> v) {
    volatile double x = v(0);
    (void)x;
};

double cpp_a(const ta::runtime &rt, long n) {
    const ta::options o = ta::options().on(rt);
    auto x = ta::tensor::zeros<double>({1});
    double t0 = begin_timed();
    for (long i = 0; i < n; ++i) ta::submit(o, inc, ta::inout(x));
    x.wait();
    return (end_timed() - t0) / double(n);
}
double cpp_a_state(const ta::runtime &rt, long n) {
    const ta::options o = ta::options().on(rt);
    auto x = ta::tensor::zeros<double>({1});
    double step = 1.0;
    double t0 = begin_timed();
    for (long i = 0; i < n; ++i) ta::submit(o, [step](ta::view<double, 1> v) { v(0) += step; }, ta::inout(x));
    x.wait();
    rt.wait_idle();
    return (end_timed() - t0) / double(n);
}
double cpp_a_big(const ta::runtime &rt, long n) {
    const ta::options o = ta::options().on(rt);
    auto x = ta::tensor::zeros<double>({1});
    double s0 = 1.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    double t0 = begin_timed();
    for (long i = 0; i < n; ++i)
        ta::submit(o, [s0, s1, s2, s3](ta::view<double, 1> v) { v(0) += s0 + s1 + s2 + s3; }, ta::inout(x));
    x.wait();
    rt.wait_idle();
    return (end_timed() - t0) / double(n);
}
double cpp_b(const ta::runtime &rt, long n) {
    const ta::options o = ta::options().on(rt);
    std::vector<ta::tensor> xs;
    xs.reserve(static_cast<size_t>(n));
    for (long i = 0; i < n; ++i) xs.push_back(ta::tensor::zeros<double>({1}));
    double t0 = begin_timed();
    for (long i = 0; i < n; ++i) ta::submit(o, inc, ta::inout(xs[static_cast<size_t>(i)]));
    rt.wait_idle();
    return (end_timed() - t0) / double(n);
}
double cpp_c(const ta::runtime &rt, long rounds) {
    const ta::options o = ta::options().on(rt);
    auto x = ta::tensor::zeros<double>({1});
    double t0 = begin_timed();
    for (long r = 0; r < rounds; ++r) {
        ta::submit(o, inc, ta::inout(x));
        for (int k = 0; k < 8; ++k) ta::submit(o, rd, ta::in(x));
    }
    x.wait();
    return (end_timed() - t0) / double(rounds * 9);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
    long n = argc > 1 ? std::atol(argv[1]) : 100000;
    if (n < 10) n = 10;
    if (argc > 2) {
        ta::runtime rt1(2);
        const std::string which = argv[2];
        const std::string pat = argc > 3 ? argv[3] : "abc";
        if (which != "c" && which != "cpp") {
            std::fprintf(stderr, "usage: %s [N] [c|cpp [a|b|c|abc]]\n", argv[0]);
            return 2;
        }
        const bool c = which == "c";
        if (pat.find('a') != std::string::npos) c ? c_a(rt1.get(), n) : cpp_a(rt1, n);
        if (pat.find('b') != std::string::npos) c ? c_b(rt1.get(), n) : cpp_b(rt1, n);
        if (pat.find('c') != std::string::npos) c ? c_c(rt1.get(), n / 9) : cpp_c(rt1, n / 9);
        return 0;
    }
    const int rounds = 7;
    ta::runtime rt(2);
    std::vector<double> ca, cb, cc, pa, pb, pc, ps, pbig;
    for (int r = 0; r < rounds; ++r) {
        // alternate the order so that slow spells hit both alike
        double v[8];
        if (r % 2 == 0) {
            v[0] = c_a(rt.get(), n), v[1] = cpp_a(rt, n);
            v[2] = c_b(rt.get(), n), v[3] = cpp_b(rt, n);
            v[4] = c_c(rt.get(), n / 10), v[5] = cpp_c(rt, n / 10);
        } else {
            v[1] = cpp_a(rt, n), v[0] = c_a(rt.get(), n);
            v[3] = cpp_b(rt, n), v[2] = c_b(rt.get(), n);
            v[5] = cpp_c(rt, n / 10), v[4] = c_c(rt.get(), n / 10);
        }
        v[6] = cpp_a_state(rt, n);
        v[7] = cpp_a_big(rt, n);
        if (r == 0) continue; // warm-up
        ca.push_back(v[0]), pa.push_back(v[1]), cb.push_back(v[2]), pb.push_back(v[3]);
        cc.push_back(v[4]), pc.push_back(v[5]), ps.push_back(v[6]), pbig.push_back(v[7]);
    }
    std::printf("tensorasync %s, 2 workers, N = %ld, median of %d rounds (ns per task)\n", ta::version(), n, rounds - 1);
    std::printf("%-40s %10s %10s %8s\n", "pattern", "C ABI", "C++", "C++/C");
    auto row = [](const char *name, double c, double p) { std::printf("%-40s %10.1f %10.1f %7.3fx\n", name, c, p, p / c); };
    row("(a) chain of dependent tasks", median(ca), median(pa));
    row("(b) independent tasks", median(cb), median(pb));
    row("(c) 1 writer + 8 readers", median(cc), median(pc));
    row("(a) lambda capturing 1 double", median(ca), median(ps));
    row("(a) lambda capturing 4 doubles (boxed)", median(ca), median(pbig));
    return 0;
}
