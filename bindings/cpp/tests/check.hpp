// Minimal test harness for the C++ binding tests.
#ifndef TA_CPP_TEST_CHECK_HPP
#define TA_CPP_TEST_CHECK_HPP
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>

static int g_failures = 0;
static int g_checks = 0;

#define CHECK(cond)                                                                                  \
    do {                                                                                             \
        ++g_checks;                                                                                  \
        if (!(cond)) {                                                                               \
            ++g_failures;                                                                            \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);           \
        }                                                                                            \
    } while (0)

template <typename T> inline bool near(T a, T b, double tol = 1e-10) {
    return std::abs(a - b) <= tol * (1.0 + std::abs(b));
}

inline int finish(const char *name) {
    std::printf("%s: %d checks, %d failed\n", name, g_checks, g_failures);
    return g_failures ? 1 : 0;
}
#endif
