// Tests of tensorasync.hpp (exceptions mode): every wrapper against a naive
// reference, RAII release with pending work, move semantics, exceptions out
// of kernels, coroutines (C++20) and host mappings.
#include <tensorasync.hpp>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"

namespace {

using cd = std::complex<double>;

size_t live_handles() {
    size_t n = 0;
    ta_handles_live(&n);
    return n;
}

// Deterministic inputs.
std::vector<double> seq(size_t n, double a, double b) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = a + b * double((i * 7919) % 23) / 23.0;
    return v;
}

std::vector<double> naive_matmul(const std::vector<double> &a, const std::vector<double> &b, size_t m, size_t k,
                                 size_t n) {
    std::vector<double> c(m * n, 0.0);
    for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j)
            for (size_t p = 0; p < k; ++p) c[i * n + j] += a[i * k + p] * b[p * n + j];
    return c;
}

bool all_near(const std::vector<double> &x, const std::vector<double> &y, double tol = 1e-10) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
        if (!near(x[i], y[i], tol)) return false;
    return true;
}

// A gate a kernel spins on, to keep work pending while the test acts.
// Waits in these tests have no time limit (a hang fails through the test
// runner's limit), so that a slow machine cannot fail them.
struct gate {
    std::atomic<bool> open{false};
    void wait() const {
        while (!open.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
};

void test_enums_and_errors(const ta::options &o) {
    CHECK(std::string(ta::status_name(ta::status::shape_mismatch)) == "TA_STATUS_SHAPE_MISMATCH");
    CHECK(static_cast<ta_status>(ta::status::kernel_failed) == TA_STATUS_KERNEL_FAILED);
    CHECK(std::string(ta::version()) == TA_VERSION_STRING);
    // A shape mismatch at submission: status, message and origin.
    auto a = ta::tensor::zeros<double>({2, 3});
    auto b = ta::tensor::zeros<double>({2, 3});
    auto c = ta::tensor::zeros<double>({2, 3});
    bool thrown = false;
    try {
        ta::gemm(c, 1.0, a, b, 0.0, o);
    } catch (const ta::error &e) {
        thrown = true;
        CHECK(e.status() == ta::status::shape_mismatch);
        CHECK(!e.message().empty());
        CHECK(std::string(e.what()) == e.message());
        CHECK(e.origin().find("gemm") != std::string::npos);
    }
    CHECK(thrown);
    // ta::error is a std::exception.
    thrown = false;
    try {
        (void)ta::tensor::zeros<double>({2, 2}).reshape({3});
    } catch (const std::exception &e) {
        thrown = true;
        CHECK(std::string(e.what()).size() > 0);
    }
    CHECK(thrown);
}

void test_blas1(const ta::options &o) {
    auto xv = seq(6, 1.0, 2.0), yv = seq(6, -1.0, 3.0);
    auto x = ta::tensor::copy_of(xv, {2, 3});
    auto y = ta::tensor::copy_of(yv, {2, 3});
    ta::axpy(y, 2.5, x, o);
    std::vector<double> ref(6);
    for (size_t i = 0; i < 6; ++i) ref[i] = 2.5 * xv[i] + yv[i];
    CHECK(all_near(y.to_vector<double>(), ref));
    ta::scale(y, -2, o);
    for (double &r : ref) r *= -2;
    CHECK(all_near(y.to_vector<double>(), ref));
    auto z = ta::tensor::empty(ta::dtype::f64);
    ta::copy(z, y, o);
    CHECK(all_near(z.to_vector<double>(), ref));
    ta::fill(z, 4.0, o);
    CHECK(all_near(z.to_vector<double>(), std::vector<double>(6, 4.0)));
    // sum over all, over axis 1, dot, norm2
    auto s = ta::tensor::empty(ta::dtype::f64);
    ta::sum(s, x, {}, o);
    double sref = 0, dref = 0, nref = 0;
    for (size_t i = 0; i < 6; ++i) sref += xv[i], dref += xv[i] * yv[i], nref += xv[i] * xv[i];
    CHECK(near(s.item<double>(), sref));
    auto rows = ta::tensor::empty(ta::dtype::f64);
    ta::sum(rows, x, {1}, o);
    CHECK(all_near(rows.to_vector<double>(), {xv[0] + xv[1] + xv[2], xv[3] + xv[4] + xv[5]}));
    auto yy = ta::tensor::copy_of(yv, {2, 3});
    auto d = ta::tensor::zeros<double>({});
    ta::dot(d, x, yy, false, o);
    CHECK(near(d.item<double>(), dref));
    auto nrm = ta::tensor::zeros<double>({});
    ta::norm2(nrm, x, o);
    CHECK(near(nrm.item<double>(), std::sqrt(nref)));
    // integers
    auto iv = ta::tensor::zeros<int32_t>({4});
    ta::fill(iv, 7, o);
    ta::scale(iv, 3, o);
    CHECK(iv.to_vector<int32_t>() == std::vector<int32_t>(4, 21));
}

void test_gemm(const ta::options &o) {
    const size_t m = 3, k = 4, n = 5;
    auto av = seq(m * k, 0.5, 1.0), bv = seq(k * n, -0.25, 2.0), cv = seq(m * n, 1.0, 1.0);
    auto a = ta::tensor::copy_of(av, {m, k});
    auto b = ta::tensor::copy_of(bv, {k, n});
    auto c = ta::tensor::copy_of(cv, {m, n});
    ta::gemm(c, 2.0, a, b, 0.5, o);
    auto p = naive_matmul(av, bv, m, k, n);
    std::vector<double> ref(m * n);
    for (size_t i = 0; i < m * n; ++i) ref[i] = 2.0 * p[i] + 0.5 * cv[i];
    CHECK(all_near(c.to_vector<double>(), ref));
    // matmul: a new tensor
    auto c2 = ta::matmul(a, b, o);
    CHECK(c2.extents() == (std::vector<size_t>{m, n}));
    CHECK(all_near(c2.to_vector<double>(), p));
    // a transposed view as an operand: (B^T)^T = B
    auto bt = ta::tensor::copy_of(bv, {n, k}); // reinterpret as n x k, then A * bt^T
    auto c3 = ta::matmul(a, bt.transpose(), o);
    std::vector<double> btt(k * n);
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < k; ++j) btt[j * n + i] = bv[i * k + j];
    CHECK(all_near(c3.to_vector<double>(), naive_matmul(av, btt, m, k, n)));
    // add_product, assign_product
    auto c4 = ta::tensor::copy_of(cv, {m, n});
    ta::add_product(c4, -1.0, a, b, o);
    for (size_t i = 0; i < m * n; ++i) ref[i] = cv[i] - p[i];
    CHECK(all_near(c4.to_vector<double>(), ref));
    auto c5 = ta::tensor::empty(ta::dtype::f64);
    ta::assign_product(c5, 3, a, b, o);
    for (size_t i = 0; i < m * n; ++i) ref[i] = 3 * p[i];
    CHECK(all_near(c5.to_vector<double>(), ref));
    // complex gemm with a complex scalar, and a conj view
    std::vector<cd> za = {cd(1, 2), cd(3, -1), cd(0, 1), cd(2, 2)}, zb = {cd(1, 0), cd(0, 1), cd(-1, 1), cd(2, -3)};
    auto A = ta::tensor::copy_of(za, {2, 2});
    auto B = ta::tensor::copy_of(zb, {2, 2});
    auto C = ta::tensor::zeros<cd>({2, 2});
    ta::gemm(C, cd(0, 1), A.conj(), B, 0.0, o);
    auto got = C.to_vector<cd>();
    bool ok = true;
    for (size_t i = 0; i < 2; ++i)
        for (size_t j = 0; j < 2; ++j) {
            cd s = 0;
            for (size_t q = 0; q < 2; ++q) s += std::conj(za[i * 2 + q]) * zb[q * 2 + j];
            ok = ok && std::abs(got[i * 2 + j] - cd(0, 1) * s) < 1e-12;
        }
    CHECK(ok);
    // contract: C[i,j] = sum_p A[p,i] B[p,j]
    auto cc = ta::tensor::empty(ta::dtype::f64);
    auto a2 = ta::tensor::copy_of(av, {k, m});
    auto b2 = ta::tensor::copy_of(bv, {k, n});
    ta::contract(cc, 1.0, a2, b2, {0}, {0}, o);
    std::vector<double> cref(m * n, 0.0);
    for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j)
            for (size_t q = 0; q < k; ++q) cref[i * n + j] += av[q * m + i] * bv[q * n + j];
    CHECK(all_near(cc.to_vector<double>(), cref));
    ta::contract(cc, 1.0, a2, b2, {0}, {0}, 2.0, o); // cc = A.B + 2 cc = 3 ref
    for (double &r : cref) r *= 3;
    CHECK(all_near(cc.to_vector<double>(), cref));
}

