// tensorasync.hpp: the C++ interface of tensorasync, header-only, over the C ABI
// of tensorasync.h.
//
// C++17 or later; with C++20, std::span accessors and coroutines (ta::task,
// co_await on events and on t.ready()); with C++23 (std::expected), the
// no-exceptions mode returns std::expected.
//
// Error model: by default every failure throws ta::error (a std::exception with
// status(), code(), origin() and message()). Define TA_HPP_NO_EXCEPTIONS (or
// compile with -fno-exceptions) and every fallible function returns
// ta::result<T> instead: std::expected<T, ta::error> where the standard library
// has it, else the bundled ta::result<T> with the same basic interface
// (has_value(), operator bool, value(), error(), operator*, operator->).
//
// Handles (tensor, event, runtime, completion_queue, block_array, mapping) are
// move-only and free their C handle when destroyed. Freeing never blocks and
// never cancels: pending operations keep what they use alive. A second handle
// to the same tensor is made explicitly with share(); a deep copy with clone().
//
// Operations are submitted asynchronously and return at once; the epoch queue
// of each tensor orders them. Each takes a trailing ta::options (runtime,
// completion-queue notification, backends, an event to receive).
#ifndef TENSORASYNC_HPP
#define TENSORASYNC_HPP

#include <tensorasync.h>

#include <array>
#include <atomic>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <poll.h>

#if __has_include(<version>)
#include <version>
#endif

#if !defined(TA_HPP_NO_EXCEPTIONS) && !defined(__cpp_exceptions)
#define TA_HPP_NO_EXCEPTIONS 1
#endif
#if !defined(TA_HPP_NO_EXCEPTIONS)
#include <exception>
#endif

#if defined(__cpp_lib_span) && __cpp_lib_span >= 202002L
#include <span>
#define TA_HPP_HAVE_SPAN 1
#endif

#if defined(__cpp_impl_coroutine) && __has_include(<coroutine>) && __cplusplus >= 202002L
#include <coroutine>
#include <cerrno>
#include <fcntl.h>
#include <unistd.h>
#define TA_HPP_HAVE_COROUTINES 1
#endif

#if defined(__cpp_lib_mdspan) && __has_include(<mdspan>)
#include <mdspan>
#define TA_HPP_HAVE_MDSPAN 1
#endif

#if defined(TA_HPP_NO_EXCEPTIONS) && defined(__cpp_lib_expected) && __cpp_lib_expected >= 202202L
#include <expected>
#define TA_HPP_HAVE_EXPECTED 1
#endif


namespace ta {

// ---------------------------------------------------------------- enums

enum class status : ta_status {
    ok = TA_STATUS_OK,
    pending = TA_STATUS_PENDING,
    timeout = TA_STATUS_TIMEOUT,
    null_handle = TA_STATUS_NULL_HANDLE,
    stale_handle = TA_STATUS_STALE_HANDLE,
    double_free = TA_STATUS_DOUBLE_FREE,
    wrong_handle_type = TA_STATUS_WRONG_HANDLE_TYPE,
    invalid_handle = TA_STATUS_INVALID_HANDLE,
    null_pointer = TA_STATUS_NULL_POINTER,
    invalid_argument = TA_STATUS_INVALID_ARGUMENT,
    dtype_mismatch = TA_STATUS_DTYPE_MISMATCH,
    shape_mismatch = TA_STATUS_SHAPE_MISMATCH,
    domain_mismatch = TA_STATUS_DOMAIN_MISMATCH,
    read_only = TA_STATUS_READ_ONLY,
    alias = TA_STATUS_ALIAS,
    unconstructed = TA_STATUS_UNCONSTRUCTED,
    shape_unknown = TA_STATUS_SHAPE_UNKNOWN,
    unsupported = TA_STATUS_UNSUPPORTED,
    out_of_range = TA_STATUS_OUT_OF_RANGE,
    buffer_too_small = TA_STATUS_BUFFER_TOO_SMALL,
    not_contiguous = TA_STATUS_NOT_CONTIGUOUS,
    kernel_failed = TA_STATUS_KERNEL_FAILED,
    cancelled = TA_STATUS_CANCELLED,
    shutdown = TA_STATUS_SHUTDOWN,
    would_deadlock = TA_STATUS_WOULD_DEADLOCK,
    out_of_memory = TA_STATUS_OUT_OF_MEMORY,
    panic = TA_STATUS_PANIC,
    no_backend = TA_STATUS_NO_BACKEND,
    already_finished = TA_STATUS_ALREADY_FINISHED,
    cuda_unavailable = TA_STATUS_CUDA_UNAVAILABLE,
    cuda_error = TA_STATUS_CUDA_ERROR,
    internal = TA_STATUS_INTERNAL,
};

enum class dtype : ta_dtype {
    f32 = TA_DTYPE_F32,
    f64 = TA_DTYPE_F64,
    c64 = TA_DTYPE_C64,
    c128 = TA_DTYPE_C128,
    i8 = TA_DTYPE_I8,
    i16 = TA_DTYPE_I16,
    i32 = TA_DTYPE_I32,
    i64 = TA_DTYPE_I64,
    u8 = TA_DTYPE_U8,
    u16 = TA_DTYPE_U16,
    u32 = TA_DTYPE_U32,
    u64 = TA_DTYPE_U64,
};

enum class order : ta_order { row_major = TA_ORDER_ROW_MAJOR, col_major = TA_ORDER_COL_MAJOR };
enum class mode : ta_mode { read = TA_MODE_READ, write = TA_MODE_WRITE, update = TA_MODE_UPDATE };
enum class uplo : ta_uplo { lower = TA_UPLO_LOWER, upper = TA_UPLO_UPPER };
enum class side : ta_side { left = TA_SIDE_LEFT, right = TA_SIDE_RIGHT };
enum class diag : ta_diag { non_unit = TA_DIAG_NON_UNIT, unit = TA_DIAG_UNIT };
enum class shutdown : ta_shutdown { drain = TA_SHUTDOWN_DRAIN, cancel = TA_SHUTDOWN_CANCEL };
enum class backend : ta_backend { native = TA_BACKEND_NATIVE, blas = TA_BACKEND_BLAS, cuda = TA_BACKEND_CUDA };

/// The host domain, for `domain` arguments (CUDA devices are 0, 1, ...).
constexpr ta_domain host = TA_DOMAIN_HOST;
/// Wait forever, for timeouts in nanoseconds.
constexpr int64_t forever = TA_WAIT_FOREVER;

inline const char *status_name(status s) noexcept { return ta_status_name(static_cast<ta_status>(s)); }
inline const char *describe(status s) noexcept { return ta_status_describe(static_cast<ta_status>(s)); }
inline const char *version() noexcept { return ta_version(); }

namespace detail {
// Integer types by size and signedness: int8_t ... uint64_t, and the types
// that are not among those typedefs but have their size (char, long long,
// unsigned long long, ... where they are distinct types). bool has none.
template <typename T, bool = std::is_integral<T>::value && !std::is_same<T, bool>::value> struct integral_dtype {};
template <typename T> struct integral_dtype<T, true> {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                  "ta::dtype_of: no dtype has this integer type's size");
    static constexpr dtype value =
        std::is_signed<T>::value
            ? (sizeof(T) == 1 ? dtype::i8 : sizeof(T) == 2 ? dtype::i16 : sizeof(T) == 4 ? dtype::i32 : dtype::i64)
            : (sizeof(T) == 1 ? dtype::u8 : sizeof(T) == 2 ? dtype::u16 : sizeof(T) == 4 ? dtype::u32 : dtype::u64);
};
} // namespace detail

/// The dtype of a C++ element type: float, double, std::complex of those,
/// and every integer type but bool (by size and signedness: char is i8 or u8
/// as it is signed or not, long long is i64, unsigned long long u64).
template <typename T> struct dtype_of : detail::integral_dtype<T> {};
template <> struct dtype_of<float> { static constexpr dtype value = dtype::f32; };
template <> struct dtype_of<double> { static constexpr dtype value = dtype::f64; };
template <> struct dtype_of<std::complex<float>> { static constexpr dtype value = dtype::c64; };
template <> struct dtype_of<std::complex<double>> { static constexpr dtype value = dtype::c128; };
template <typename T> constexpr dtype dtype_v = dtype_of<std::remove_cv_t<T>>::value;

inline const char *dtype_name(dtype d) noexcept {
    switch (d) {
    case dtype::f32: return "f32";
    case dtype::f64: return "f64";
    case dtype::c64: return "c64";
    case dtype::c128: return "c128";
    case dtype::i8: return "i8";
    case dtype::i16: return "i16";
    case dtype::i32: return "i32";
    case dtype::i64: return "i64";
    case dtype::u8: return "u8";
    case dtype::u16: return "u16";
    case dtype::u32: return "u32";
    case dtype::u64: return "u64";
    }
    return "unknown";
}

// ---------------------------------------------------------------- errors

/// A failure: status, raw code, message and the operation where it started.
class error
#if !defined(TA_HPP_NO_EXCEPTIONS)
    : public std::exception
#endif
{
  public:
    error() = default;
    error(ta::status s, std::string message, std::string origin = {}, int64_t code = -1)
        : status_(s), code_(code < 0 ? static_cast<int64_t>(s) : code), message_(std::move(message)),
          origin_(std::move(origin)) {}

    /// Takes the C error object `e` (may be NULL) and frees it.
    static error from_c(ta_status s, ta_error *e) {
        error out;
        out.status_ = static_cast<ta::status>(s);
        out.code_ = static_cast<int64_t>(s);
        if (e) {
            ta_status es = 0;
            if (ta_error_status(e, &es) == TA_STATUS_OK) out.status_ = static_cast<ta::status>(es);
            int64_t code = 0;
            if (ta_error_code(e, &code) == TA_STATUS_OK) out.code_ = code;
            out.message_ = read_string(e, ta_error_message);
            out.origin_ = read_string(e, ta_error_origin);
            ta_error_free(e);
        }
        if (out.message_.empty()) out.message_ = ta_status_describe(static_cast<ta_status>(out.status_));
        return out;
    }

    ta::status status() const noexcept { return status_; }
    /// The raw code: the status value, or what a failed C kernel returned.
    int64_t code() const noexcept { return code_; }
    const std::string &message() const noexcept { return message_; }
    const std::string &origin() const noexcept { return origin_; }
    const char *what() const noexcept
#if !defined(TA_HPP_NO_EXCEPTIONS)
        override
#endif
    {
        return message_.c_str();
    }

  private:
    template <typename F> static std::string read_string(const ta_error *e, F f) {
        size_t len = 0;
        if (f(e, nullptr, 0, &len) != TA_STATUS_OK || len == 0) return {};
        std::string s(len + 1, '\0');
        if (f(e, &s[0], s.size(), &len) != TA_STATUS_OK) return {};
        s.resize(len < s.size() ? len : s.size() - 1);
        return s;
    }

    ta::status status_ = ta::status::ok;
    int64_t code_ = 0;
    std::string message_;
    std::string origin_;
};

// ---------------------------------------------------------------- result (no-exceptions mode)

