// engine/status.h: the engine's errors. A small closed set of codes, carried by value; no
// exception leaves engine/. A Status is [[nodiscard]]: dropping one is a compile warning, and
// `ignore()` says so on purpose. The server turns codes into HTTP statuses in one function.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace fenec::engine {

enum class Code : uint8_t {
    ok,
    not_found,
    already_exists,
    invalid_argument,
    duplicate,
    limit_exceeded,
    quota_exceeded,
    rate_limited,
    not_leased,
    frozen,
    read_only,
    busy,
    corruption,
    io_error,
    // A write refused, nothing of it landed: an earlier write failed and latched the database
    // read-only until it is opened again (INVARIANTS I5). detail.err_no is that failure's.
    latched,
    // A rewrite stopped on purpose before its rename (Database::cancel_rewrite: the tenant is
    // leaving service): nothing was replaced, the file is as it was.
    cancelled,
};

std::string_view code_name(Code);

enum class LeaseVerdict : uint8_t { ok, no_lease, lapsed, not_named };
std::string_view lease_verdict_name(LeaseVerdict);

enum class QuotaKind : uint8_t { none, bytes, rows, rows_per_s, bytes_per_s };
std::string_view quota_kind_name(QuotaKind);

// What a code needs beyond its message. Only the fields of the code at hand are meaningful.
struct Detail {
    uint64_t offset = 0;          // corruption: file offset of the bad record or byte
    QuotaKind quota = QuotaKind::none;  // quota_exceeded / rate_limited: which one
    double limit = 0;             // quota_exceeded: the limit (never the usage)
    int64_t retry_after_ms = 0;   // rate_limited
    LeaseVerdict lease = LeaseVerdict::ok;  // not_leased
    int err_no = 0;                         // io_error, latched
    uint64_t id = 0;              // duplicate / not_found: the document id
};

class [[nodiscard]] Status {
public:
    Status() = default;  // ok
    static Status ok() { return Status(); }
    static Status error(Code code, std::string message, Detail detail = {});

    bool is_ok() const { return rep_ == nullptr; }
    explicit operator bool() const { return is_ok(); }
    Code code() const { return rep_ ? rep_->code : Code::ok; }
    std::string_view message() const { return rep_ ? std::string_view(rep_->message) : ""; }
    const Detail& detail() const;
    // "code: message", for logs and test failures.
    std::string to_string() const;
    void ignore() const {}

private:
    struct Rep {
        Code code;
        std::string message;
        Detail detail;
    };
    std::shared_ptr<const Rep> rep_;  // null when ok; shared so copies are cheap
};

// A T or a non-ok Status.
template <class T>
class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit on purpose
    Result(Status status) : v_(std::move(status)) {}  // NOLINT: must not be ok

    bool is_ok() const { return v_.index() == 0; }
    explicit operator bool() const { return is_ok(); }
    const Status& status() const {
        static const Status kOk;
        return is_ok() ? kOk : std::get<1>(v_);
    }
    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

private:
    std::variant<T, Status> v_;
};

}  // namespace fenec::engine

#define FENEC_CONCAT_INNER(a, b) a##b
#define FENEC_CONCAT(a, b) FENEC_CONCAT_INNER(a, b)

// Return the Status of `expr` from the enclosing function when it is not ok.
#define FENEC_RETURN_IF_ERROR(expr)                          \
    do {                                                     \
        ::fenec::engine::Status fenec_status_ = (expr);      \
        if (!fenec_status_.is_ok()) return fenec_status_;    \
    } while (0)

// `FENEC_ASSIGN_OR_RETURN(auto x, f())`: bind the value of a Result or return its Status.
#define FENEC_ASSIGN_OR_RETURN(lhs, expr) \
    FENEC_ASSIGN_OR_RETURN_IMPL(FENEC_CONCAT(fenec_result_, __LINE__), lhs, expr)
#define FENEC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
    auto tmp = (expr);                              \
    if (!tmp.is_ok()) return tmp.status();          \
    lhs = std::move(tmp).value()
