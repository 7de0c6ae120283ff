// tiled_cholesky.cpp: tiled Cholesky factorisation (lower, right-looking) with
// the C++ binding, on a block array. The tasks are submitted in program
// order, never waiting in between; each tile's epoch queue orders them.
// The result is checked against a plain C++ Cholesky of the same matrix and
// by the residual max|A - L L^T|; the program exits non-zero on a mismatch.
#include <tensorasync.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

static std::vector<double> make_spd(size_t n, unsigned seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<double> m(n * n), a(n * n);
    for (double &x : m) x = u(rng);
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j <= i; ++j) {
            double s = 0;
            for (size_t p = 0; p < n; ++p) s += m[i * n + p] * m[j * n + p];
            if (i == j) s += double(n);
            a[i * n + j] = a[j * n + i] = s;
        }
    return a;
}

static bool ref_cholesky(std::vector<double> &l, size_t n) {
    for (size_t j = 0; j < n; ++j) {
        double d = l[j * n + j];
        for (size_t p = 0; p < j; ++p) d -= l[j * n + p] * l[j * n + p];
        if (!(d > 0)) return false;
        d = std::sqrt(d);
        l[j * n + j] = d;
        for (size_t i = j + 1; i < n; ++i) {
            double s = l[i * n + j];
            for (size_t p = 0; p < j; ++p) s -= l[i * n + p] * l[j * n + p];
            l[i * n + j] = s / d;
        }
    }
    return true;
}

static int run_case(const ta::runtime &rt, size_t n, size_t nb) {
    const ta::options o = ta::options().on(rt);
    const std::vector<double> a0 = make_spd(n, unsigned(n * 31 + nb));
    auto blocks = ta::block_array::tiled(ta::dtype::f64, {n, n}, {nb, nb});
    const size_t nt = (n + nb - 1) / nb;
    // Load the matrix through the whole-array view.
    ta::event loaded;
    blocks.all().copy_in(a0.data(), {n, n}, ta::options(o).event_to(loaded));
    auto tile = [&](size_t i, size_t j) { return blocks.tile({i, j}); };
    for (size_t k = 0; k < nt; ++k) {
        auto akk = tile(k, k);
        ta::potrf(akk, ta::uplo::lower, o);
        for (size_t i = k + 1; i < nt; ++i)
            ta::trsm(tile(i, k), ta::side::right, ta::uplo::upper, ta::diag::non_unit, 1.0, akk.transpose(), o);
        for (size_t i = k + 1; i < nt; ++i) {
            auto aik = tile(i, k);
            ta::syrk(tile(i, i), ta::uplo::lower, -1.0, aik, 1.0, o);
            for (size_t j = k + 1; j < i; ++j) ta::gemm(tile(i, j), -1.0, aik, tile(j, k).transpose(), 1.0, o);
        }
    }
    loaded.wait();
    const std::vector<double> l = blocks.all().to_vector<double>();
    std::vector<double> ref = a0;
    if (!ref_cholesky(ref, n)) {
        std::fprintf(stderr, "reference Cholesky failed\n");
        return 1;
    }
    double err = 0, res = 0;
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j <= i; ++j) {
            err = std::fmax(err, std::fabs(l[i * n + j] - ref[i * n + j]));
            double s = 0;
            for (size_t p = 0; p <= j; ++p) s += l[i * n + p] * l[j * n + p];
            res = std::fmax(res, std::fabs(s - a0[i * n + j]));
        }
    // The tiles strictly above the diagonal are never written.
    bool upper_untouched = true;
    for (size_t i = 0; i < n; ++i)
        for (size_t j = (i / nb + 1) * nb; j < n; ++j) upper_untouched &= l[i * n + j] == a0[i * n + j];
    const double tol = 1e-10 * double(n);
    const bool ok = err <= tol && res <= tol * double(n) && upper_untouched;
    std::printf("n = %zu, tile %zu (%zu x %zu tiles): max|L - Lref| = %.2e, max|A - LL^T| = %.2e: %s\n", n, nb, nt,
                nt, err, res, ok ? "verified" : "MISMATCH");
    return ok ? 0 : 1;
}

int main() {
    ta::runtime rt(0);
    int failures = 0;
    failures += run_case(rt, 64, 16);
    failures += run_case(rt, 100, 32); // ragged last tile
    failures += run_case(rt, 37, 37);  // one tile
    // A matrix that is not positive definite: the failing POTRF's error reaches the result.
    auto blocks = ta::block_array::tiled(ta::dtype::f64, {4, 4}, {2, 2});
    std::vector<double> bad = {1, 2, 0, 0, 2, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    blocks.all().copy_in(bad.data(), {4, 4}, ta::options().on(rt));
    ta::potrf(blocks.tile({0, 0}), ta::uplo::lower, ta::options().on(rt));
    ta::trsm(blocks.tile({1, 0}), ta::side::right, ta::uplo::upper, ta::diag::non_unit, 1.0,
             blocks.tile({0, 0}).transpose(), ta::options().on(rt));
    try {
        blocks.tile({1, 0}).wait();
        std::printf("not positive definite: MISMATCH (no error)\n");
        ++failures;
    } catch (const ta::error &e) {
        const bool ok = e.origin() == "ta_potrf";
        std::printf("not positive definite: error from %s reached the tile below (\"%s\"): %s\n", e.origin().c_str(),
                    e.message().c_str(), ok ? "verified" : "MISMATCH");
        failures += ok ? 0 : 1;
    }
    return failures ? 1 : 0;
}
