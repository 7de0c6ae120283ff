// Tests of tensorasync.hpp in the no-exceptions mode (built with
// -fno-exceptions): every fallible call returns ta::result<T>, which is
// std::expected<T, ta::error> where the library has it (C++23), else the
// bundled result type.
#include <tensorasync.hpp>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "check.hpp"

#if defined(__cpp_exceptions)
#error "this test is built with -fno-exceptions"
#endif

// A result holding an error, in either result type.
template <typename T> ta::result<T> error_result(ta::error e) {
#if defined(TA_HPP_HAVE_EXPECTED)
    return std::unexpected<ta::error>(std::move(e));
#else
    return ta::result<T>(std::move(e));
#endif
}

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
    // Results are assignable, and copyable where the value is (as std::expected).
    static_assert(std::is_move_assignable<ta::result<ta::tensor>>::value, "move-assignable");
    static_assert(!std::is_copy_constructible<ta::result<ta::tensor>>::value, "a tensor result is move-only");
    static_assert(!std::is_copy_assignable<ta::result<ta::tensor>>::value, "a tensor result is move-only");
    static_assert(std::is_copy_constructible<ta::result<std::vector<double>>>::value &&
                      std::is_copy_assignable<ta::result<std::vector<double>>>::value,
                  "a vector result copies");
    {
        ta::result<ta::tensor> t = ta::tensor::zeros<double>({3});
        t = ta::tensor::zeros<double>({4}); // value over value
        CHECK(t.has_value() && *t->extents() == (std::vector<size_t>{4}));
        t = a->reshape({3}); // error over value
        CHECK(!t.has_value() && t.error().status() == ta::status::shape_mismatch);
        t = ta::tensor::copy_of(std::vector<double>{7, 8}, {2}); // value over error
        CHECK(t.has_value() && *t->to_vector<double>() == (std::vector<double>{7, 8}));
        ta::result<ta::tensor> u = a->reshape({5});
        u = std::move(t); // value over error, by move
        CHECK(u.has_value() && *u->to_vector<double>() == (std::vector<double>{7, 8}));
        ta::result<std::vector<double>> v1 = std::vector<double>{1, 2};
        ta::result<std::vector<double>> v2 = v1; // copy
        CHECK(v1.has_value() && v2.has_value() && *v2 == (std::vector<double>{1, 2}));
        ta::result<std::vector<double>> v3 = error_result<std::vector<double>>(
            ta::error(ta::status::out_of_range, "none", "here"));
        v3 = v2; // copy over error
        CHECK(v3.has_value() && *v3 == *v1);
        v2 = error_result<std::vector<double>>(ta::error(ta::status::timeout, "late", "there"));
        CHECK(!v2.has_value() && v2.error().status() == ta::status::timeout && v2.error().message() == "late");
        const auto &cv = v3;
        CHECK(cv.value().size() == 2 && (*cv)[1] == 2.0 && cv->front() == 1.0);
    }
    // Element types and vector sizes are checked: errors as results.
    {
        auto tv = a->to_vector<float>();
        CHECK(!tv.has_value() && tv.error().status() == ta::status::dtype_mismatch &&
              tv.error().origin() == "ta::tensor::to_vector");
        auto it = a->item<int64_t>();
        CHECK(!it.has_value() && it.error().status() == ta::status::dtype_mismatch);
        std::vector<float> src(4, 1.0f);
        auto ci = a->copy_in(src.data(), {2, 2}, o);
        CHECK(!ci.has_value() && ci.error().status() == ta::status::dtype_mismatch);
        auto co = a->copy_out(src.data(), src.size(), o);
        CHECK(!co.has_value() && co.error().status() == ta::status::dtype_mismatch);
        auto sh = ta::tensor::copy_of(std::vector<double>{1, 2, 3}, {2, 2});
        CHECK(!sh.has_value() && sh.error().status() == ta::status::shape_mismatch &&
              sh.error().message() == "3 elements for extents [2, 2]");
        auto ad = ta::tensor::adopt(std::vector<double>{1, 2, 3}, {2, 2});
        CHECK(!ad.has_value() && ad.error().status() == ta::status::shape_mismatch);
        // long long, unsigned long long and char have dtypes.
        auto ll = ta::tensor::copy_of(std::vector<long long>{-3, 1LL << 60}, {2});
        CHECK(ll.has_value() && ll->element_type() == ta::dtype::i64);
        CHECK(*ll->to_vector<long long>() == (std::vector<long long>{-3, 1LL << 60}));
        auto ull = ta::tensor::copy_of(std::vector<unsigned long long>{~0ULL}, {1});
        CHECK(ull.has_value() && *ull->item<unsigned long long>() == ~0ULL);
        auto ch = ta::tensor::copy_of(std::vector<char>{'x'}, {1});
        CHECK(ch.has_value() && *ch->item<char>() == 'x');
        // Integer fill is exact.
        CHECK(ta::fill(*ll, (1LL << 53) + 1, o).has_value());
        CHECK(*ll->to_vector<long long>() == std::vector<long long>(2, (1LL << 53) + 1));
    }
    return finish("test_cpp_noexc");
}