#if defined(TA_HPP_HAVE_EXPECTED)
template <typename T> using result = std::expected<T, error>;
namespace detail {
template <typename T> inline result<T> fail_with(error e) { return std::unexpected<error>(std::move(e)); }
} // namespace detail
#else
/// The bundled result type: a value or an error.
namespace detail {
struct not_copyable_tag {};
} // namespace detail
template <typename T> class [[nodiscard]] result {
    // Copies exist where T has them (as for std::expected); else these
    // signatures name a type no one passes and the copies stay deleted.
    static constexpr bool copyable = std::is_copy_constructible<T>::value && std::is_copy_assignable<T>::value;
    using copy_arg = std::conditional_t<copyable, const result &, const detail::not_copyable_tag &>;

  public:
    result(T v) : ok_(true) { new (&v_) T(std::move(v)); }
    result(ta::error e) : ok_(false), e_(std::move(e)) {}
    result(result &&o) noexcept(std::is_nothrow_move_constructible<T>::value) : ok_(o.ok_), e_(std::move(o.e_)) {
        if (ok_) new (&v_) T(std::move(o.v_));
    }
    result(copy_arg o) : ok_(o.ok_), e_(o.e_) {
        if (ok_) new (&v_) T(o.v_);
    }
    result &operator=(result &&o) noexcept(std::is_nothrow_move_constructible<T>::value &&
                                           std::is_nothrow_move_assignable<T>::value) {
        if (this == &o) return *this;
        if (ok_ && o.ok_) {
            v_ = std::move(o.v_);
        } else {
            if (ok_) v_.~T();
            ok_ = false;
            if (o.ok_) {
                new (&v_) T(std::move(o.v_));
                ok_ = true;
            }
        }
        e_ = std::move(o.e_);
        return *this;
    }
    result &operator=(copy_arg o) {
        if (this == &o) return *this;
        if (ok_ && o.ok_) {
            v_ = o.v_;
        } else {
            if (ok_) v_.~T();
            ok_ = false;
            if (o.ok_) {
                new (&v_) T(o.v_);
                ok_ = true;
            }
        }
        e_ = o.e_;
        return *this;
    }
    ~result() {
        if (ok_) v_.~T();
    }
    bool has_value() const noexcept { return ok_; }
    explicit operator bool() const noexcept { return ok_; }
    T &value() & {
        if (!ok_) std::abort();
        return v_;
    }
    const T &value() const & {
        if (!ok_) std::abort();
        return v_;
    }
    T &&value() && {
        if (!ok_) std::abort();
        return std::move(v_);
    }
    T &operator*() & { return value(); }
    const T &operator*() const & { return value(); }
    T &&operator*() && { return std::move(*this).value(); }
    T *operator->() { return &value(); }
    const T *operator->() const { return &value(); }
    const ta::error &error() const noexcept { return e_; }

  private:
    bool ok_;
    union {
        T v_;
    };
    ta::error e_;
};
template <> class [[nodiscard]] result<void> {
  public:
    result() : ok_(true) {}
    result(ta::error e) : ok_(false), e_(std::move(e)) {}
    bool has_value() const noexcept { return ok_; }
    explicit operator bool() const noexcept { return ok_; }
    void value() const {
        if (!ok_) std::abort();
    }
    void operator*() const { value(); }
    const ta::error &error() const noexcept { return e_; }

  private:
    bool ok_;
    ta::error e_;
};
namespace detail {
template <typename T> inline result<T> fail_with(error e) { return result<T>(std::move(e)); }
} // namespace detail
#endif

namespace detail {
#if defined(TA_HPP_NO_EXCEPTIONS)
template <typename T> using ret = result<T>;
#define TA_HPP_FAIL(T, err) return ::ta::detail::fail_with<T>(err)
#else
template <typename T> using ret = T;
#define TA_HPP_FAIL(T, err) throw(err)
#endif
// `return TA_HPP_CHECK(T, s, e, value);`: the value on success, else the error.
#define TA_HPP_CHECK_VOID(s, e)                                                                      \
    do {                                                                                             \
        ta_status ta_hpp_s_ = (s);                                                                   \
        if (ta_hpp_s_ != TA_STATUS_OK) TA_HPP_FAIL(void, ::ta::error::from_c(ta_hpp_s_, (e)));      \
    } while (0)
#define TA_HPP_CHECK(T, s, e)                                                                        \
    do {                                                                                             \
        ta_status ta_hpp_s_ = (s);                                                                   \
        if (ta_hpp_s_ != TA_STATUS_OK) TA_HPP_FAIL(T, ::ta::error::from_c(ta_hpp_s_, (e)));         \
    } while (0)
#if defined(TA_HPP_NO_EXCEPTIONS)
#define TA_HPP_RETURN_VOID return ::ta::result<void>()
#else
#define TA_HPP_RETURN_VOID return
#endif

struct deleter {
    void operator()(ta_tensor *p) const noexcept { ta_tensor_free(p); }
    void operator()(ta_event *p) const noexcept { ta_event_free(p); }
    void operator()(ta_runtime *p) const noexcept { ta_runtime_free(p); }
    void operator()(ta_cq *p) const noexcept { ta_cq_free(p); }
    void operator()(ta_blocks *p) const noexcept { ta_blocks_free(p); }
    void operator()(ta_mapping *p) const noexcept { ta_mapping_free(p); }
    void operator()(ta_token *p) const noexcept {
        if (p) ta_token_finish(p, TA_STATUS_KERNEL_FAILED, "the operation's token was destroyed unfinished");
    }
};
template <typename T> using handle = std::unique_ptr<T, deleter>;

inline ta_scalar to_c(double re, double im = 0.0) noexcept { return ta_scalar{re, im}; }

// Whether `n` elements are exactly the product of `extents` (false when the
// product overflows size_t).
inline bool holds_exactly(size_t n, const std::vector<size_t> &extents) noexcept {
    size_t p = 1;
    bool overflow = false;
    for (size_t x : extents) {
        if (x == 0) return n == 0;
        if (p > SIZE_MAX / x) overflow = true;
        else p *= x;
    }
    return !overflow && p == n;
}
inline error count_error(size_t n, const std::vector<size_t> &extents, const char *origin) {
    std::string m = std::to_string(n) + " elements for extents [";
    for (size_t k = 0; k < extents.size(); ++k) m += (k ? ", " : "") + std::to_string(extents[k]);
    return error(status::shape_mismatch, m + "]", origin);
}
} // namespace detail

/// An immediate scalar: any real number, or a std::complex.
struct scalar {
    ta_scalar c;
    template <typename T, typename = std::enable_if_t<std::is_arithmetic<T>::value>>
    constexpr scalar(T re) noexcept : c{static_cast<double>(re), 0.0} {}
    template <typename T> constexpr scalar(std::complex<T> z) noexcept : c{double(z.real()), double(z.imag())} {}
};

class tensor;
class event;
class runtime;
class completion_queue;

// ---------------------------------------------------------------- views

/// A typed strided view of N dimensions: element (i0, i1, ...) is at
/// data() + sum(ik * strides()[k]). T is const for read-only access.
template <typename T, size_t N> class view {
  public:
    using element_type = T;
    using value_type = std::remove_cv_t<T>;
    static constexpr size_t rank = N;

    view() = default;
    view(T *data, const std::array<size_t, N> &extents, const std::array<ptrdiff_t, N> &strides, bool conj = false)
        : data_(data), extents_(extents), strides_(strides), conj_(conj) {}

    /// Checks dtype and rank of a C view (nullptr and a message if they differ).
    static const char *check(const ta_view &v) noexcept {
        if (v.dtype != static_cast<ta_dtype>(dtype_v<T>)) return "the view's element type is not the tensor's dtype";
        if (v.rank != N) return "the view's rank is not the tensor's rank";
        return nullptr;
    }
    static view from_c(const ta_view &v) noexcept {
        view out;
        out.data_ = static_cast<T *>(v.data);
        for (size_t k = 0; k < N; ++k) {
            out.extents_[k] = v.extents[k];
            out.strides_[k] = v.strides[k];
        }
        out.conj_ = v.conj != 0;
        return out;
    }

    template <typename... I> T &operator()(I... idx) const noexcept {
        static_assert(sizeof...(I) == N, "one index per dimension");
        const ptrdiff_t ix[N > 0 ? N : 1] = {static_cast<ptrdiff_t>(idx)...};
        ptrdiff_t off = 0;
        for (size_t k = 0; k < N; ++k) off += ix[k] * strides_[k];
        return data_[off];
    }
    T *data() const noexcept { return data_; }
    const std::array<size_t, N> &extents() const noexcept { return extents_; }
    const std::array<ptrdiff_t, N> &strides() const noexcept { return strides_; }
    size_t extent(size_t k) const noexcept { return extents_[k]; }
    ptrdiff_t stride(size_t k) const noexcept { return strides_[k]; }
    size_t size() const noexcept {
        size_t n = 1;
        for (size_t e : extents_) n *= e;
        return n;
    }
    /// Whether reads must conjugate (a conj view of a complex tensor).
    bool conj() const noexcept { return conj_; }
    /// Dense row-major (the last axis contiguous).
    bool is_contiguous() const noexcept {
        ptrdiff_t expect = 1;
        for (size_t k = N; k-- > 0;) {
            if (extents_[k] != 1 && strides_[k] != expect) return false;
            expect *= static_cast<ptrdiff_t>(extents_[k]);
        }
        return true;
    }
#if defined(TA_HPP_HAVE_SPAN)
    /// The elements in memory order; only for a contiguous view (else empty).
    std::span<T> span() const noexcept {
        if (!is_contiguous()) return {};
        return std::span<T>(data_, size());
    }
#endif
#if defined(TA_HPP_HAVE_MDSPAN)
    std::mdspan<T, std::dextents<size_t, N>, std::layout_stride> mdspan() const {
        std::array<size_t, N> s;
        for (size_t k = 0; k < N; ++k) s[k] = static_cast<size_t>(strides_[k]);
        return {data_, typename std::layout_stride::template mapping<std::dextents<size_t, N>>(
                           std::dextents<size_t, N>(extents_), s)};
    }
#endif

  private:
    T *data_ = nullptr;
    std::array<size_t, N> extents_{};
    std::array<ptrdiff_t, N> strides_{};
    bool conj_ = false;
};

// ---------------------------------------------------------------- handles

/// The completion of one submitted operation.
class event {
  public:
    event() = default;
    explicit event(ta_event *e) noexcept : h_(e) {}
    ta_event *get() const noexcept { return h_.get(); }
    ta_event *release() noexcept { return h_.release(); }
    explicit operator bool() const noexcept { return bool(h_); }

    /// The status now: ta::status::pending while running, then the final status.
    ta::status poll() const noexcept { return static_cast<ta::status>(ta_event_poll(h_.get())); }
    bool done() const noexcept { return poll() != ta::status::pending; }

    /// Blocks until the operation completed; fails with its error.
    detail::ret<void> wait() const {
        ta_status s = ta_event_wait(h_.get(), TA_WAIT_FOREVER);
        if (s != TA_STATUS_OK) TA_HPP_FAIL(void, failure(s));
        TA_HPP_RETURN_VOID;
    }
    /// Waits up to timeout_ns; returns the final status or ta::status::timeout (never throws).
    ta::status wait_for(int64_t timeout_ns) const noexcept {
        return static_cast<ta::status>(ta_event_wait(h_.get(), timeout_ns));
    }
    /// The error of the completed operation (status, message, origin).
    error failure(ta_status s) const {
        ta_error *e = nullptr;
        if (ta_event_error(h_.get(), &e) != TA_STATUS_OK) e = nullptr;
        return error::from_c(s, e);
    }
    /// Push {tag, status} to `cq` when the operation completes.
    detail::ret<void> notify(const completion_queue &cq, uint64_t tag) const;
    /// Calls f(ta::status) once on completion, on the completing thread
    /// (at once, on this thread, if already complete). Exceptions from f are swallowed.
    template <typename F> detail::ret<void> on_complete(F &&f) const {
        using B = std::decay_t<F>;
        B *box = new B(std::forward<F>(f));
        ta_status s = ta_event_on_complete(
            h_.get(),
            [](ta_status st, void *ud) {
                B *b = static_cast<B *>(ud);
#if !defined(TA_HPP_NO_EXCEPTIONS)
                try {
                    (*b)(static_cast<ta::status>(st));
                } catch (...) {
                }
#else
                (*b)(static_cast<ta::status>(st));
#endif
                delete b;
            },
            box);
        if (s != TA_STATUS_OK) {
            delete box;
            TA_HPP_FAIL(void, error::from_c(s, nullptr));
        }
        TA_HPP_RETURN_VOID;
    }

#if defined(TA_HPP_HAVE_COROUTINES)
    struct awaiter;
    /// co_await ev: resumes on the completion queue that runs the coroutine
    /// (completion_queue::run), else inline on the completing thread.
    awaiter operator co_await() const & noexcept;
    /// Resume on `cq`: the coroutine continues inside cq.run()/cq.poll().
    awaiter resume_on(const completion_queue &cq) const noexcept;
    /// Resume inline on the thread that completes the operation (a worker).
    awaiter resume_inline() const noexcept;
#endif