void test_factor(const ta::options &o) {
    const size_t n = 4;
    std::vector<double> m = seq(n * n, 0.1, 1.0), spd(n * n, 0.0);
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j) {
            for (size_t q = 0; q < n; ++q) spd[i * n + j] += m[i * n + q] * m[j * n + q];
            if (i == j) spd[i * n + j] += double(n);
        }
    auto a = ta::tensor::copy_of(spd, {n, n});
    ta::potrf(a, ta::uplo::lower, o);
    auto l = a.to_vector<double>();
    for (size_t i = 0; i < n; ++i)
        for (size_t j = i + 1; j < n; ++j) l[i * n + j] = 0.0;
    CHECK(all_near(naive_matmul(l, [&] {
                                    std::vector<double> t(n * n);
                                    for (size_t i = 0; i < n; ++i)
                                        for (size_t j = 0; j < n; ++j) t[i * n + j] = l[j * n + i];
                                    return t;
                                }(),
                                n, n, n),
                   spd, 1e-9));
    // trsm: solve L X = B
    auto L = ta::tensor::copy_of(l, {n, n});
    auto bv = seq(n * 2, 1.0, 1.0);
    auto B = ta::tensor::copy_of(bv, {n, 2});
    ta::trsm(B, ta::side::left, ta::uplo::lower, ta::diag::non_unit, 1.0, L, o);
    CHECK(all_near(naive_matmul(l, B.to_vector<double>(), n, n, 2), bv, 1e-9));
    // syrk: C = -1 A A^T + 1 C on the lower triangle
    auto av = seq(n * 3, 0.0, 1.0);
    auto A = ta::tensor::copy_of(av, {n, 3});
    auto C = ta::tensor::copy_of(spd, {n, n});
    ta::syrk(C, ta::uplo::lower, -1.0, A, 1.0, o);
    auto got = C.to_vector<double>();
    bool ok = true;
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j <= i; ++j) {
            double s = spd[i * n + j];
            for (size_t q = 0; q < 3; ++q) s -= av[i * 3 + q] * av[j * 3 + q];
            ok = ok && near(got[i * n + j], s);
        }
    CHECK(ok);
    // Not positive definite: the factorisation poisons its matrix.
    std::vector<double> bad = {1, 2, 2, 1};
    auto nb = ta::tensor::copy_of(bad, {2, 2});
    ta::potrf(nb, ta::uplo::lower, o);
    bool thrown = false;
    try {
        nb.wait();
    } catch (const ta::error &e) {
        thrown = true;
        CHECK(e.status() != ta::status::ok);
        CHECK(e.origin() == "ta_potrf");
    }
    CHECK(thrown);
}

void test_views(const ta::options &o) {
    auto v = seq(12, 0.0, 10.0);
    auto t = ta::tensor::copy_of(v, {3, 4});
    // slice rows 1..3, columns 0,2
    auto s = t.slice({ta::slice(1, 3), ta::slice(0, 4, 2)});
    CHECK(s.is_view());
    CHECK(s.extents() == (std::vector<size_t>{2, 2}));
    CHECK(all_near(s.to_vector<double>(), {v[4], v[6], v[8], v[10]}));
    auto row = t.slice({ta::slice::at(2), ta::slice::all()});
    CHECK(row.extents() == (std::vector<size_t>{4}));
    CHECK(all_near(row.to_vector<double>(), {v[8], v[9], v[10], v[11]}));
    // writes through a view update the tensor
    ta::fill(s, -1.0, o);
    auto after = t.to_vector<double>();
    CHECK(after[4] == -1.0 && after[6] == -1.0 && after[5] == v[5] && after[10] == -1.0);
    auto tt = t.transpose();
    CHECK(tt.extents() == (std::vector<size_t>{4, 3}));
    auto ttv = tt.to_vector<double>();
    CHECK(ttv[1 * 3 + 2] == after[2 * 4 + 1]);
    auto p = ta::tensor::copy_of(seq(24, 0, 24), {2, 3, 4}).permute({2, 0, 1});
    CHECK(p.extents() == (std::vector<size_t>{4, 2, 3}));
    auto r = t.reshape({2, 6});
    CHECK(r.extents() == (std::vector<size_t>{2, 6}));
    CHECK(all_near(r.to_vector<double>(), after));
    // materialised permute and conj
    auto pm = ta::tensor::empty(ta::dtype::f64);
    ta::permute(pm, t, {1, 0}, o);
    CHECK(all_near(pm.to_vector<double>(), ttv));
    std::vector<cd> z = {cd(1, 2), cd(-3, 4)};
    auto zt = ta::tensor::copy_of(z, {2});
    auto zc = ta::tensor::empty(ta::dtype::c128);
    ta::conj(zc, zt, o);
    CHECK(zc.to_vector<cd>() == (std::vector<cd>{cd(1, -2), cd(-3, -4)}));
    CHECK(zt.conj().read_only());
    // a view of a view
    auto col = tt.slice({ta::slice::at(1), ta::slice::all()});
    CHECK(all_near(col.to_vector<double>(), {after[1], after[5], after[9]}));
}

void test_blocks(const ta::options &o) {
    auto ba = ta::block_array::tiled(ta::dtype::f64, {4, 6}, {2, 3});
    CHECK(ba.count() == 4);
    CHECK(ba.grid(2) == (std::vector<size_t>{2, 2}));
    auto t01 = ba.tile({0, 1});
    CHECK(t01.extents() == (std::vector<size_t>{2, 3}));
    ta::fill(t01, 5.0, o);
    ta::fill(ba.block(2), 1.0, o); // tile (1, 0)
    auto all = ba.all();
    auto v = all.to_vector<double>();
    CHECK(v[0 * 6 + 3] == 5.0 && v[1 * 6 + 5] == 5.0 && v[2 * 6 + 0] == 1.0 && v[0] == 0.0 && v[3 * 6 + 5] == 0.0);
    auto top = ba.coalesce({0, 0}, {1, 2});
    CHECK(top.extents() == (std::vector<size_t>{2, 6}));
    auto list = ta::block_array::list(ta::dtype::f64, {{2, 2}, {3, 2}});
    CHECK(list.count() == 2);
    CHECK(list.block(1).extents() == (std::vector<size_t>{3, 2}));
    CHECK(list.coalesce_range(0, 1).extents() == (std::vector<size_t>{5, 2}));
}

