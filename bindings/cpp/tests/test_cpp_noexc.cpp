// Tests of tensorasync.hpp in the no-exceptions mode (built with
// -fno-exceptions): every fallible call returns ta::result<T>, which is
// std::expected<T, ta::error> where the library has it (C++23), else the
// bundled result type.
#include <tensorasync.hpp>

#include <string>
#include <type_traits>
#include <vector>

#include "check.hpp"

#if defined(__cpp_exceptions)
#error "this test is built with -fno-exceptions"
#endif

int main() {
#if defined(TA_HPP_HAVE_EXPECTED)
    static_assert(std::is_same<ta::result<int>, std::expected<int, ta::error>>::value, "std::expected at C++23");
    std::printf("result type: std::expected\n");
#else
    std::printf("result type: bundled ta::result\n");
#endif
    static_assert(std::is_same<decltype(ta::tensor::zeros<double>({1})), ta::result<ta::tensor>>::value,
                  "factories return results");
    static_assert(std::is_same<decltype(ta::fill(std::declval<ta::tensor &>(), 1.0)), ta::result<void>>::value,
                  "operations return result<void>");

    auto rt = ta::runtime::create(2);
    CHECK(rt.has_value());
    ta::options o = ta::options().on(*rt);

    // Success: values inside results.
    auto a = ta::tensor::copy_of(std::vector<double>{1, 2, 3, 4}, {2, 2});
    auto b = ta::tensor::copy_of(std::vector<double>{5, 6, 7, 8}, {2, 2});
    CHECK(a && b);
    auto c = ta::tensor::zeros<double>({2, 2});
    CHECK(c.has_value());
    auto g = ta::gemm(*c, 1.0, *a, *b, 0.0, o);
    CHECK(g.has_value());
    auto v = c->to_vector<double>();
    CHECK(v.has_value());
    CHECK(*v == (std::vector<double>{19, 22, 43, 50}));

    // Failure at submission: an error value with status and message, nothing thrown.
    auto bad = ta::tensor::zeros<double>({3, 3});
    auto r = ta::gemm(*bad, 1.0, *a, *b, 0.0, o);
    CHECK(!r.has_value());
    CHECK(r.error().status() == ta::status::shape_mismatch);
    CHECK(!r.error().message().empty());
    CHECK(r.error().origin().find("gemm") != std::string::npos);

    auto rs = a->reshape({3});
    CHECK(!rs);
    CHECK(rs.error().status() == ta::status::shape_mismatch);

    // A kernel reports failure by returning a status; the output is poisoned.
    auto out = ta::tensor::zeros<double>({2});
    auto s = ta::submit(ta::options(o).name("noexc_kernel"),
                        [](ta::view<double, 1> x) -> ta::status {
                            x(0) = 1;
                            return ta::status::kernel_failed;
                        },
                        ta::out(*out));
    CHECK(s.has_value());
    auto w = out->wait();
    CHECK(!w.has_value());
    CHECK(w.error().status() == ta::status::kernel_failed);
    CHECK(w.error().origin() == "noexc_kernel");
    auto item = out->item<double>();
    CHECK(!item.has_value());

    // Events give results too.
    ta::event ev;
    CHECK(ta::fill(*out, 2.0, ta::options(o).event_to(ev)).has_value());
    CHECK(ev.wait().has_value());
    CHECK(*out->to_vector<double>() == (std::vector<double>{2.0, 2.0}));
    // Observability in result mode: stats as a value, errors as results.
    {
        auto st = rt->stats();
        CHECK(st.has_value() && st->threads == 2);
        auto stop = rt->trace_stop("target/bindings-cpp/never_written.json");
        CHECK(!stop.has_value() && stop.error().status() == ta::status::invalid_argument);
        CHECK(rt->trace_start(16).has_value());
        CHECK(rt->trace_discard().has_value());
        CHECK(rt->track(true).has_value());
        auto dot = rt->dump(ta::dump_format::dot);
        CHECK(dot.has_value() && dot->rfind("digraph", 0) == 0);
        CHECK(rt->track(false).has_value());
    }
    return finish("test_cpp_noexc");
}