  private:
    detail::handle<ta_event> h_;
};

/// Form of runtime::dump: a text report or a Graphviz DOT graph.
enum class dump_format : uint32_t { text = TA_DUMP_TEXT, dot = TA_DUMP_DOT };

/// The counters of a runtime (runtime::stats; the fields of ta_stats).
struct stats {
    uint32_t threads = 0;          // worker threads
    uint64_t tasks_submitted = 0;  // operations submitted
    uint64_t tasks_completed = 0;  // operations completed, whatever their status
    uint64_t tasks_failed = 0;     // completed with an error other than cancelled
    uint64_t tasks_cancelled = 0;  // completed with status cancelled
    uint64_t steals = 0;           // taken from the shared ready queue
    uint64_t queue_depth = 0;      // in the shared ready queue now
    uint64_t pending = 0;          // submitted and not completed, now
    uint64_t peak_pending = 0;     // the largest number pending seen (sampled)
    uint64_t busy_ns = 0;          // the workers' time running operations, summed
};

/// A pool of worker threads.
class runtime {
  public:
    runtime() = default;
    explicit runtime(ta_runtime *r) noexcept : h_(r) {}
#if !defined(TA_HPP_NO_EXCEPTIONS)
    /// A new runtime with `threads` workers (0: one per core).
    template <typename I, typename = std::enable_if_t<std::is_integral<I>::value>>
    explicit runtime(I threads) : h_(create(static_cast<size_t>(threads)).release()) {}
#endif
    static detail::ret<runtime> create(size_t threads = 0) {
        ta_runtime *r = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(runtime, ta_runtime_new(threads, &r, &e), e);
        return runtime(r);
    }
    /// A handle to the process-wide default runtime (freeing it does not stop it).
    static detail::ret<runtime> default_runtime() {
        ta_runtime *r = nullptr;
        TA_HPP_CHECK(runtime, ta_runtime_default(&r), nullptr);
        return runtime(r);
    }
    ta_runtime *get() const noexcept { return h_.get(); }
    ta_runtime *release() noexcept { return h_.release(); }
    explicit operator bool() const noexcept { return bool(h_); }

    size_t threads() const noexcept {
        size_t n = 0;
        ta_runtime_threads(h_.get(), &n);
        return n;
    }
    /// Whether small library operations whose tensors are idle run on the
    /// submitting thread before the call returns (the default; see
    /// `ta_runtime_set_small_in_place`).
    bool small_in_place() const noexcept {
        int32_t on = 0;
        ta_runtime_small_in_place(h_.get(), &on);
        return on != 0;
    }
    /// Let them run in place (true) or send every operation to the workers.
    detail::ret<void> set_small_in_place(bool on) const {
        TA_HPP_CHECK_VOID(ta_runtime_set_small_in_place(h_.get(), on ? 1 : 0), nullptr);
        TA_HPP_RETURN_VOID;
    }
    detail::ret<void> shutdown(ta::shutdown how = ta::shutdown::drain) const {
        ta_error *e = nullptr;
        TA_HPP_CHECK_VOID(ta_runtime_shutdown(h_.get(), static_cast<ta_shutdown>(how), &e), e);
        TA_HPP_RETURN_VOID;
    }
    detail::ret<void> wait_idle() const {
        ta_error *e = nullptr;
        TA_HPP_CHECK_VOID(ta_runtime_wait_idle(h_.get(), TA_WAIT_FOREVER, &e), e);
        TA_HPP_RETURN_VOID;
    }

    // Observability (also on the handle from default_runtime()).

    /// Start recording a trace of everything the runtime runs from now on
    /// (`capacity` operations kept, 0: the library's default; the oldest are
    /// dropped when it is full). A recording in progress is restarted.
    detail::ret<void> trace_start(uint64_t capacity = 0) const {
        ta_trace_options o{};
        o.struct_size = sizeof(ta_trace_options);
        o.capacity = capacity;
        ta_error *e = nullptr;
        TA_HPP_CHECK_VOID(ta_runtime_trace_start(h_.get(), &o, &e), e);
        TA_HPP_RETURN_VOID;
    }
    /// Stop recording and write the trace to `path` as Chrome trace-event
    /// JSON (chrome://tracing, ui.perfetto.dev). Fails with invalid_argument
    /// when the runtime is not recording.
    detail::ret<void> trace_stop(const std::string &path) const {
        ta_error *e = nullptr;
        TA_HPP_CHECK_VOID(ta_runtime_trace_stop(h_.get(), path.c_str(), &e), e);
        TA_HPP_RETURN_VOID;
    }
    /// Stop recording and discard the trace.
    detail::ret<void> trace_discard() const {
        ta_error *e = nullptr;
        TA_HPP_CHECK_VOID(ta_runtime_trace_stop(h_.get(), nullptr, &e), e);
        TA_HPP_RETURN_VOID;
    }
    /// Turn tracking of pending work on or off: dump() lists only the
    /// operations submitted while it is on.
    detail::ret<void> track(bool enable) const {
        TA_HPP_CHECK_VOID(ta_runtime_track(h_.get(), enable ? 1 : 0), nullptr);
        TA_HPP_RETURN_VOID;
    }
    /// A report of the runtime's unfinished operations: what each waits for
    /// and on which tensor (text), or the same graph in Graphviz DOT.
    detail::ret<std::string> dump(dump_format format = dump_format::text) const {
        std::string buf(256, '\0');
        for (;;) {
            size_t len = 0;
            ta_error *e = nullptr;
            ta_status s = ta_runtime_dump_string(h_.get(), static_cast<uint32_t>(format), &buf[0], buf.size(),
                                                 &len, &e);
            if (s == TA_STATUS_OK) {
                buf.resize(len);
                return buf;
            }
            if (s != TA_STATUS_BUFFER_TOO_SMALL) TA_HPP_FAIL(std::string, error::from_c(s, e));
            ta_error_free(e);
            buf.assign(len + len / 2 + 64, '\0'); // the report may grow meanwhile
        }
    }
    /// The runtime's counters.
    detail::ret<ta::stats> stats() const {
        ta_stats c{};
        c.struct_size = sizeof(ta_stats);
        TA_HPP_CHECK(ta::stats, ta_runtime_stats(h_.get(), &c), nullptr);
        ta::stats out;
        out.threads = c.threads;
        out.tasks_submitted = c.tasks_submitted;
        out.tasks_completed = c.tasks_completed;
        out.tasks_failed = c.tasks_failed;
        out.tasks_cancelled = c.tasks_cancelled;
        out.steals = c.steals;
        out.queue_depth = c.queue_depth;
        out.pending = c.pending;
        out.peak_pending = c.peak_pending;
        out.busy_ns = c.busy_ns;
        return out;
    }

  private:
    detail::handle<ta_runtime> h_;
};

/// One entry of a completion queue.
struct completion {
    uint64_t tag = 0;
    ta::status status = ta::status::ok;
    error err; // status ok and empty message on success
    bool ok() const noexcept { return status == ta::status::ok; }
};

#if defined(TA_HPP_HAVE_COROUTINES)
template <typename T = void> class task;
#endif

/// A completion queue with a pollable file descriptor. It also runs
/// coroutines: awaits inside run()/poll() resume here, on the thread that
/// drives the queue. Tags with the top bit set are reserved for that.
class completion_queue {
  public:
    static constexpr uint64_t reserved_tag_bit = uint64_t(1) << 63;

    completion_queue() = default;
    explicit completion_queue(ta_cq *q) noexcept : h_(q) {}
    static detail::ret<completion_queue> create() {
        ta_cq *q = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(completion_queue, ta_cq_new(&q, &e), e);
        return completion_queue(q);
    }
    ta_cq *get() const noexcept { return h_.get(); }
    explicit operator bool() const noexcept { return bool(h_); }
    /// Readable (POLLIN) while completions are pending; owned by the queue.
    int fd() const noexcept {
        int fd = -1;
        ta_cq_fd(h_.get(), &fd);
        return fd;
    }

    /// Takes what is pending without blocking: resumes the coroutines whose
    /// awaits completed, and returns the other entries (the user's tags).
    std::vector<completion> poll() {
        drain();
        std::vector<completion> out(std::make_move_iterator(backlog_.begin()),
                                    std::make_move_iterator(backlog_.end()));
        backlog_.clear();
        return out;
    }
    /// Blocks until an entry is pending (or timeout_ms passes; -1 forever),
    /// then does what poll() does.
    std::vector<completion> wait(int timeout_ms = -1) {
        block(timeout_ms);
        return poll();
    }

#if defined(TA_HPP_HAVE_COROUTINES)
    /// Runs `t` to completion on this thread: starts it, then resumes it here
    /// each time one of its awaits completes. Returns its value (rethrows its exception).
    template <typename T> T run(task<T> t);
#endif

    // Internal: what a coroutine waits for.
    struct resumption {
        void (*resume)(resumption *, ta_status, ta_error *);
    };
    static completion_queue *&current() noexcept {
        thread_local completion_queue *cur = nullptr;
        return cur;
    }

  private:
    void block(int timeout_ms) {
        struct pollfd p;
        p.fd = fd();
        p.events = POLLIN;
        p.revents = 0;
        ::poll(&p, 1, timeout_ms);
    }
    void drain() {
        completion_queue *prev = current();
        current() = this;
        ta_completion buf[64];
        for (;;) {
            size_t n = 0;
            if (ta_cq_poll(h_.get(), buf, 64, &n) != TA_STATUS_OK || n == 0) break;
            for (size_t i = 0; i < n; ++i) {
                if (buf[i].tag & reserved_tag_bit) {
                    auto *r = reinterpret_cast<resumption *>(static_cast<uintptr_t>(buf[i].tag & ~reserved_tag_bit));
                    r->resume(r, buf[i].status, buf[i].error);
                } else {
                    completion c;
                    c.tag = buf[i].tag;
                    c.status = static_cast<ta::status>(buf[i].status);
                    if (buf[i].status != TA_STATUS_OK) c.err = error::from_c(buf[i].status, buf[i].error);
                    else if (buf[i].error) ta_error_free(buf[i].error);
                    backlog_.push_back(std::move(c));
                }
            }
            if (n < 64) break;
        }
        current() = prev;
    }

    detail::handle<ta_cq> h_;
    std::deque<completion> backlog_;
};

inline detail::ret<void> event::notify(const completion_queue &cq, uint64_t tag) const {
    TA_HPP_CHECK_VOID(ta_event_notify(h_.get(), cq.get(), tag), nullptr);
    TA_HPP_RETURN_VOID;
}