void test_kernels(const ta::options &o) {
    auto x = ta::tensor::copy_of(seq(6, 1.0, 1.0), {2, 3});
    auto y = ta::tensor::zeros<double>({3, 2});
    const double factor = 3.0;
    std::vector<double> xs = x.to_vector<double>();
    // captured state, typed views, one read and one write access
    ta::submit(
        o,
        [factor](ta::view<const double, 2> in, ta::view<double, 2> out) {
            for (size_t i = 0; i < in.extent(0); ++i)
                for (size_t j = 0; j < in.extent(1); ++j) out(j, i) = factor * in(i, j);
        },
        ta::in(x), ta::out(y));
    auto yv = y.to_vector<double>();
    bool ok = true;
    for (size_t i = 0; i < 2; ++i)
        for (size_t j = 0; j < 3; ++j) ok = ok && yv[j * 2 + i] == factor * xs[i * 3 + j];
    CHECK(ok);
    // a captureless kernel, extents/strides and contiguity, on a strided view
    std::atomic<int> seen_strides{0};
    auto tv = y.transpose();
    ta::submit(
        o,
        [&seen_strides](ta::view<const double, 2> v) {
            if (v.extents()[0] == 2 && v.extents()[1] == 3 && v.strides()[0] == 1 && v.strides()[1] == 2 &&
                !v.is_contiguous())
                seen_strides = 1;
            else
                seen_strides = 2;
        },
        ta::in(tv));
    ta::tensor::zeros<double>({1}).wait();
    y.wait();
    tv.ready().wait();
    CHECK(seen_strides.load() == 1);
    ta::submit([](ta::view<double, 2> v) { v(1, 1) += 100.0; }, ta::inout(y));
    CHECK(y.to_vector<double>()[3] == yv[3] + 100.0);
#if defined(TA_HPP_HAVE_SPAN)
    ta::submit([](ta::view<double, 2> v) {
        for (double &e : v.span()) e = 1.0;
    }, ta::out(y));
    CHECK(y.to_vector<double>() == std::vector<double>(6, 1.0));
#endif
    // kernel_ctx: parallel_for inside a kernel
    auto big = ta::tensor::zeros<double>({1000});
    ta::submit(
        o,
        [](ta::kernel_ctx &ctx, ta::view<double, 1> v) {
            ctx.parallel_for(0, v.extent(0), 64, [&](size_t b, size_t e) {
                for (size_t i = b; i < e; ++i) v(i) = double(i);
            });
        },
        ta::out(big));
    auto bv = big.to_vector<double>();
    ok = true;
    for (size_t i = 0; i < 1000; ++i) ok = ok && bv[i] == double(i);
    CHECK(ok);
    // dtype mismatch between the view and the tensor: the operation fails with a message.
    auto f32 = ta::tensor::zeros<float>({2});
    ta::submit(o, [](ta::view<double, 1> v) { v(0) = 1; }, ta::out(f32));
    try {
        f32.wait();
        CHECK(false);
    } catch (const ta::error &e) {
        CHECK(e.status() == ta::status::kernel_failed);
        CHECK(e.message().find("element type") != std::string::npos);
    }
    // a writable view declared as in(): refused at submission
    try {
        ta::submit(o, [](ta::view<double, 1>) {}, ta::in(big));
        CHECK(false);
    } catch (const ta::error &e) {
        CHECK(e.status() == ta::status::invalid_argument);
        CHECK(e.message().find("writable view") != std::string::npos);
    }
    // The kernel's state is destroyed once the operation completes.
    auto counter = std::make_shared<int>(0);
    {
        ta::event ev;
        ta::submit(ta::options(o).event_to(ev), [counter](ta::view<double, 1> v) { v(0) = *counter; },
                   ta::out(big));
        ev.wait();
    }
    while (counter.use_count() > 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(counter.use_count() == 1);
}

void test_kernel_exceptions(const ta::options &o) {
    auto a = ta::tensor::copy_of(std::vector<double>{1, 2}, {2});
    auto b = ta::tensor::zeros<double>({2});
    ta::event ev;
    ta::submit(ta::options(o).name("exploding").event_to(ev),
               [](ta::view<const double, 1>, ta::view<double, 1> out) {
                   out(0) = 42;
                   throw std::runtime_error("kernel says no");
               },
               ta::in(a), ta::out(b));
    try {
        ev.wait();
        CHECK(false);
    } catch (const ta::error &e) {
        CHECK(e.status() == ta::status::kernel_failed);
        CHECK(e.message() == "kernel says no");
        CHECK(e.origin() == "exploding");
    }
    // The output is poisoned with that error; the input is not.
    try {
        b.wait();
        CHECK(false);
    } catch (const ta::error &e) {
        CHECK(e.status() == ta::status::kernel_failed);
        CHECK(e.message() == "kernel says no");
    }
    a.wait();
    // Downstream reads of b fail with the same error.
    auto c = ta::tensor::empty(ta::dtype::f64);
    ta::copy(c, b, o);
    try {
        c.wait();
        CHECK(false);
    } catch (const ta::error &e) {
        CHECK(e.message() == "kernel says no");
    }
    // A non-std exception.
    ta::submit(o, [](ta::view<double, 1>) { throw 5; }, ta::out(b));
    try {
        b.wait();
        CHECK(false);
    } catch (const ta::error &e) {
        CHECK(e.message().find("unknown C++ exception") != std::string::npos);
    }
    // An overwrite cleans b.
    ta::fill(b, 1.0, o);
    b.wait();
    CHECK(b.to_vector<double>() == std::vector<double>(2, 1.0));
}

// Runs f, which must throw ta::error with status `s`, a message containing
// `in_message` and origin `origin`.
template <typename F> void expect_error(F f, ta::status s, const std::string &in_message, const std::string &origin) {
    bool thrown = false;
    try {
        f();
    } catch (const ta::error &e) {
        thrown = true;
        CHECK(e.status() == s);
        CHECK(e.message().find(in_message) != std::string::npos);
        CHECK(e.origin() == origin);
        if (e.status() != s || e.message().find(in_message) == std::string::npos || e.origin() != origin)
            std::fprintf(stderr, "  got %s '%s' from '%s'\n", ta::status_name(e.status()), e.what(),
                         e.origin().c_str());
    }
    CHECK(thrown);
}

// An exception in a parallel_for body never unwinds into the library: it
// fails the kernel (or the kernel catches it, rethrown on its own thread).
void test_parallel_for_exceptions(const ta::options &o) {
    auto u = ta::tensor::zeros<double>({1000});
    std::atomic<int> after{0};
    ta::event ev;
    ta::submit(ta::options(o).name("pf_kernel").event_to(ev),
               [&after](ta::kernel_ctx &ctx, ta::view<double, 1> v) {
                   ctx.parallel_for(0, v.extent(0), 10, [&](size_t b, size_t e) {
                       if (b >= 500) throw std::runtime_error("piece failed");
                       for (size_t i = b; i < e; ++i) v(i) = 1.0;
                   });
                   after = 1; // not reached: the exception comes out of parallel_for
               },
               ta::out(u));
    expect_error([&] { ev.wait(); }, ta::status::kernel_failed, "piece failed", "pf_kernel");
    expect_error([&] { u.wait(); }, ta::status::kernel_failed, "piece failed", "pf_kernel"); // poisoned
    CHECK(after.load() == 0);
    // A non-std exception from a piece.
    ta::submit(o, [](ta::kernel_ctx &ctx, ta::view<double, 1> v) {
        ctx.parallel_for(0, v.extent(0), 100, [](size_t, size_t) { throw 7; });
    }, ta::out(u));
    expect_error([&] { u.wait(); }, ta::status::kernel_failed, "unknown C++ exception", "ta_kernel_submit");
    // The kernel may catch the piece's exception itself (its type is kept).
    auto w = ta::tensor::zeros<double>({100});
    ta::submit(o, [](ta::kernel_ctx &ctx, ta::view<double, 1> v) {
        try {
            ctx.parallel_for(0, v.extent(0), 10, [](size_t b, size_t) {
                if (b == 50) throw std::logic_error("caught by the kernel");
            });
        } catch (const std::logic_error &ex) {
            v(0) = std::string(ex.what()) == "caught by the kernel" ? 7.0 : -1.0;
        }
    }, ta::out(w));
    CHECK(w.to_vector<double>()[0] == 7.0);
    // The call's own failure (begin > end) throws ta::error, which fails the kernel.
    ta::submit(o, [](ta::kernel_ctx &ctx, ta::view<double, 1>) {
        ctx.parallel_for(5, 1, 1, [](size_t, size_t) {});
    }, ta::out(w));
    expect_error([&] { w.wait(); }, ta::status::kernel_failed, "parallel_for", "ta_kernel_submit");
    // Without exceptions every piece runs, as before.
    ta::fill(u, 0.0, o);
    std::atomic<size_t> items{0};
    ta::submit(o, [&items](ta::kernel_ctx &ctx, ta::view<double, 1> v) {
        ctx.parallel_for(0, v.extent(0), 7, [&](size_t b, size_t e) {
            for (size_t i = b; i < e; ++i) v(i) = 2.0 * double(i);
            items += e - b;
        });
    }, ta::inout(u));
    auto uv = u.to_vector<double>();
    bool ok = items.load() == 1000;
    for (size_t i = 0; i < 1000; ++i) ok = ok && uv[i] == 2.0 * double(i);
    CHECK(ok);
}

// Typed host access checks the element type against the tensor's dtype, and
// vectors must hold exactly the extents' product of elements.
void test_host_data_checks(const ta::options &o) {
    auto d = ta::tensor::copy_of(std::vector<double>{1.5, 2.5, 3.5}, {3});
    expect_error([&] { (void)d.to_vector<float>(); }, ta::status::dtype_mismatch, "(f32) is not the tensor's dtype (f64)",
                 "ta::tensor::to_vector");
    expect_error([&] { (void)d.to_vector<int64_t>(); }, ta::status::dtype_mismatch, "(i64)", "ta::tensor::to_vector");
    expect_error([&] { (void)d.to_vector<std::complex<double>>(); }, ta::status::dtype_mismatch, "(c128)",
                 "ta::tensor::to_vector");
    auto d0 = ta::tensor::zeros<double>({});
    ta::fill(d0, 2.0, o);
    expect_error([&] { (void)d0.item<float>(); }, ta::status::dtype_mismatch, "(f32)", "ta::tensor::item");
    expect_error([&] { (void)d0.item<uint64_t>(); }, ta::status::dtype_mismatch, "(u64)", "ta::tensor::item");
    CHECK(d0.item<double>() == 2.0);
    const std::vector<float> fsrc{9, 8, 7};
    expect_error([&] { d.copy_in(fsrc.data(), {3}, o); }, ta::status::dtype_mismatch, "(f32)", "ta::tensor::copy_in");
    std::vector<float> fdst(3, -1.0f);
    expect_error([&] { d.copy_out(fdst.data(), fdst.size(), o); }, ta::status::dtype_mismatch, "(f32)",
                 "ta::tensor::copy_out");
    CHECK(fdst == std::vector<float>(3, -1.0f));
    CHECK(d.to_vector<double>() == (std::vector<double>{1.5, 2.5, 3.5})); // untouched
    // The right element type works (and void stays an untyped copy).
    const std::vector<double> dsrc{4, 5, 6};
    ta::event ev;
    d.copy_in(dsrc.data(), {3}, ta::options(o).event_to(ev));
    ev.wait();
    std::vector<double> ddst(3, 0.0);
    d.copy_out(static_cast<void *>(ddst.data()), 3, ta::options(o).event_to(ev));
    ev.wait();
    CHECK(ddst == dsrc);
    // On an unconstructed tensor the dtype is known too.
    auto e32 = ta::tensor::empty(ta::dtype::f32);
    expect_error([&] { e32.copy_in(dsrc.data(), {3}, o); }, ta::status::dtype_mismatch, "(f64) is not the tensor's dtype (f32)",
                 "ta::tensor::copy_in");

    // copy_of and adopt of a vector: exactly the extents' product of elements.
    expect_error([] { (void)ta::tensor::copy_of(std::vector<double>{1, 2, 3, 4}, {3, 3}); },
                 ta::status::shape_mismatch, "4 elements for extents [3, 3]", "ta::tensor::copy_of");
    expect_error([] { (void)ta::tensor::copy_of(std::vector<double>(10, 1.0), {3, 3}); },
                 ta::status::shape_mismatch, "10 elements for extents [3, 3]", "ta::tensor::copy_of");
    expect_error([] { (void)ta::tensor::copy_of(std::vector<double>(4, 1.0), {SIZE_MAX / 2 + 1, 4}); },
                 ta::status::shape_mismatch, "4 elements", "ta::tensor::copy_of");
    auto z = ta::tensor::copy_of(std::vector<double>{}, {0, 5});
    CHECK((z.extents() == std::vector<size_t>{0, 5}));
    std::vector<double> keep{1, 2, 3, 4};
    expect_error([&] { (void)ta::tensor::adopt(std::move(keep), {3, 3}); }, ta::status::shape_mismatch,
                 "4 elements for extents [3, 3]", "ta::tensor::adopt");
    CHECK(keep == (std::vector<double>{1, 2, 3, 4})); // left to the caller
    expect_error([&] { (void)ta::tensor::adopt(std::move(keep), {SIZE_MAX / 2, 4}); }, ta::status::shape_mismatch,
                 "4 elements", "ta::tensor::adopt");
    // A wrap that fails frees the adopted storage (LeakSanitizer sees it otherwise).
    expect_error([] { (void)ta::tensor::adopt(std::vector<double>(4, 1.0), {4}, static_cast<ta::order>(99)); },
                 ta::status::invalid_argument, "order", "ta_tensor_wrap");
    auto ad = ta::tensor::adopt(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK(ad.to_vector<double>() == (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

// Integer fill and scale are exact for every 64-bit value.
void test_integer_fill_scale(const ta::options &o) {
    const int64_t big = (int64_t(1) << 53) + 1; // no double names it
    auto i64 = ta::tensor::zeros<int64_t>({3});
    ta::fill(i64, big, o);
    CHECK(i64.to_vector<int64_t>() == std::vector<int64_t>(3, big));
    ta::fill(i64, int64_t(3), o);
    ta::scale(i64, int64_t(3000000000000001), o);
    CHECK(i64.to_vector<int64_t>() == std::vector<int64_t>(3, int64_t(9000000000000003)));
    ta::fill(i64, INT64_MIN, o);
    CHECK(i64.to_vector<int64_t>() == std::vector<int64_t>(3, INT64_MIN));
    auto u64 = ta::tensor::zeros<uint64_t>({2});
    ta::fill(u64, UINT64_MAX, o);
    CHECK(u64.to_vector<uint64_t>() == std::vector<uint64_t>(2, UINT64_MAX));
    const uint64_t ua = (uint64_t(1) << 62) + 1;
    ta::fill(u64, 3u, o);
    ta::scale(u64, ua, o);
    CHECK(u64.to_vector<uint64_t>() == std::vector<uint64_t>(2, uint64_t(3) * ua)); // wraps mod 2^64
    auto ll = ta::tensor::zeros<long long>({1});
    ta::fill(ll, (1LL << 60) + 7, o);
    CHECK(ll.item<long long>() == (1LL << 60) + 7);
    // A value the dtype does not hold is refused, as ta_fill refuses it.
    auto u8 = ta::tensor::zeros<uint8_t>({2});
    expect_error([&] { ta::fill(u8, -1, o); }, ta::status::invalid_argument, "", "ta_fill_i64");
    expect_error([&] { ta::fill(u8, 256u, o); }, ta::status::invalid_argument, "", "ta_fill_u64");
    // Integers still fill and scale floating-point tensors.
    auto f = ta::tensor::zeros<double>({2});
    ta::fill(f, 3, o);
    ta::scale(f, -2, o);
    CHECK(f.to_vector<double>() == std::vector<double>(2, -6.0));
}

// Every integer type has the dtype of its size and signedness.
static_assert(ta::dtype_v<long long> == ta::dtype::i64, "long long is i64");
static_assert(ta::dtype_v<unsigned long long> == ta::dtype::u64, "unsigned long long is u64");
static_assert(ta::dtype_v<long> == (sizeof(long) == 8 ? ta::dtype::i64 : ta::dtype::i32), "long");
static_assert(ta::dtype_v<char> == (CHAR_MIN < 0 ? ta::dtype::i8 : ta::dtype::u8), "char by its signedness");
static_assert(ta::dtype_v<signed char> == ta::dtype::i8 && ta::dtype_v<unsigned char> == ta::dtype::u8, "chars");
static_assert(ta::dtype_v<const int16_t> == ta::dtype::i16 && ta::dtype_v<uint32_t> == ta::dtype::u32, "cv");

void test_integer_types() {
    auto a = ta::tensor::copy_of(std::vector<long long>{-(1LL << 62), 5}, {2});
    CHECK(a.element_type() == ta::dtype::i64);
    CHECK((a.to_vector<long long>() == std::vector<long long>{-(1LL << 62), 5}));
    CHECK((a.to_vector<int64_t>() == std::vector<int64_t>{-(int64_t(1) << 62), 5}));
    auto b = ta::tensor::copy_of(std::vector<unsigned long long>{~0ULL, 2}, {2});
    CHECK(b.element_type() == ta::dtype::u64);
    CHECK((b.to_vector<uint64_t>() == std::vector<uint64_t>{UINT64_MAX, 2}));
    auto c = ta::tensor::copy_of(std::vector<char>{'a', 'z'}, {2});
    CHECK(c.element_type() == (CHAR_MIN < 0 ? ta::dtype::i8 : ta::dtype::u8));
    CHECK((c.to_vector<char>() == std::vector<char>{'a', 'z'}));
}

void test_raii_release_pending(const ta::runtime &rt, const ta::options &o) {
    size_t live0 = live_handles();
    auto *g = new gate;
    std::atomic<int> released{0};
    std::atomic<int> kernel_done{0};
    std::vector<double> mem(4, 1.0);
    {
        auto t = ta::tensor::wrap(mem.data(), {4}, ta::order::row_major, [&] {
            // After the last access: the kernel has run.
            released = kernel_done.load() ? 1 : 2;
        });
        ta::submit(
            o,
            [g, &kernel_done](ta::view<double, 1> v) {
                g->wait();
                v(3) = 7.0;
                kernel_done = 1;
            },
            ta::inout(t));
        // t's handle is freed here, with the kernel still pending.
    }
    CHECK(released.load() == 0);
    g->open = true;
    rt.wait_idle();
    while (released.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(released.load() == 1);
    CHECK(mem[3] == 7.0);
    delete g;
    // adopt(): the vector's storage is the tensor's; it is freed after the last access.
    {
        std::vector<double> v = {1, 2, 3};
        const double *p = v.data();
        auto t = ta::tensor::adopt(std::move(v), {3});
        ta::scale(t, 2.0, o);
        auto out = t.to_vector<double>();
        CHECK(out == (std::vector<double>{2, 4, 6}));
        (void)p;
    }
    // a const wrap is read-only
    const std::vector<double> cm = {1, 2};
    auto ct = ta::tensor::wrap(cm.data(), {2});
    CHECK(ct.read_only());
    try {
        ta::fill(ct, 0.0, o);
        CHECK(false);
    } catch (const ta::error &e) {
        CHECK(e.status() == ta::status::read_only);
    }
    ct = ta::tensor();
    rt.wait_idle();
    CHECK(live_handles() == live0);
}

void test_moves_share_clone(const ta::options &o) {
    size_t live0 = live_handles();
    auto a = ta::tensor::copy_of(std::vector<double>{1, 2, 3}, {3});
    CHECK(live_handles() == live0 + 1);
    ta::tensor b = std::move(a);
    CHECK(!a && bool(b));
    CHECK(live_handles() == live0 + 1);
    ta::tensor c = ta::tensor::zeros<double>({1});
    CHECK(live_handles() == live0 + 2);
    c = std::move(b); // the old c is freed
    CHECK(live_handles() == live0 + 1);
    static_assert(!std::is_copy_constructible<ta::tensor>::value, "tensor is move-only");
    static_assert(!std::is_copy_assignable<ta::event>::value, "event is move-only");
    static_assert(!std::is_copy_constructible<ta::runtime>::value, "runtime is move-only");
    static_assert(!std::is_copy_constructible<ta::completion_queue>::value, "cq is move-only");
    static_assert(!std::is_copy_constructible<ta::block_array>::value, "block_array is move-only");
    static_assert(std::is_nothrow_move_constructible<ta::tensor>::value, "noexcept moves");
    // share: same value and queue
    auto s = c.share();
    ta::scale(s, 10.0, o);
    CHECK(c.to_vector<double>() == (std::vector<double>{10, 20, 30}));
    // clone: a deep copy that sees earlier writes, then independent
    ta::event cev;
    auto k = c.clone(ta::options(o).event_to(cev));
    ta::scale(c, 2.0, o);
    cev.wait();
    CHECK(k.to_vector<double>() == (std::vector<double>{10, 20, 30}));
    CHECK(c.to_vector<double>() == (std::vector<double>{20, 40, 60}));
    CHECK(!k.is_view());
    // a clone of a view is the same view
    auto view = c.slice({ta::slice(0, 2)});
    auto vk = view.clone();
    CHECK(vk.is_view());
    ta::fill(vk, 0.0, o);
    CHECK(c.to_vector<double>() == (std::vector<double>{0, 0, 60}));
    // events move too
    ta::event e1;
    ta::fill(c, 1.0, ta::options(o).event_to(e1));
    ta::event e2 = std::move(e1);
    CHECK(!e1 && bool(e2));
    e2.wait();
    CHECK(e2.poll() == ta::status::ok);
    view = ta::tensor();
    vk = ta::tensor();
    s = ta::tensor();
    k = ta::tensor();
    c = ta::tensor();
    e2 = ta::event();
    cev = ta::event();
    CHECK(live_handles() == live0);
}

void test_events_and_cq(const ta::runtime &rt) {
    auto cq = ta::completion_queue::create();
    CHECK(cq.fd() >= 0);
    auto t = ta::tensor::zeros<double>({2});
    ta::fill(t, 3.0, ta::options().on(rt).notify(cq, 11));
    ta::event ev;
    ta::scale(t, 2.0, ta::options().on(rt).event_to(ev));
    std::atomic<int> cb{-1};
    ev.on_complete([&](ta::status s) { cb = static_cast<int>(s); });
    ev.wait();
    while (cb.load() < 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(cb.load() == 0);
    ev.notify(cq, 12);
    std::vector<ta::completion> got;
    while (got.size() < 2) {
        auto more = cq.wait(-1);
        for (auto &c : more) got.push_back(std::move(c));
    }
    CHECK(got.size() == 2);
    bool has11 = false, has12 = false;
    for (auto &c : got) has11 |= c.tag == 11 && c.ok(), has12 |= c.tag == 12 && c.ok();
    CHECK(has11 && has12);
    // a failing operation's entry carries its error
    auto bad = ta::tensor::empty(ta::dtype::f64);
    ta::submit(ta::options().on(rt).notify(cq, 13).name("failing"),
               [](ta::view<double, 1>) { throw std::runtime_error("entry error"); }, ta::out(ta::tensor::zeros<double>({1})));
    got.clear();
    while (got.empty()) got = cq.wait(-1);
    CHECK(got.size() == 1 && got[0].tag == 13 && got[0].status == ta::status::kernel_failed &&
          got[0].err.message() == "entry error");
    // runtime: threads, shutdown cancel of pending work
    auto rt2 = ta::runtime::create(1);
    CHECK(rt2.threads() == 1);
    gate g;
    auto x = ta::tensor::zeros<double>({1});
    ta::submit(ta::options().on(rt2), [&g](ta::view<double, 1>) { g.wait(); }, ta::inout(x));
    ta::event ready_before = x.ready();
    CHECK(ready_before.poll() == ta::status::pending); // the gated kernel holds x
    ta::event later;
    ta::fill(x, 1.0, ta::options().on(rt2).event_to(later));
    // Opens the gate once the shutdown has begun (submissions then fail), so
    // the fill queued behind the gated kernel has not started: it is cancelled.
    std::thread opener([&] {
        auto probe = ta::tensor::zeros<double>({1});
        for (;;) {
            try {
                ta::fill(probe, 0.0, ta::options().on(rt2));
            } catch (const ta::error &e) {
                if (e.status() == ta::status::shutdown) break;
                throw;
            }
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        g.open = true;
    });
    rt2.shutdown(ta::shutdown::cancel);
    opener.join();
    CHECK(later.poll() == ta::status::cancelled);
    try {
        later.wait();
        CHECK(false);
    } catch (const ta::error &e) {
        CHECK(e.status() == ta::status::cancelled);
    }
    try {
        ta::fill(x, 2.0, ta::options().on(rt2));
        CHECK(false);
    } catch (const ta::error &e) {
        CHECK(e.status() == ta::status::shutdown);
    }
}

#if defined(TA_HPP_HAVE_COROUTINES)
ta::task<double> dot_task(const ta::tensor &x, const ta::tensor &y, const ta::runtime &rt) {
    auto d = ta::tensor::zeros<double>({});
    ta::event ev;
    ta::dot(d, x, y, false, ta::options().on(rt).event_to(ev));
    co_await ev;
    co_await d.ready();
    co_return d.item<double>();
}

ta::task<double> outer_task(const ta::runtime &rt, std::thread::id *where) {
    auto x = ta::tensor::copy_of(std::vector<double>{1, 2, 3}, {3});
    auto y = ta::tensor::copy_of(std::vector<double>{4, 5, 6}, {3});
    ta::scale(x, 2.0, ta::options().on(rt));
    double d = co_await dot_task(x, y, rt);
    *where = std::this_thread::get_id();
    co_return d;
}

ta::task<void> failing_task(const ta::runtime &rt, std::string *msg) {
    auto b = ta::tensor::zeros<double>({1});
    ta::submit(ta::options().on(rt), [](ta::view<double, 1>) { throw std::runtime_error("coro boom"); },
               ta::out(b));
    try {
        co_await b.ready();
    } catch (const ta::error &e) {
        *msg = e.message();
    }
}

struct inline_runner {
    struct promise_type {
        inline_runner get_return_object() { return {}; }
        std::suspend_never initial_suspend() noexcept { return {}; }
        std::suspend_never final_suspend() noexcept { return {}; }
        void return_void() {}
        void unhandled_exception() { std::abort(); }
    };
};

inline_runner inline_coro(const ta::tensor &t, std::atomic<int> *state, std::thread::id *where) {
    co_await t.ready().resume_inline();
    *where = std::this_thread::get_id();
    state->store(1);
}

// Resumed inline on the worker that completes the kernel, the task finishes
// there: cq.run() must still return (it waited forever before).
ta::task<double> inline_task(const ta::runtime &rt, const ta::tensor &t, std::atomic<int> *awaiting,
                             std::thread::id *where) {
    ta::event ev;
    gate *g = new gate;
    std::thread opener([g, awaiting] {
        while (awaiting->load() == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
        std::this_thread::sleep_for(std::chrono::milliseconds(20)); // let the task suspend
        g->open = true;
    });
    ta::submit(ta::options().on(rt).event_to(ev), [g](ta::view<double, 1> v) {
        g->wait();
        v(0) = 4;
    }, ta::inout(t));
    awaiting->store(1);
    co_await ev.resume_inline();
    *where = std::this_thread::get_id();
    opener.join();
    delete g;
    co_return 2.5;
}

void test_coroutines(const ta::runtime &rt) {
    auto cq = ta::completion_queue::create();
    {
        auto t = ta::tensor::zeros<double>({1});
        std::atomic<int> awaiting{0};
        std::thread::id iw{};
        double r = cq.run(inline_task(rt, t, &awaiting, &iw));
        CHECK(r == 2.5);
        CHECK(iw != std::this_thread::get_id()); // it finished on a worker
        CHECK(t.item<double>() == 4);
    }
    std::thread::id where{};
    double d = cq.run(outer_task(rt, &where));
    CHECK(d == 2 * (1 * 4 + 2 * 5 + 3 * 6));
    CHECK(where == std::this_thread::get_id()); // resumed on the thread driving the queue
    std::string msg;
    cq.run(failing_task(rt, &msg));
    CHECK(msg == "coro boom");
    // Inline resumption on the completing thread: the coroutine continues there.
    gate g;
    auto t = ta::tensor::zeros<double>({1});
    ta::submit(ta::options().on(rt), [&g](ta::view<double, 1> v) {
        g.wait();
        v(0) = 9;
    }, ta::inout(t));
    std::atomic<int> state{0};
    std::thread::id iw{};
    inline_coro(t, &state, &iw);
    CHECK(state.load() == 0); // suspended, nothing blocked
    g.open = true;
    while (state.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(state.load() == 1);
    CHECK(iw != std::this_thread::get_id());
    CHECK(t.item<double>() == 9);
}
#endif

void test_mappings(const ta::options &o) {
    auto t = ta::tensor::zeros<double>({2, 3});
    ta::fill(t, 2.0, o);
    {
        auto r = t.read(); // waits for the fill
        auto v = r.view<double, 2>();
        static_assert(std::is_const<typename decltype(v)::element_type>::value, "read views are const");
        CHECK((v(1, 2) == 2.0 && v.extent(0) == 2 && v.extent(1) == 3));
        // a later reader does not wait for a live read mapping; a later writer does
        auto r2 = t.read(); // would hang if it waited for r
        CHECK((r2.view<double, 2>()(0, 0) == 2.0));
        ta::event w;
        ta::fill(t, 3.0, ta::options(o).event_to(w));
        CHECK(w.poll() == ta::status::pending);
        r2.reset();
        CHECK(w.poll() == ta::status::pending); // r still holds its access
    }
    {
        auto u = t.update(); // after the fill of 3
        auto v = u.view<double, 2>();
        CHECK(v(0, 0) == 3.0);
        v(0, 1) = 5.0;
        ta::event ev;
        ta::scale(t, 2.0, ta::options(o).event_to(ev));
        CHECK(ev.poll() == ta::status::pending); // waits for the mapping
    }
    auto out = t.to_vector<double>();
    CHECK(out[1] == 10.0 && out[0] == 6.0);
    try {
        (void)t.read().view<float, 2>();
        CHECK(false);
    } catch (const ta::error &e) {
        CHECK(e.status() == ta::status::dtype_mismatch);
    }
    // A poisoned tensor: read fails with its error; write overwrites and cleans.
    auto p = ta::tensor::zeros<double>({2});
    ta::submit(ta::options(o).name("poisoner"), [](ta::view<double, 1>) { throw std::runtime_error("poisoned here"); },
               ta::out(p));
    try {
        (void)p.read();
        CHECK(false);
    } catch (const ta::error &e) {
        CHECK(e.status() == ta::status::kernel_failed && e.message() == "poisoned here");
    }
    {
        auto w = p.write();
        auto v = w.view<double, 1>();
        v(0) = 1.0;
        v(1) = 2.0;
    }
    CHECK(p.to_vector<double>() == (std::vector<double>{1.0, 2.0}));
    // Non-blocking acquisition, then a blocking wait for the grant.
    auto pending = p.update_async();
    auto granted = std::move(pending).wait();
    granted.view<double, 1>()(0) = 7.0;
    granted.reset();
    CHECK(p.to_vector<double>()[0] == 7.0);
}

// A kernel that defers its completion to another thread.
void test_deferred_and_external(const ta::options &o) {
    auto t = ta::tensor::zeros<double>({3});
    std::thread finisher;
    std::atomic<bool> handed{false};
    ta::token held;
    ta::view<double, 1> kept;
    ta::submit(
        ta::options(o).name("deferring"),
        [&](ta::kernel_ctx &ctx, ta::view<double, 1> v) {
            held = ctx.defer();
            kept = v;
            handed = true;
        },
        ta::out(t));
    while (!handed.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    ta::event after;
    ta::scale(t, 2.0, ta::options(o).event_to(after));
    CHECK(t.ready().poll() == ta::status::pending); // the kernel returned, the operation has not completed
    finisher = std::thread([&] {
        for (size_t i = 0; i < 3; ++i) kept(i) = double(i + 1);
        CHECK(held.finish() == ta::status::ok);
    });
    finisher.join();
    after.wait();
    CHECK(t.to_vector<double>() == (std::vector<double>{2, 4, 6}));
    // A token destroyed unfinished fails its operation.
    handed = false;
    ta::submit(o, [&](ta::kernel_ctx &ctx, ta::view<double, 1>) {
        held = ctx.defer();
        handed = true;
    }, ta::out(t));
    while (!handed.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    CHECK(bool(held));
    held = ta::token();
    try {
        t.wait();
        CHECK(false);
    } catch (const ta::error &e) {
        CHECK(e.status() == ta::status::kernel_failed && e.message().find("unfinished") != std::string::npos);
    }
    // An external operation: the program's own thread does the work.
    auto x = ta::tensor::copy_of(std::vector<double>{1, 2}, {2});
    auto y = ta::tensor::zeros<double>({2});
    auto op = ta::external(ta::options(o).name("external"), ta::in(x), ta::out(y));
    op.started.wait();
    auto xv = op.token.view<const double, 1>(0);
    auto yv = op.token.view<double, 1>(1);
    yv(0) = xv(0) * 10;
    yv(1) = xv(1) * 10;
    CHECK(op.completed.poll() == ta::status::pending);
    CHECK((op.token.finish() == ta::status::ok));
    op.completed.wait();
    CHECK(y.to_vector<double>() == (std::vector<double>{10, 20}));
    auto op2 = ta::external(ta::options(o).name("external2"), ta::out(y));
    op2.started.wait();
    CHECK(op2.token.finish(ta::status::kernel_failed, "external work failed") == ta::status::ok);
    try {
        y.wait();
        CHECK(false);
    } catch (const ta::error &e) {
        CHECK(e.message() == "external work failed" && e.origin() == "external2");
    }
}

// Wrapped memory whose release is reported on a completion queue.
void test_wrap_notify(const ta::options &o) {
    auto cq = ta::completion_queue::create();
    std::vector<double> mem = {1, 2, 3};
    gate g;
    {
        auto t = ta::tensor::wrap_notify(mem.data(), {3}, cq, 77);
        ta::submit(o, [&g](ta::view<double, 1> v) {
            g.wait();
            v(0) = 9;
        }, ta::inout(t));
    }
    CHECK(cq.poll().empty()); // the kernel still holds the memory
    g.open = true;
    std::vector<ta::completion> got;
    while (got.empty()) got = cq.wait(-1);
    CHECK(got.size() == 1 && got[0].tag == 77 && got[0].ok());
    CHECK(mem[0] == 9);
    const std::vector<double> cm = {4, 5};
    auto ct = ta::tensor::wrap_notify(cm.data(), {2}, cq, 78);
    CHECK(ct.read_only());
}

#if defined(TA_HPP_HAVE_COROUTINES)
ta::task<double> mapped_sum(const ta::tensor &t) {
    auto m = co_await t.read_async();
    auto v = m.view<double, 1>();
    double s = 0;
    for (size_t i = 0; i < v.extent(0); ++i) s += v(i);
    co_return s;
}

void test_coroutine_mapping(const ta::runtime &rt) {
    auto cq = ta::completion_queue::create();
    auto t = ta::tensor::copy_of(std::vector<double>{1, 2, 3, 4}, {4});
    ta::scale(t, 3.0, ta::options().on(rt));
    CHECK(cq.run(mapped_sum(t)) == 30.0);
}
#endif

std::string read_file(const std::string &path) {
    std::string s;
    if (FILE *f = std::fopen(path.c_str(), "rb")) {
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
        std::fclose(f);
    }
    return s;
}

size_t count_of(const std::string &hay, const std::string &needle) {
    size_t n = 0;
    for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
    return n;
}

// The trace event of the task named `name` (one line of the library's JSON).
std::string task_event(const std::string &trace, const std::string &name) {
    size_t at = trace.find("{\"name\":\"" + name + "\",\"cat\":\"task\"");
    if (at == std::string::npos) return {};
    return trace.substr(at, trace.find('\n', at) - at);
}

// The operation number in a task event ("args":{"id":N).
std::string task_id(const std::string &event) {
    const std::string key = "\"args\":{\"id\":";
    size_t at = event.find(key);
    if (at == std::string::npos) return "?";
    at += key.size();
    return event.substr(at, event.find(',', at) - at);
}

// Observability: stats deltas of a known program, a trace of named
// operations, and the dump of an operation blocked behind a write mapping.
void test_observability() {
    ta::runtime rt(2);
    ta::options o = ta::options().on(rt);
    auto x = ta::tensor::zeros<double>({4});
    auto z = ta::tensor::zeros<double>({2});
    auto w = ta::tensor::zeros<double>({2});
    rt.wait_idle();

    // Exact counters: 4 operations, the throwing kernel and the copy of its
    // poisoned output fail, nothing is cancelled or left pending.
    ta::stats s0 = rt.stats();
    CHECK(s0.threads == 2);
    ta::fill(x, 1.0, o);
    ta::scale(x, 3.0, o);
    ta::submit(o, [](ta::view<double, 1>) { throw std::runtime_error("stats failure"); }, ta::out(z));
    ta::copy(w, z, o);
    rt.wait_idle();
    ta::stats s1 = rt.stats();
    CHECK(s1.tasks_submitted - s0.tasks_submitted == 4);
    CHECK(s1.tasks_completed - s0.tasks_completed == 4);
    CHECK(s1.tasks_failed - s0.tasks_failed == 2);
    CHECK(s1.tasks_cancelled == s0.tasks_cancelled);
    CHECK(s1.pending == 0 && s1.queue_depth == 0);
    CHECK(s1.peak_pending >= s0.peak_pending);
    CHECK(s1.threads == 2 && s1.busy_ns >= s0.busy_ns);
    CHECK(s1.steals >= s0.steals);
    CHECK(x.to_vector<double>() == std::vector<double>(4, 3.0));

    // A trace holds each traced operation's name (library operations are
    // named after themselves), each exactly once, and the waits between them.
    // A gate kernel holds x until all are enrolled, so that each waits for
    // the one before: gate -> fill -> kernel -> scale.
    rt.trace_start(1024);
    gate g;
    ta::submit(ta::options(o).name("obs_gate"), [&g](ta::view<double, 1>) { g.wait(); }, ta::inout(x));
    ta::fill(x, 2.0, o);
    ta::submit(ta::options(o).name("obs_kernel"), [](ta::view<double, 1> v) { v(0) += 1.0; }, ta::inout(x));
    ta::scale(x, 2.0, o);
    g.open = true;
    rt.wait_idle();
    std::string path = "target/bindings-cpp/obs_trace_" + std::to_string(__cplusplus) + ".json";
    rt.trace_stop(path);
    std::string trace = read_file(path);
    CHECK(trace.find("traceEvents") != std::string::npos);
    CHECK(count_of(trace, "\"fill\"") == 1);
    CHECK(count_of(trace, "\"obs_kernel\"") == 1);
    CHECK(count_of(trace, "\"scale\"") == 1);
    // The edges are the chain's dependencies.
    std::string gate_ev = task_event(trace, "obs_gate"), fill_ev = task_event(trace, "fill"),
                kernel_ev = task_event(trace, "obs_kernel"), scale_ev = task_event(trace, "scale");
    CHECK(gate_ev.find("\"preds\":[]") != std::string::npos);
    CHECK(fill_ev.find("\"preds\":[{\"op\":" + task_id(gate_ev) + ",") != std::string::npos);
    CHECK(kernel_ev.find("\"preds\":[{\"op\":" + task_id(fill_ev) + ",") != std::string::npos);
    CHECK(scale_ev.find("\"preds\":[{\"op\":" + task_id(kernel_ev) + ",") != std::string::npos);
    CHECK(count_of(trace, "\"ph\":\"s\"") == 3);
    CHECK(trace.find("\"recorded\":4,\"dropped\":0") != std::string::npos);
    CHECK((x.to_vector<double>() == std::vector<double>{6.0, 4.0, 4.0, 4.0}));
    try {
        rt.trace_stop(path); // not recording any more
        CHECK(false);
    } catch (const ta::error &e) {
        CHECK(e.status() == ta::status::invalid_argument);
        CHECK(e.message() == "the runtime is not recording a trace");
    }
    rt.trace_start();
    rt.trace_discard();

    // The dump names a fill waiting behind a live write mapping. Mappings
    // use the default runtime, so the fill runs there too: the dump shows
    // waits between operations of the runtime it reports on.
    ta::runtime d = ta::runtime::default_runtime();
    ta::stats ds = d.stats();
    CHECK(ds.threads >= 1 && ds.tasks_completed <= ds.tasks_submitted);
    d.track(true);
    auto t = ta::tensor::zeros<double>({3});
    {
        auto m = t.write();
        ta::event ev;
        ta::fill(t, 5.0, ta::options().on(d).event_to(ev));
        CHECK(ev.poll() == ta::status::pending);
        std::string text = d.dump();
        CHECK(text.find("\"fill\": WAITING") != std::string::npos);
        CHECK(text.find("\"ta_tensor_acquire\": RUNNING") != std::string::npos);
        CHECK(text.find("waits for op #") != std::string::npos);
        CHECK(text.find("\"ta_tensor_acquire\" (running) on tensor") != std::string::npos);
        std::string dot = d.dump(ta::dump_format::dot);
        CHECK(dot.rfind("digraph", 0) == 0);
        CHECK(dot.find("fill\\nwaiting") != std::string::npos);
        CHECK(dot.find(" -> ") != std::string::npos);
    }
    CHECK(t.to_vector<double>() == std::vector<double>(3, 5.0));
    d.wait_idle();
    CHECK(d.dump().find("\"fill\"") == std::string::npos);
    d.track(false);
}

} // namespace

// Priorities: one worker held by a gated kernel; what waited meanwhile runs
// highest priority first, equal priorities (and none) in submission order.
// Small operations in place: a small fill on an idle tensor has completed
// when the call returns and was not taken by a worker; deferred, or with
// the runtime's switch off, a worker takes it.
void test_in_place() {
    ta::runtime rt(2);
    ta::options o = ta::options().on(rt);
    auto x = ta::tensor::zeros<double>({4});
    rt.wait_idle();
    CHECK(rt.small_in_place());
    ta::stats s0 = rt.stats();
    ta::fill(x, 2.0, o);
    ta::stats s1 = rt.stats();  // no wait
    CHECK(s1.tasks_completed - s0.tasks_completed == 1 && s1.steals == s0.steals);
    ta::fill(x, 3.0, ta::options(o).defer());
    rt.wait_idle();
    ta::stats s2 = rt.stats();
    CHECK(s2.tasks_completed - s1.tasks_completed == 1 && s2.steals - s1.steals == 1);
    rt.set_small_in_place(false);
    CHECK(!rt.small_in_place());
    ta::scale(x, 2.0, o);
    rt.wait_idle();
    ta::stats s3 = rt.stats();
    CHECK(s3.steals - s2.steals == 1);
    rt.set_small_in_place(true);
    CHECK(rt.small_in_place());
    CHECK(x.to_vector<double>() == std::vector<double>(4, 6.0));
}

void test_priority() {
    auto rt = ta::runtime::create(1);
    gate g;
    std::atomic<bool> started{false};
    auto held = ta::tensor::zeros<double>({1});
    ta::submit(ta::options().on(rt), [&g, &started](ta::view<double, 1>) { started = true; g.wait(); }, ta::inout(held));
    while (!started.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    std::mutex mu;
    std::vector<int> order;
    const int32_t prio[] = {0, 5, -1, 5, 9, 0};
    std::vector<ta::tensor> ts;
    for (int i = 0; i < 6; i++) {
        ts.push_back(ta::tensor::zeros<double>({1}));
        ta::submit(ta::options().on(rt).priority(prio[i]),
                   [i, &mu, &order](ta::view<double, 1>) {
                       std::lock_guard<std::mutex> l(mu);
                       order.push_back(i);
                   },
                   ta::inout(ts.back()));
    }
    g.open = true;
    rt.wait_idle();
    CHECK((order == std::vector<int>{4, 1, 3, 0, 5, 2}));
}

int main() {
    ta::runtime rt(2);
    ta::options o = ta::options().on(rt);
    test_enums_and_errors(o);
    test_blas1(o);
    test_gemm(o);
    test_factor(o);
    test_views(o);
    test_blocks(o);
    test_kernels(o);
    test_kernel_exceptions(o);
    test_parallel_for_exceptions(o);
    test_host_data_checks(o);
    test_integer_fill_scale(o);
    test_integer_types();
    test_raii_release_pending(rt, o);
    test_moves_share_clone(o);
    test_events_and_cq(rt);
#if defined(TA_HPP_HAVE_COROUTINES)
    test_coroutines(rt);
#else
    std::printf("coroutines: not available in this language mode\n");
#endif
    test_mappings(o);
    test_deferred_and_external(o);
    test_wrap_notify(o);
#if defined(TA_HPP_HAVE_COROUTINES)
    test_coroutine_mapping(rt);
#endif
    test_observability();
    test_in_place();
    test_priority();
    return finish("test_cpp");
}