/// How to submit an operation: runtime, completion-queue entry, backends,
/// transfers, priority, and an event to receive.
class options {
  public:
    options() noexcept {
        std::memset(&x_, 0, sizeof x_);
        x_.struct_size = sizeof x_;
    }
    options &on(const runtime &rt) noexcept {
        x_.submit.runtime = rt.get();
        return *this;
    }
    options &notify(const completion_queue &cq, uint64_t tag) noexcept {
        x_.submit.cq = cq.get();
        x_.submit.cq_tag = tag;
        return *this;
    }
    options &backends(std::initializer_list<backend> bs) noexcept {
        x_.submit.backends = 0;
        for (backend b : bs) x_.submit.backends |= 1u << static_cast<ta_backend>(b);
        return *this;
    }
    options &transfer(bool on = true) noexcept {
        x_.submit.flags = on ? (x_.submit.flags | TA_SUBMIT_TRANSFER) : (x_.submit.flags & ~uint32_t(TA_SUBMIT_TRANSFER));
        return *this;
    }
    /// Hand the operation to the workers even when it is small and ready
    /// (`TA_SUBMIT_DEFER`; see runtime::set_small_in_place).
    options &defer(bool on = true) noexcept {
        x_.submit.flags = on ? (x_.submit.flags | TA_SUBMIT_DEFER) : (x_.submit.flags & ~uint32_t(TA_SUBMIT_DEFER));
        return *this;
    }
    /// Rank among ready operations (`ta_submit_ex.priority`): higher runs
    /// first when a worker has a choice; 0 is the default order.
    options &priority(int32_t p) noexcept {
        x_.priority = p;
        x_.submit.flags = p ? (x_.submit.flags | TA_SUBMIT_EXTENDED) : (x_.submit.flags & ~uint32_t(TA_SUBMIT_EXTENDED));
        return *this;
    }
    /// The operation's event goes to `ev` (replacing what it held).
    options &event_to(ta::event &ev) noexcept {
        ev_ = &ev;
        return *this;
    }
    /// The name in error objects (not copied: use a string literal).
    options &name(const char *n) noexcept {
        name_ = n;
        return *this;
    }
    /// The options as C takes them: the `submit` member of a `ta_submit_ex`
    /// (to change a copy, copy `ex()`, never `*c()`).
    const ta_submit *c() const noexcept { return &x_.submit; }
    const ta_submit_ex &ex() const noexcept { return x_; }
    ta_event **event_slot(ta_event **tmp) const noexcept { return ev_ ? tmp : nullptr; }
    void deliver(ta_event *e) const noexcept {
        if (ev_) *ev_ = ta::event(e);
    }
    const char *name() const noexcept { return name_; }

  private:
    ta_submit_ex x_;
    ta::event *ev_ = nullptr;
    const char *name_ = nullptr;
};

/// One axis of a slice: indices start, start+step, ... below stop; or one index (axis dropped).
struct slice {
    ta_slice c;
    constexpr slice(int64_t start, int64_t stop, int64_t step = 1) noexcept : c{start, stop, step, 0} {}
    static constexpr slice at(int64_t index) noexcept { return slice(index, index + 1, 1, 1); }
    /// The whole axis (the tensor's extent must be given: see tensor::slice).
    static constexpr slice all() noexcept { return slice(0, -1, 0, 2); }

  private:
    constexpr slice(int64_t a, int64_t b, int64_t s, int32_t d) noexcept : c{a, b, s, d} {}
};

/// Host access to a tensor's elements, granted by the tensor's epoch queue;
/// held until the mapping is destroyed. M is the access mode.
template <mode M> class mapping {
  public:
    mapping() = default;
    explicit mapping(ta_mapping *m) noexcept : h_(m) {}
    ta_mapping *get() const noexcept { return h_.get(); }
    /// The typed view of the elements (const for a read mapping).
    template <typename T, size_t N>
    detail::ret<ta::view<std::conditional_t<M == mode::read, const T, T>, N>> view() const {
        using V = ta::view<std::conditional_t<M == mode::read, const T, T>, N>;
        ta_view v;
        std::memset(&v, 0, sizeof v);
        TA_HPP_CHECK(V, ta_mapping_view(h_.get(), &v), nullptr);
        if (const char *why = V::check(v)) TA_HPP_FAIL(V, error(status::dtype_mismatch, why, "ta::mapping::view"));
        return V::from_c(v);
    }
    /// Ends the access now (as destruction does); later writers may then run.
    void reset() noexcept { h_.reset(); }
    explicit operator bool() const noexcept { return bool(h_); }

  private:
    detail::handle<ta_mapping> h_;
};

/// An access enrolled but maybe not granted yet (tensor::read_async() ...):
/// `co_await` it (C++20) or wait() for the granted mapping. The access is
/// enrolled from the call on, so later writers wait for it.
template <mode M> class pending_mapping {
  public:
    pending_mapping(ta_mapping *m, ta_event *e) noexcept : m_(m), ev_(e) {}
    /// The event that completes when the access is granted (or fails).
    const event &granted() const noexcept { return ev_; }
    /// Blocks until the access is granted; the tensor's error if it cannot be.
    detail::ret<mapping<M>> wait() && {
        ta_status s = ta_event_wait(ev_.get(), TA_WAIT_FOREVER);
        if (s != TA_STATUS_OK) TA_HPP_FAIL(mapping<M>, ev_.failure(s));
        return std::move(m_);
    }
    mapping<M> take() noexcept { return std::move(m_); }

  private:
    mapping<M> m_;
    event ev_;
};

/// A tensor handle (a value, or a view of one).
class tensor {
  public:
    tensor() = default;
    explicit tensor(ta_tensor *t) noexcept : h_(t) {}
    ta_tensor *get() const noexcept { return h_.get(); }
    ta_tensor *release() noexcept { return h_.release(); }
    explicit operator bool() const noexcept { return bool(h_); }

    // -- construction
    /// An unconstructed tensor: an overwrite (copy_in, copy, matmul...) gives it a shape.
    static detail::ret<tensor> empty(dtype dt, ta_domain domain = host) {
        ta_tensor *t = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(tensor, ta_tensor_new(static_cast<ta_dtype>(dt), domain, &t, &e), e);
        return tensor(t);
    }
    static detail::ret<tensor> zeros(dtype dt, const std::vector<size_t> &extents, order o = order::row_major,
                                     ta_domain domain = host) {
        ta_tensor *t = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(tensor,
                     ta_tensor_new_zeros(static_cast<ta_dtype>(dt), domain, extents.size(), extents.data(),
                                         static_cast<ta_order>(o), &t, &e),
                     e);
        return tensor(t);
    }
    template <typename T>
    static detail::ret<tensor> zeros(const std::vector<size_t> &extents, order o = order::row_major,
                                     ta_domain domain = host) {
        return zeros(dtype_v<T>, extents, o, domain);
    }
    /// A host tensor holding a copy of `data` (dense in `o`), made before this returns.
    template <typename T>
    static detail::ret<tensor> copy_of(const T *data, const std::vector<size_t> &extents,
                                       order o = order::row_major) {
        ta_tensor *t = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(tensor,
                     ta_tensor_new_copy(static_cast<ta_dtype>(dtype_v<T>), extents.size(), extents.data(), nullptr,
                                        static_cast<ta_order>(o), data, &t, &e),
                     e);
        return tensor(t);
    }
    /// As above; `data` must hold exactly the extents' product of elements
    /// (else shape_mismatch).
    template <typename T>
    static detail::ret<tensor> copy_of(const std::vector<T> &data, const std::vector<size_t> &extents,
                                       order o = order::row_major) {
        if (!detail::holds_exactly(data.size(), extents))
            TA_HPP_FAIL(tensor, detail::count_error(data.size(), extents, "ta::tensor::copy_of"));
        return copy_of(data.data(), extents, o);
    }
    /// Wraps caller memory without copying. `on_release()` runs once after the
    /// last access (on any thread). `strides` in elements (empty: dense in `o`).
    template <typename T, typename R = std::nullptr_t>
    static detail::ret<tensor> wrap(T *data, const std::vector<size_t> &extents, order o = order::row_major,
                                    R on_release = nullptr, const std::vector<ptrdiff_t> &strides = {}) {
        ta_release_fn fn = nullptr;
        void *ud = nullptr;
        using B = std::decay_t<R>;
        B *box = nullptr;
        if constexpr (!std::is_same<B, std::nullptr_t>::value) {
            box = new B(std::move(on_release));
            ud = box;
            fn = [](void *u, void *) { release_box<B>(u); };
        }
        ta_tensor *t = nullptr;
        ta_error *e = nullptr;
        const ptrdiff_t *sp = strides.empty() ? nullptr : strides.data();
        ta_status s;
        if constexpr (std::is_const<T>::value)
            s = ta_tensor_wrap_const(static_cast<ta_dtype>(dtype_v<T>), extents.size(), extents.data(), sp,
                                     static_cast<ta_order>(o), data, fn, ud, &t, &e);
        else
            s = ta_tensor_wrap(static_cast<ta_dtype>(dtype_v<T>), extents.size(), extents.data(), sp,
                               static_cast<ta_order>(o), data, fn, ud, &t, &e);
        if (s != TA_STATUS_OK) {
            if constexpr (!std::is_same<B, std::nullptr_t>::value) delete box;
            TA_HPP_FAIL(tensor, error::from_c(s, e));
        }
        return tensor(t);
    }
    /// Takes a vector's storage (zero-copy); it is freed after the last access.
    /// `v` must hold exactly the extents' product of elements (else
    /// shape_mismatch, and `v` is left as it was). If the wrap fails, the
    /// storage is freed.
    template <typename T>
    static detail::ret<tensor> adopt(std::vector<T> &&v, const std::vector<size_t> &extents,
                                     order o = order::row_major) {
        if (!detail::holds_exactly(v.size(), extents))
            TA_HPP_FAIL(tensor, detail::count_error(v.size(), extents, "ta::tensor::adopt"));
        // The release callable owns the vector: freeing the callable (after
        // the release, or when the wrap fails) frees the storage.
        std::unique_ptr<std::vector<T>> owned(new std::vector<T>(std::move(v)));
        T *p = owned->data();
        return wrap(p, extents, o, [owned = std::move(owned)]() mutable { owned.reset(); });
    }

    // -- properties
    dtype element_type() const noexcept {
        ta_dtype d = 0;
        ta_tensor_dtype(h_.get(), &d);
        return static_cast<dtype>(d);
    }
    ta_domain domain() const noexcept {
        ta_domain d = host;
        ta_tensor_domain(h_.get(), &d);
        return d;
    }
    bool is_view() const noexcept {
        int32_t v = 0;
        ta_tensor_is_view(h_.get(), &v);
        return v != 0;
    }
    bool read_only() const noexcept {
        int32_t v = 0;
        ta_tensor_is_read_only(h_.get(), &v);
        return v != 0;
    }
    detail::ret<size_t> rank() const {
        size_t r = 0;
        TA_HPP_CHECK(size_t, ta_tensor_rank(h_.get(), &r), nullptr);
        return r;
    }
    detail::ret<std::vector<size_t>> extents() const {
        size_t r = 0;
        TA_HPP_CHECK(std::vector<size_t>, ta_tensor_rank(h_.get(), &r), nullptr);
        std::vector<size_t> x(r);
        TA_HPP_CHECK(std::vector<size_t>, ta_tensor_extents(h_.get(), x.data(), r), nullptr);
        return x;
    }
    detail::ret<std::vector<ptrdiff_t>> strides() const {
        size_t r = 0;
        TA_HPP_CHECK(std::vector<ptrdiff_t>, ta_tensor_rank(h_.get(), &r), nullptr);
        std::vector<ptrdiff_t> x(r);
        TA_HPP_CHECK(std::vector<ptrdiff_t>, ta_tensor_strides(h_.get(), x.data(), r), nullptr);
        return x;
    }

    // -- handles and copies
    /// A second handle to the same value (same data, same epoch queue).
    detail::ret<tensor> share() const {
        ta_tensor *t = nullptr;
        TA_HPP_CHECK(tensor, ta_tensor_share(h_.get(), &t), nullptr);
        return tensor(t);
    }
    /// A deep copy on a fresh epoch queue (a new handle to the same view for a view).
    detail::ret<tensor> clone(const options &o = options()) const {
        ta_tensor *t = nullptr;
        ta_event *ev = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(tensor, ta_tensor_clone(h_.get(), o.c(), &t, o.event_slot(&ev), &e), e);
        o.deliver(ev);
        return tensor(t);
    }

    // -- waiting
    /// Blocks until everything enrolled so far completed; fails with the tensor's error.
    detail::ret<void> wait() const {
        ta_error *e = nullptr;
        TA_HPP_CHECK_VOID(ta_tensor_wait(h_.get(), TA_WAIT_FOREVER, &e), e);
        TA_HPP_RETURN_VOID;
    }
    /// An event that completes when everything enrolled on the tensor so far has.
    detail::ret<event> ready() const;

    // -- views
    detail::ret<tensor> slice(std::initializer_list<ta::slice> axes) const {
        std::vector<ta_slice> c;
        c.reserve(axes.size());
        for (const ta::slice &s : axes) c.push_back(s.c);
        ta_tensor *t = nullptr;
        ta_error *e = nullptr;
        // slice::all(): the tensor's own extent.
        for (size_t k = 0; k < c.size(); ++k) {
            if (c[k].drop == 2) {
                size_t r = 0;
                TA_HPP_CHECK(tensor, ta_tensor_rank(h_.get(), &r), nullptr);
                std::vector<size_t> x(r);
                TA_HPP_CHECK(tensor, ta_tensor_extents(h_.get(), x.data(), r), nullptr);
                c[k] = ta_slice{0, k < r ? static_cast<int64_t>(x[k]) : 0, 1, 0};
            }
        }
        TA_HPP_CHECK(tensor, ta_tensor_slice(h_.get(), c.data(), c.size(), &t, &e), e);
        return tensor(t);
    }
    detail::ret<tensor> transpose() const {
        ta_tensor *t = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(tensor, ta_tensor_transpose(h_.get(), &t, &e), e);
        return tensor(t);
    }
    detail::ret<tensor> permute(const std::vector<size_t> &perm) const {
        ta_tensor *t = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(tensor, ta_tensor_permute(h_.get(), perm.data(), perm.size(), &t, &e), e);
        return tensor(t);
    }
    detail::ret<tensor> conj() const {
        ta_tensor *t = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(tensor, ta_tensor_conj(h_.get(), &t, &e), e);
        return tensor(t);
    }
    detail::ret<tensor> reshape(const std::vector<size_t> &extents, order o = order::row_major) const {
        ta_tensor *t = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(tensor,
                     ta_tensor_reshape(h_.get(), extents.size(), extents.data(), static_cast<ta_order>(o), &t, &e),
                     e);
        return tensor(t);
    }

    // -- host data
    /// Copies host memory in asynchronously; `src` must stay valid until the
    /// operation completes (pass options().event_to(ev) and wait on ev).
    /// T must be the tensor's element type (else dtype_mismatch; `void` skips the check).
    template <typename T>
    detail::ret<void> copy_in(const T *src, const std::vector<size_t> &extents,
                              const options &o = options()) const {
        if constexpr (!std::is_void<T>::value)
            if (dtype_differs<T>()) TA_HPP_FAIL(void, dtype_error<T>("ta::tensor::copy_in"));
        ta_event *ev = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK_VOID(
            ta_copy_in(h_.get(), src, extents.size(), extents.data(), nullptr, o.c(), o.event_slot(&ev), &e), e);
        o.deliver(ev);
        TA_HPP_RETURN_VOID;
    }
    /// Copies the elements out (dense row-major) asynchronously into dst[0..capacity).
    /// T must be the tensor's element type (else dtype_mismatch; `void` skips the check).
    template <typename T>
    detail::ret<void> copy_out(T *dst, size_t capacity, const options &o = options()) const {
        if constexpr (!std::is_void<T>::value)
            if (dtype_differs<T>()) TA_HPP_FAIL(void, dtype_error<T>("ta::tensor::copy_out"));
        ta_event *ev = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK_VOID(ta_copy_out(h_.get(), dst, capacity, nullptr, o.c(), o.event_slot(&ev), &e), e);
        o.deliver(ev);
        TA_HPP_RETURN_VOID;
    }
    /// Blocking: the elements, dense row-major, once every earlier write is done.
    /// T must be the tensor's element type (else dtype_mismatch).
    template <typename T> detail::ret<std::vector<T>> to_vector() const {
        if (dtype_differs<T>()) TA_HPP_FAIL(std::vector<T>, dtype_error<T>("ta::tensor::to_vector"));
        size_t r = 0;
        TA_HPP_CHECK(std::vector<T>, ta_tensor_rank(h_.get(), &r), nullptr);
        std::vector<size_t> x(r);
        TA_HPP_CHECK(std::vector<T>, ta_tensor_extents(h_.get(), x.data(), r), nullptr);
        size_t n = 1;
        for (size_t v : x) n *= v;
        std::vector<T> out(n);
        ta_event *ev = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(std::vector<T>, ta_copy_out(h_.get(), out.data(), n, nullptr, nullptr, &ev, &e), e);
        ta::event done(ev);
        ta_status s = ta_event_wait(ev, TA_WAIT_FOREVER);
        if (s != TA_STATUS_OK) TA_HPP_FAIL(std::vector<T>, done.failure(s));
        return out;
    }
    /// Blocking: the single element of a 0-d (or one-element) tensor.
    /// T must be the tensor's element type (else dtype_mismatch).
    template <typename T> detail::ret<T> item() const {
        if (dtype_differs<T>()) TA_HPP_FAIL(T, dtype_error<T>("ta::tensor::item"));
        T v{};
        ta_event *ev = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(T, ta_copy_out(h_.get(), &v, 1, nullptr, nullptr, &ev, &e), e);
        ta::event done(ev);
        ta_status s = ta_event_wait(ev, TA_WAIT_FOREVER);
        if (s != TA_STATUS_OK) TA_HPP_FAIL(T, done.failure(s));
        return v;
    }

    /// Blocking host access: waits for earlier writers (read) or every earlier
    /// access (write, update); held while the returned mapping lives.
    detail::ret<mapping<mode::read>> read(int64_t timeout_ns = forever) const { return acquire<mode::read>(timeout_ns); }
    detail::ret<mapping<mode::write>> write(int64_t timeout_ns = forever) const {
        return acquire<mode::write>(timeout_ns);
    }
    detail::ret<mapping<mode::update>> update(int64_t timeout_ns = forever) const {
        return acquire<mode::update>(timeout_ns);
    }
    template <mode M> detail::ret<mapping<M>> acquire(int64_t timeout_ns = forever) const {
        ta_mapping *m = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(mapping<M>, ta_tensor_acquire(h_.get(), static_cast<ta_mode>(M), timeout_ns, &m, &e), e);
        return mapping<M>(m);
    }
    /// Non-blocking host access: enrolled now, granted later (co_await it or wait()).
    detail::ret<pending_mapping<mode::read>> read_async() const { return acquire_async<mode::read>(); }
    detail::ret<pending_mapping<mode::write>> write_async() const { return acquire_async<mode::write>(); }
    detail::ret<pending_mapping<mode::update>> update_async() const { return acquire_async<mode::update>(); }
    template <mode M> detail::ret<pending_mapping<M>> acquire_async() const {
        ta_mapping *m = nullptr;
        ta_event *ev = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(pending_mapping<M>,
                     ta_tensor_acquire_async(h_.get(), static_cast<ta_mode>(M), &m, &ev, &e), e);
        return pending_mapping<M>(m, ev);
    }

    /// Wraps caller memory without copying, the release (after the last access)
    /// reported as the entry {tag, ok} on `cq`: no code of the caller's runs on
    /// a library thread for it. A const T gives a read-only tensor.
    template <typename T>
    static detail::ret<tensor> wrap_notify(T *data, const std::vector<size_t> &extents, const completion_queue &cq,
                                           uint64_t tag, order o = order::row_major,
                                           const std::vector<ptrdiff_t> &strides = {});

  private:
    // Whether T differs from the dtype; false when the dtype cannot be read
    // (the C call that follows reports the handle's status).
    template <typename T> bool dtype_differs() const noexcept {
        ta_dtype d = 0;
        return ta_tensor_dtype(h_.get(), &d) == TA_STATUS_OK && d != static_cast<ta_dtype>(dtype_v<T>);
    }
    template <typename T> error dtype_error(const char *origin) const {
        return error(status::dtype_mismatch,
                     std::string("the element type (") + dtype_name(dtype_v<T>) + ") is not the tensor's dtype (" +
                         dtype_name(element_type()) + ")",
                     origin);
    }
    template <typename B> static void release_box(void *u) noexcept {
        B *b = static_cast<B *>(u);
#if !defined(TA_HPP_NO_EXCEPTIONS)
        try {
            (*b)();
        } catch (...) {
        }
#else
        (*b)();
#endif
        delete b;
    }
    detail::handle<ta_tensor> h_;
};

template <typename T>
inline detail::ret<tensor> tensor::wrap_notify(T *data, const std::vector<size_t> &extents, const completion_queue &cq,
                                               uint64_t tag, order o, const std::vector<ptrdiff_t> &strides) {
    ta_wrap_options w;
    std::memset(&w, 0, sizeof w);
    w.struct_size = sizeof w;
    w.flags = std::is_const<T>::value ? TA_WRAP_READ_ONLY : 0;
    w.release_cq = cq.get();
    w.release_tag = tag;
    ta_tensor *t = nullptr;
    ta_error *e = nullptr;
    TA_HPP_CHECK(tensor,
                 ta_tensor_wrap_ex(static_cast<ta_dtype>(dtype_v<T>), extents.size(), extents.data(),
                                   strides.empty() ? nullptr : strides.data(), static_cast<ta_order>(o),
                                   const_cast<void *>(static_cast<const void *>(data)), &w, &t, &e),
                 e);
    return tensor(t);
}

/// A block array: one allocation cut into blocks, each with its own epoch queue.
class block_array {
  public:
    block_array() = default;
    explicit block_array(ta_blocks *b) noexcept : h_(b) {}
    ta_blocks *get() const noexcept { return h_.get(); }
    explicit operator bool() const noexcept { return bool(h_); }

    static detail::ret<block_array> tiled(dtype dt, const std::vector<size_t> &extents,
                                          const std::vector<size_t> &tile_extents, order o = order::row_major,
                                          ta_domain domain = host) {
        ta_blocks *b = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(block_array,
                     ta_blocks_new_tiled(static_cast<ta_dtype>(dt), domain, extents.size(), extents.data(),
                                         tile_extents.data(), static_cast<ta_order>(o), &b, &e),
                     e);
        return block_array(b);
    }
    /// Blocks of arbitrary shapes: one extents list per block.
    static detail::ret<block_array> list(dtype dt, const std::vector<std::vector<size_t>> &shapes,
                                         order o = order::row_major, ta_domain domain = host) {
        std::vector<size_t> ranks, ext;
        for (const auto &s : shapes) {
            ranks.push_back(s.size());
            ext.insert(ext.end(), s.begin(), s.end());
        }
        ta_blocks *b = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(block_array,
                     ta_blocks_new_list(static_cast<ta_dtype>(dt), domain, shapes.size(), ranks.data(), ext.data(),
                                        static_cast<ta_order>(o), &b, &e),
                     e);
        return block_array(b);
    }
    size_t count() const noexcept {
        size_t n = 0;
        ta_blocks_count(h_.get(), &n);
        return n;
    }
    detail::ret<std::vector<size_t>> grid(size_t rank) const {
        std::vector<size_t> g(rank);
        TA_HPP_CHECK(std::vector<size_t>, ta_blocks_grid(h_.get(), g.data(), rank), nullptr);
        return g;
    }
    detail::ret<tensor> block(size_t index) const {
        ta_tensor *t = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(tensor, ta_blocks_block(h_.get(), index, &t, &e), e);
        return tensor(t);
    }
    detail::ret<tensor> tile(const std::vector<size_t> &index) const {
        ta_tensor *t = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(tensor, ta_blocks_tile(h_.get(), index.size(), index.data(), &t, &e), e);
        return tensor(t);
    }
    detail::ret<tensor> coalesce(const std::vector<size_t> &lo, const std::vector<size_t> &hi) const {
        ta_tensor *t = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(tensor, ta_blocks_coalesce(h_.get(), lo.size(), lo.data(), hi.data(), &t, &e), e);
        return tensor(t);
    }
    detail::ret<tensor> coalesce_range(size_t first, size_t last) const {
        ta_tensor *t = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(tensor, ta_blocks_coalesce_range(h_.get(), first, last, &t, &e), e);
        return tensor(t);
    }
    detail::ret<tensor> all() const {
        ta_tensor *t = nullptr;
        ta_error *e = nullptr;
        TA_HPP_CHECK(tensor, ta_blocks_all(h_.get(), &t, &e), e);
        return tensor(t);
    }

  private:
    detail::handle<ta_blocks> h_;
};

// ---------------------------------------------------------------- operations

#define TA_HPP_OP(call)                                                                              \
    ta_event *ta_hpp_ev_ = nullptr;                                                                  \
    ta_error *ta_hpp_e_ = nullptr;                                                                   \
    TA_HPP_CHECK_VOID((call), ta_hpp_e_);                                                            \
    o.deliver(ta_hpp_ev_);                                                                           \
    TA_HPP_RETURN_VOID
#define TA_HPP_TAIL o.c(), o.event_slot(&ta_hpp_ev_), &ta_hpp_e_

/// C = alpha·A·B + beta·C.
inline detail::ret<void> gemm(const tensor &c, scalar alpha, const tensor &a, const tensor &b, scalar beta,
                              const options &o = options()) {
    TA_HPP_OP(ta_gemm(c.get(), alpha.c, a.get(), b.get(), beta.c, TA_HPP_TAIL));
}
/// C = alpha·A·B (an overwrite that constructs or reshapes C).
inline detail::ret<void> assign_product(const tensor &c, scalar alpha, const tensor &a, const tensor &b,
                                        const options &o = options()) {
    TA_HPP_OP(ta_assign_product(c.get(), alpha.c, a.get(), b.get(), TA_HPP_TAIL));
}
/// C = alpha·A·B + C.
inline detail::ret<void> add_product(const tensor &c, scalar alpha, const tensor &a, const tensor &b,
                                     const options &o = options()) {
    TA_HPP_OP(ta_add_product(c.get(), alpha.c, a.get(), b.get(), TA_HPP_TAIL));
}
/// A new tensor A·B (computed asynchronously).
inline detail::ret<tensor> matmul(const tensor &a, const tensor &b, const options &o = options()) {
    ta_tensor *c = nullptr;
    ta_error *e = nullptr;
    TA_HPP_CHECK(tensor, ta_tensor_new(static_cast<ta_dtype>(a.element_type()), a.domain(), &c, &e), e);
    tensor out(c);
    ta_event *ev = nullptr;
    TA_HPP_CHECK(tensor, ta_assign_product(c, detail::to_c(1.0), a.get(), b.get(), o.c(), o.event_slot(&ev), &e), e);
    o.deliver(ev);
    return out;
}
/// Tensordot: sums axes a_axes[k] of A against b_axes[k] of B. Without beta, an overwrite of C.
inline detail::ret<void> contract(const tensor &c, scalar alpha, const tensor &a, const tensor &b,
                                  const std::vector<size_t> &a_axes, const std::vector<size_t> &b_axes,
                                  const options &o = options()) {
    if (a_axes.size() != b_axes.size())
        TA_HPP_FAIL(void, error(status::invalid_argument, "a_axes and b_axes differ in length", "ta::contract"));
    TA_HPP_OP(ta_contract(c.get(), alpha.c, a.get(), b.get(), a_axes.size(), a_axes.data(), b_axes.data(), nullptr,
                          TA_HPP_TAIL));
}
inline detail::ret<void> contract(const tensor &c, scalar alpha, const tensor &a, const tensor &b,
                                  const std::vector<size_t> &a_axes, const std::vector<size_t> &b_axes, scalar beta,
                                  const options &o = options()) {
    if (a_axes.size() != b_axes.size())
        TA_HPP_FAIL(void, error(status::invalid_argument, "a_axes and b_axes differ in length", "ta::contract"));
    TA_HPP_OP(ta_contract(c.get(), alpha.c, a.get(), b.get(), a_axes.size(), a_axes.data(), b_axes.data(), &beta.c,
                          TA_HPP_TAIL));
}
/// Sets every element to `value`. An integer `value` is passed exactly
/// (ta_fill_i64/ta_fill_u64: every 64-bit value, not only those a double
/// names); a floating-point or complex one as a ta_scalar (ta_fill).
inline detail::ret<void> fill(const tensor &t, scalar value, const options &o = options()) {
    TA_HPP_OP(ta_fill(t.get(), value.c, TA_HPP_TAIL));
}
template <typename I, typename = std::enable_if_t<std::is_integral<I>::value>>
inline detail::ret<void> fill(const tensor &t, I value, const options &o = options()) {
    if constexpr (std::is_signed<I>::value) {
        TA_HPP_OP(ta_fill_i64(t.get(), static_cast<int64_t>(value), TA_HPP_TAIL));
    } else {
        TA_HPP_OP(ta_fill_u64(t.get(), static_cast<uint64_t>(value), TA_HPP_TAIL));
    }
}
/// x = alpha·x; an integer `alpha` is passed exactly (ta_scale_i64/ta_scale_u64).
inline detail::ret<void> scale(const tensor &x, scalar alpha, const options &o = options()) {
    TA_HPP_OP(ta_scale(x.get(), alpha.c, TA_HPP_TAIL));
}
template <typename I, typename = std::enable_if_t<std::is_integral<I>::value>>
inline detail::ret<void> scale(const tensor &x, I alpha, const options &o = options()) {
    if constexpr (std::is_signed<I>::value) {
        TA_HPP_OP(ta_scale_i64(x.get(), static_cast<int64_t>(alpha), TA_HPP_TAIL));
    } else {
        TA_HPP_OP(ta_scale_u64(x.get(), static_cast<uint64_t>(alpha), TA_HPP_TAIL));
    }
}
/// y = alpha·x + y.
inline detail::ret<void> axpy(const tensor &y, scalar alpha, const tensor &x, const options &o = options()) {
    TA_HPP_OP(ta_axpy(y.get(), alpha.c, x.get(), TA_HPP_TAIL));
}
/// dst = src.
inline detail::ret<void> copy(const tensor &dst, const tensor &src, const options &o = options()) {
    TA_HPP_OP(ta_copy(dst.get(), src.get(), TA_HPP_TAIL));
}
/// dst = src with axes permuted, materialised.
inline detail::ret<void> permute(const tensor &dst, const tensor &src, const std::vector<size_t> &perm,
                                 const options &o = options()) {
    TA_HPP_OP(ta_permute(dst.get(), src.get(), perm.size(), perm.data(), TA_HPP_TAIL));
}
/// dst = conj(src), materialised.
inline detail::ret<void> conj(const tensor &dst, const tensor &src, const options &o = options()) {
    TA_HPP_OP(ta_conj(dst.get(), src.get(), TA_HPP_TAIL));
}
/// out = the sum of x over `axes` (every element when empty).
inline detail::ret<void> sum(const tensor &out, const tensor &x, const std::vector<size_t> &axes = {},
                             const options &o = options()) {
    TA_HPP_OP(ta_sum(out.get(), x.get(), axes.size(), axes.empty() ? nullptr : axes.data(), TA_HPP_TAIL));
}
/// out (0-d) = sum(x·y), or sum(conj(x)·y) with conjugate.
inline detail::ret<void> dot(const tensor &out, const tensor &x, const tensor &y, bool conjugate = false,
                             const options &o = options()) {
    TA_HPP_OP(ta_dot(out.get(), x.get(), y.get(), conjugate ? 1 : 0, TA_HPP_TAIL));
}
inline detail::ret<void> norm2(const tensor &out, const tensor &x, const options &o = options()) {
    TA_HPP_OP(ta_norm2(out.get(), x.get(), TA_HPP_TAIL));
}
/// In-place Cholesky of a square matrix.
inline detail::ret<void> potrf(const tensor &a, ta::uplo u, const options &o = options()) {
    TA_HPP_OP(ta_potrf(a.get(), static_cast<ta_uplo>(u), TA_HPP_TAIL));
}
/// Triangular solve, X overwriting B: op(A)·X = alpha·B (left) or X·op(A) = alpha·B (right).
inline detail::ret<void> trsm(const tensor &b, ta::side s, ta::uplo u, ta::diag d, scalar alpha, const tensor &a,
                              const options &o = options()) {
    TA_HPP_OP(ta_trsm(b.get(), static_cast<ta_side>(s), static_cast<ta_uplo>(u), static_cast<ta_diag>(d), alpha.c,
                      a.get(), TA_HPP_TAIL));
}
/// C = alpha·A·A^H + beta·C on one triangle.
inline detail::ret<void> syrk(const tensor &c, ta::uplo u, scalar alpha, const tensor &a, scalar beta,
                              const options &o = options()) {
    TA_HPP_OP(ta_syrk(c.get(), static_cast<ta_uplo>(u), alpha.c, a.get(), beta.c, TA_HPP_TAIL));
}

// ---------------------------------------------------------------- user kernels

/// One unfinished operation whose completion the program reports: a kernel
/// that called ctx.defer(), or an operation from ta::external(). finish()
/// completes it; a token destroyed unfinished fails its operation (outputs
/// poisoned, with a message saying so). finish() may be called on any thread.
class token {
  public:
    token() = default;
    explicit token(ta_token *t) noexcept : h_(t) {}
    ta_token *get() const noexcept { return h_.get(); }
    explicit operator bool() const noexcept { return bool(h_); }

    /// Completes the operation with `s` (ok, or a failure whose message is
    /// `message`). Returns ok, already_finished (the runtime cancelled it
    /// first), or a handle status for a token finished before.
    ta::status finish(ta::status s = ta::status::ok, const char *message = nullptr) noexcept {
        return static_cast<ta::status>(ta_token_finish(h_.release(), static_cast<ta_status>(s), message));
    }
    /// The typed view of access `index` of an external operation (valid until
    /// finish); fails with status pending before its accesses are granted.
    template <typename T, size_t N> detail::ret<view<T, N>> view(size_t index) const {
        using V = ta::view<T, N>;
        std::vector<ta_view> vs(8);
        size_t n = 0;
        ta_status s = ta_token_views(h_.get(), vs.data(), vs.size(), &n);
        if (s == TA_STATUS_BUFFER_TOO_SMALL) {
            vs.resize(n);
            s = ta_token_views(h_.get(), vs.data(), vs.size(), &n);
        }
        TA_HPP_CHECK(V, s, nullptr);
        if (index >= n) TA_HPP_FAIL(V, error(status::out_of_range, "no access with this index", "ta::token::view"));
        if (const char *why = V::check(vs[index])) TA_HPP_FAIL(V, error(status::dtype_mismatch, why, "ta::token::view"));
        return V::from_c(vs[index]);
    }

  private:
    detail::handle<ta_token> h_;
};

/// The context of a running kernel (first parameter of a kernel, optional).
class kernel_ctx {
  public:
    explicit kernel_ctx(ta_kernel_ctx *c) noexcept : c_(c) {}
    ta_kernel_ctx *get() const noexcept { return c_; }
    /// The operation will not complete when the kernel returns but when the
    /// returned token is finished; it keeps its accesses until then without
    /// occupying a worker. The views' data stay valid until then (ta::view
    /// holds its own copy of extents and strides, so views may be kept).
    detail::ret<token> defer() const {
        ta_token *t = nullptr;
        TA_HPP_CHECK(token, ta_kernel_defer(c_, &t), nullptr);
        return token(t);
    }
    /// Runs f(begin, end) over pieces of [begin, end) in parallel on the
    /// runtime's workers, and returns when every piece is done. An exception
    /// thrown by f never unwinds into the library: the pieces not yet started
    /// are skipped and the first exception is rethrown here, on the kernel's
    /// thread, once the loop is over (so, uncaught, it fails the kernel as
    /// any exception of a kernel does). A failure of the call itself (begin >
    /// end, a context not of a running kernel) throws ta::error; in the
    /// no-exceptions mode f must not throw and such failures are ignored.
    template <typename F> void parallel_for(size_t begin, size_t end, size_t grain, F &&f) const {
        using B = std::remove_reference_t<F>;
#if !defined(TA_HPP_NO_EXCEPTIONS)
        struct state {
            B *f;
            std::atomic<bool> failed{false};
            std::exception_ptr exc;
        } st;
        st.f = &f;
        ta_status s = ta_kernel_parallel_for(
            c_, begin, end, grain,
            [](size_t b, size_t e, void *ud) {
                auto *p = static_cast<state *>(ud);
                if (p->failed.load(std::memory_order_relaxed)) return;
                try {
                    (*p->f)(b, e);
                } catch (...) {
                    // The first exception is kept; the loop's end orders this write before the rethrow.
                    if (!p->failed.exchange(true, std::memory_order_acq_rel)) p->exc = std::current_exception();
                }
            },
            &st);
        if (st.exc) std::rethrow_exception(st.exc);
        if (s != TA_STATUS_OK)
            throw error(static_cast<ta::status>(s), std::string("parallel_for: ") + ta_status_describe(s),
                        "ta::kernel_ctx::parallel_for");
#else
        ta_kernel_parallel_for(
            c_, begin, end, grain, [](size_t b, size_t e, void *ud) { (*static_cast<B *>(ud))(b, e); },
            const_cast<void *>(static_cast<const void *>(&f)));
#endif
    }

  private:
    ta_kernel_ctx *c_;
};

/// An operand of a kernel: a tensor and how the kernel uses it.
struct access {
    ta_access c;
};
inline access in(const tensor &t) noexcept { return access{{t.get(), TA_MODE_READ}}; }
inline access out(const tensor &t) noexcept { return access{{t.get(), TA_MODE_WRITE}}; }
inline access inout(const tensor &t) noexcept { return access{{t.get(), TA_MODE_UPDATE}}; }

namespace detail {
template <typename T> struct fn_traits : fn_traits<decltype(&T::operator())> {};
template <typename C, typename R, typename... A> struct fn_traits<R (C::*)(A...) const> {
    using args = std::tuple<A...>;
    using result_type = R;
};
template <typename C, typename R, typename... A> struct fn_traits<R (C::*)(A...)> {
    using args = std::tuple<A...>;
    using result_type = R;
};
template <typename C, typename R, typename... A> struct fn_traits<R (C::*)(A...) const noexcept> {
    using args = std::tuple<A...>;
    using result_type = R;
};
template <typename C, typename R, typename... A> struct fn_traits<R (C::*)(A...) noexcept> {
    using args = std::tuple<A...>;
    using result_type = R;
};

template <typename V> struct is_view : std::false_type {};
template <typename T, size_t N> struct is_view<ta::view<T, N>> : std::true_type {};

template <typename Tuple> struct split_ctx;
template <typename... A> struct split_ctx<std::tuple<A...>> {
    static constexpr bool has_ctx = false;
    using views = std::tuple<std::decay_t<A>...>;
};
template <typename... A> struct split_ctx<std::tuple<kernel_ctx &, A...>> {
    static constexpr bool has_ctx = true;
    using views = std::tuple<std::decay_t<A>...>;
};
template <typename... A> struct split_ctx<std::tuple<const kernel_ctx &, A...>> {
    static constexpr bool has_ctx = true;
    using views = std::tuple<std::decay_t<A>...>;
};

template <typename F> struct kernel_info {
    using traits = fn_traits<std::decay_t<F>>;
    using split = split_ctx<typename traits::args>;
    using views = typename split::views;
    static constexpr size_t nviews = std::tuple_size<views>::value;
};

template <typename Views, size_t... I>
const char *check_views(const ta_view *v, std::index_sequence<I...>) noexcept {
    const char *why = nullptr;
    ((why = why ? why : std::tuple_element_t<I, Views>::check(v[I])), ...);
    return why;
}
template <typename Views, size_t... I>
bool check_modes(const ta_access *a, std::index_sequence<I...>) noexcept {
    // A writable view (non-const T) needs a write or update access.
    return ((std::is_const<typename std::tuple_element_t<I, Views>::element_type>::value ||
             a[I].mode != TA_MODE_READ) &&
            ...);
}

template <typename F, typename Info, size_t... I>
ta_status call_kernel(F &f, const ta_view *v, ta_kernel_ctx *c, std::index_sequence<I...>) {
    using Views = typename Info::views;
    using R = typename Info::traits::result_type;
    if constexpr (Info::split::has_ctx) {
        kernel_ctx ctx(c);
        if constexpr (std::is_void<R>::value) {
            f(ctx, std::tuple_element_t<I, Views>::from_c(v[I])...);
            return TA_STATUS_OK;
        } else {
            return static_cast<ta_status>(f(ctx, std::tuple_element_t<I, Views>::from_c(v[I])...));
        }
    } else {
        (void)c;
        if constexpr (std::is_void<R>::value) {
            f(std::tuple_element_t<I, Views>::from_c(v[I])...);
            return TA_STATUS_OK;
        } else {
            return static_cast<ta_status>(f(std::tuple_element_t<I, Views>::from_c(v[I])...));
        }
    }
}

// The C kernel: checks the views, runs the callable, turns an exception
// into a failed operation (its what() as the message). Never throws.
template <typename F> ta_status kernel_trampoline(const ta_view *views, size_t nviews, F &f, ta_kernel_ctx *ctx) noexcept {
    using Info = kernel_info<F>;
    using Seq = std::make_index_sequence<Info::nviews>;
    if (nviews != Info::nviews) {
        ta_kernel_set_error(ctx, "ta::submit: wrong number of views");
        return TA_STATUS_INVALID_ARGUMENT;
    }
    if (const char *why = check_views<typename Info::views>(views, Seq{})) {
        ta_kernel_set_error(ctx, why);
        return TA_STATUS_DTYPE_MISMATCH;
    }
#if !defined(TA_HPP_NO_EXCEPTIONS)
    try {
        return call_kernel<F, Info>(f, views, ctx, Seq{});
    } catch (const std::exception &ex) {
        ta_kernel_set_error(ctx, ex.what());
        return TA_STATUS_KERNEL_FAILED;
    } catch (...) {
        ta_kernel_set_error(ctx, "unknown C++ exception in a kernel");
        return TA_STATUS_KERNEL_FAILED;
    }
#else
    return call_kernel<F, Info>(f, views, ctx, Seq{});
#endif
}

// A captureless callable: one shared instance, no allocation per submission.
// The first call (from the submitting thread, before the kernel can run)
// initialises it from `f`; the kernel's calls pass nullptr.
template <typename F> F &stateless_instance(const F *f) {
    static F inst(*f);
    return inst;
}
template <typename F>
constexpr bool is_stateless = std::is_empty<F>::value && std::is_trivially_copyable<F>::value &&
                              std::is_trivially_destructible<F>::value;
template <typename F>
constexpr bool fits_in_pointer = sizeof(F) <= sizeof(void *) && alignof(F) <= alignof(void *) &&
                                 std::is_trivially_copyable<F>::value && std::is_trivially_destructible<F>::value;
} // namespace detail

/// Submits a kernel: `f` receives one ta::view<T, N> per access, in order
/// (optionally a ta::kernel_ctx& first), and runs once the accesses are
/// granted. Views of const T are for in() accesses; writable views need
/// out() or inout(). An exception thrown by f fails the operation and
/// poisons its outputs, with what() as the error's message. A captureless
/// f, or one whose state is trivially copyable and fits in a pointer, costs
/// no allocation; larger state is moved to the heap and freed when the
/// operation completes.
template <typename F, typename... A>
detail::ret<void> submit(const options &o, F &&f, A... accesses) {
    using Fn = std::decay_t<F>;
    using Info = detail::kernel_info<Fn>;
    static_assert(sizeof...(A) == Info::nviews, "one access per view parameter of the kernel");
    const ta_access acc[sizeof...(A) > 0 ? sizeof...(A) : 1] = {accesses.c...};
    if (!detail::check_modes<typename Info::views>(acc, std::make_index_sequence<Info::nviews>{}))
        TA_HPP_FAIL(void, error(status::invalid_argument, "a writable view needs an out() or inout() access",
                                "ta::submit"));
    ta_event *ev = nullptr;
    ta_error *e = nullptr;
    ta_status s;
    if constexpr (detail::is_stateless<Fn>) {
        detail::stateless_instance<Fn>(&f);
        s = ta_kernel_submit(
            [](const ta_view *v, size_t n, void *, ta_kernel_ctx *ctx) -> ta_status {
                return detail::kernel_trampoline<Fn>(v, n, detail::stateless_instance<Fn>(nullptr), ctx);
            },
            nullptr, o.name(), acc, sizeof...(A), o.c(), o.event_slot(&ev), &e);
    } else if constexpr (detail::fits_in_pointer<Fn>) {
        // Small trivially copyable state travels in the userdata pointer itself.
        void *ud = nullptr;
        std::memcpy(&ud, static_cast<const void *>(&f), sizeof(Fn));
        s = ta_kernel_submit(
            [](const ta_view *v, size_t n, void *u, ta_kernel_ctx *ctx) -> ta_status {
                alignas(Fn) unsigned char buf[sizeof(Fn)];
                std::memcpy(buf, &u, sizeof(Fn));
                return detail::kernel_trampoline<Fn>(v, n, *std::launder(reinterpret_cast<Fn *>(buf)), ctx);
            },
            ud, o.name(), acc, sizeof...(A), o.c(), o.event_slot(&ev), &e);
    } else {
        Fn *box = new Fn(std::forward<F>(f));
        ta_submit_ex sub = o.ex();
        sub.submit.callback = [](ta_status, void *ud) { delete static_cast<Fn *>(ud); };
        sub.submit.callback_userdata = box;
        s = ta_kernel_submit(
            [](const ta_view *v, size_t n, void *ud, ta_kernel_ctx *ctx) -> ta_status {
                return detail::kernel_trampoline<Fn>(v, n, *static_cast<Fn *>(ud), ctx);
            },
            box, o.name(), acc, sizeof...(A), &sub.submit, o.event_slot(&ev), &e);
        if (s != TA_STATUS_OK) delete box;
    }
    TA_HPP_CHECK_VOID(s, e);
    o.deliver(ev);
    TA_HPP_RETURN_VOID;
}
template <typename F, typename A0, typename... A,
          typename = std::enable_if_t<std::is_same<std::decay_t<A0>, access>::value>>
detail::ret<void> submit(F &&f, A0 a0, A... accesses) {
    return submit(options(), std::forward<F>(f), a0, accesses...);
}

/// An operation whose body the program runs on its own thread.
struct external_op {
    ta::token token;     // finish() it when the work is done
    ta::event started;   // completes when every access is granted (or an input is poisoned)
    ta::event completed; // the operation's completion
};
/// Enrolls an external operation with these accesses (same rules as submit):
/// wait for `started`, work on `token.view<T, N>(k)`, then `token.finish()`.
template <typename... A> detail::ret<external_op> external(const options &o, A... accesses) {
    const ta_access acc[sizeof...(A) > 0 ? sizeof...(A) : 1] = {accesses.c...};
    ta_token *t = nullptr;
    ta_event *st = nullptr, *ev = nullptr;
    ta_error *e = nullptr;
    TA_HPP_CHECK(external_op, ta_external_submit(acc, sizeof...(A), o.name(), o.c(), &t, &st, &ev, &e), e);
    external_op op;
    op.token = ta::token(t);
    op.started = ta::event(st);
    op.completed = ta::event(ev);
    return op;
}

// ---------------------------------------------------------------- coroutines

#if defined(TA_HPP_HAVE_COROUTINES)
/// What co_await on an event (or t.ready()) waits with. Resumes the coroutine
/// on a completion queue or inline; the library's workers never block on it.
struct event::awaiter : completion_queue::resumption {
    const ta_event *ev;
    const completion_queue *cq; // resume there (nullptr: inline)
    bool use_current;
    std::coroutine_handle<> h{};
    ta_status st = TA_STATUS_OK;
    ta_error *err = nullptr;
    std::atomic<int> state{0}; // 0 waiting, 1 suspended, 2 completed

    awaiter(const ta_event *e, const completion_queue *q, bool cur) noexcept : resumption{&on_cq}, ev(e), cq(q), use_current(cur) {}
    awaiter(const awaiter &o) noexcept : resumption{&on_cq}, ev(o.ev), cq(o.cq), use_current(o.use_current) {}
    ~awaiter() {
        if (err) ta_error_free(err);
    }

    bool await_ready() noexcept {
        ta_status s = ta_event_poll(ev);
        if (s == TA_STATUS_PENDING) return false;
        complete(s);
        return true;
    }
    bool await_suspend(std::coroutine_handle<> handle) noexcept {
        h = handle;
        const completion_queue *q = use_current ? completion_queue::current() : cq;
        if (q) {
            uint64_t tag = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(static_cast<resumption *>(this))) |
                           completion_queue::reserved_tag_bit;
            if (ta_event_notify(ev, q->get(), tag) != TA_STATUS_OK) {
                complete(ta_event_poll(ev));
                return false;
            }
            return true;
        }
        ta_status s = ta_event_on_complete(ev, &on_callback, this);
        if (s != TA_STATUS_OK) {
            st = s;
            return false;
        }
        // The callback may have run already, on this thread: then do not suspend.
        return state.exchange(1, std::memory_order_acq_rel) != 2;
    }
    detail::ret<void> await_resume() {
        if (st != TA_STATUS_OK) {
            ta_error *e = err;
            err = nullptr;
            TA_HPP_FAIL(void, error::from_c(st, e));
        }
        TA_HPP_RETURN_VOID;
    }

  private:
    void complete(ta_status s) noexcept {
        st = s;
        if (s != TA_STATUS_OK && s != TA_STATUS_PENDING) {
            ta_error *e = nullptr;
            if (ta_event_error(ev, &e) == TA_STATUS_OK) err = e;
        }
    }
    static void on_callback(ta_status s, void *ud) noexcept {
        auto *self = static_cast<awaiter *>(ud);
        self->complete(s);
        if (self->state.exchange(2, std::memory_order_acq_rel) == 1) self->h.resume();
    }
    static void on_cq(resumption *r, ta_status s, ta_error *e) {
        auto *self = static_cast<awaiter *>(r);
        self->st = s;
        if (e) {
            self->err = e;
        } else if (s != TA_STATUS_OK) {
            ta_error *pe = nullptr;
            if (ta_event_error(self->ev, &pe) == TA_STATUS_OK) self->err = pe;
        }
        self->h.resume();
    }
};

inline event::awaiter event::operator co_await() const & noexcept { return awaiter(h_.get(), nullptr, true); }
inline event::awaiter event::resume_on(const completion_queue &cq) const noexcept { return awaiter(h_.get(), &cq, false); }
inline event::awaiter event::resume_inline() const noexcept { return awaiter(h_.get(), nullptr, false); }

/// An event held by an awaiter (co_await t.ready()).
struct owning_awaiter : event::awaiter {
    event held;
    explicit owning_awaiter(event &&e) noexcept : event::awaiter(e.get(), nullptr, true), held(std::move(e)) {}
};
inline owning_awaiter operator co_await(event &&e) noexcept { return owning_awaiter(std::move(e)); }

/// co_await t.read_async(): the granted mapping (throws the tensor's error).
template <mode M> struct mapping_awaiter : event::awaiter {
    pending_mapping<M> p;
    explicit mapping_awaiter(pending_mapping<M> &&pm) noexcept
        : event::awaiter(pm.granted().get(), nullptr, true), p(std::move(pm)) {}
    detail::ret<mapping<M>> await_resume() {
#if defined(TA_HPP_NO_EXCEPTIONS)
        auto r = event::awaiter::await_resume();
        if (!r) return detail::fail_with<mapping<M>>(r.error());
#else
        event::awaiter::await_resume();
#endif
        return p.take();
    }
};
template <mode M> inline mapping_awaiter<M> operator co_await(pending_mapping<M> &&pm) noexcept {
    return mapping_awaiter<M>(std::move(pm));
}

namespace detail {
// How a task driven by completion_queue::run() tells it that it finished,
// on whatever thread it finished (an inline resumption runs it on a worker):
// `done` (release; run() reads it with acquire before the task's result),
// and a byte on a pipe that run() polls next to the queue's descriptor.
struct run_signal {
    std::atomic<bool> done{false};
    int fds[2] = {-1, -1};
    run_signal() noexcept {
        if (::pipe(fds) != 0) {
            fds[0] = fds[1] = -1;
            return;
        }
        ::fcntl(fds[0], F_SETFD, FD_CLOEXEC);
        ::fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    }
    run_signal(const run_signal &) = delete;
    run_signal &operator=(const run_signal &) = delete;
    ~run_signal() {
        if (fds[0] >= 0) ::close(fds[0]);
        if (fds[1] >= 0) ::close(fds[1]);
    }
    // The last access of the signalling thread to *this is the store.
    void fire() noexcept {
        if (fds[1] >= 0) {
            const char b = 1;
            ssize_t w;
            do {
                w = ::write(fds[1], &b, 1);
            } while (w < 0 && errno == EINTR);
        }
        done.store(true, std::memory_order_release);
    }
};

struct promise_base {
    std::coroutine_handle<> continuation{};
    run_signal *signal = nullptr; // set for the task that completion_queue::run drives
#if !defined(TA_HPP_NO_EXCEPTIONS)
    std::exception_ptr exc;
    void unhandled_exception() noexcept { exc = std::current_exception(); }
#else
    void unhandled_exception() noexcept { std::abort(); }
#endif
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct final_awaiter {
        bool await_ready() noexcept { return false; }
        template <typename P> std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
            auto c = h.promise().continuation;
            if (c) return c;
            // The frame may be destroyed as soon as fire() stores: read nothing of it after.
            if (run_signal *sig = h.promise().signal) sig->fire();
            return std::noop_coroutine();
        }
        void await_resume() noexcept {}
    };
    final_awaiter final_suspend() noexcept { return {}; }
    void rethrow() {
#if !defined(TA_HPP_NO_EXCEPTIONS)
        if (exc) std::rethrow_exception(exc);
#endif
    }
};
template <typename T> struct promise : promise_base {
    std::optional<T> value;
    template <typename U> void return_value(U &&v) { value.emplace(std::forward<U>(v)); }
    T take() {
        rethrow();
        return std::move(*value);
    }
};
template <> struct promise<void> : promise_base {
    void return_void() noexcept {}
    void take() { rethrow(); }
};
} // namespace detail

/// A lazy coroutine: started by completion_queue::run/spawn or by co_await
/// from another task.
template <typename T> class task {
  public:
    struct promise_type : detail::promise<T> {
        task get_return_object() noexcept { return task(std::coroutine_handle<promise_type>::from_promise(*this)); }
    };
    task() = default;
    task(task &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    task &operator=(task &&o) noexcept {
        if (this != &o) {
            if (h_) h_.destroy();
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    ~task() {
        if (h_) h_.destroy();
    }
    bool done() const noexcept { return !h_ || h_.done(); }
    std::coroutine_handle<promise_type> handle() const noexcept { return h_; }

    auto operator co_await() && noexcept {
        struct aw {
            std::coroutine_handle<promise_type> h;
            bool await_ready() noexcept { return h.done(); }
            std::coroutine_handle<> await_suspend(std::coroutine_handle<> c) noexcept {
                h.promise().continuation = c;
                return h;
            }
            T await_resume() { return h.promise().take(); }
        };
        return aw{h_};
    }

  private:
    explicit task(std::coroutine_handle<promise_type> h) noexcept : h_(h) {}
    std::coroutine_handle<promise_type> h_{};
};

template <typename T> T completion_queue::run(task<T> t) {
    auto h = t.handle();
    detail::run_signal sig;
    h.promise().signal = &sig;
    completion_queue *prev = current();
    current() = this;
    h.resume();
    current() = prev;
    // Until the task finishes: here (resumed by drain()) or on another
    // thread (an await that resumes inline), which then writes to the pipe.
    while (!sig.done.load(std::memory_order_acquire)) {
        struct pollfd p[2];
        p[0].fd = fd();
        p[0].events = POLLIN;
        p[0].revents = 0;
        p[1].fd = sig.fds[0];
        p[1].events = POLLIN;
        p[1].revents = 0;
        // Without a pipe (none could be made), look at the flag every millisecond.
        ::poll(p, sig.fds[0] >= 0 ? 2 : 1, sig.fds[0] >= 0 ? -1 : 1);
        drain();
    }
    return h.promise().take();
}
#endif

// ---------------------------------------------------------------- readiness

inline detail::ret<event> tensor::ready() const {
    ta_event *ev = nullptr;
    ta_error *e = nullptr;
    TA_HPP_CHECK(event, ta_tensor_ready(h_.get(), &ev, &e), e);
    return event(ev);
}

} // namespace ta

#undef TA_HPP_OP
#undef TA_HPP_TAIL
#undef TA_HPP_CHECK
#undef TA_HPP_CHECK_VOID
#undef TA_HPP_FAIL
#undef TA_HPP_RETURN_VOID

#endif // TENSORASYNC_HPP
