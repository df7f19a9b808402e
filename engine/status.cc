// engine/status.cc: names of codes and the Status representation.
#include "engine/status.h"

namespace fenec::engine {

std::string_view code_name(Code c) {
    switch (c) {
        case Code::ok: return "ok";
        case Code::not_found: return "not_found";
        case Code::already_exists: return "already_exists";
        case Code::invalid_argument: return "invalid_argument";
        case Code::duplicate: return "duplicate";
        case Code::limit_exceeded: return "limit_exceeded";
        case Code::quota_exceeded: return "quota_exceeded";
        case Code::rate_limited: return "rate_limited";
        case Code::not_leased: return "not_leased";
        case Code::frozen: return "frozen";
        case Code::read_only: return "read_only";
        case Code::busy: return "busy";
        case Code::corruption: return "corruption";
        case Code::io_error: return "io_error";
        case Code::latched:
            return "latched";
        case Code::cancelled:
            return "cancelled";
    }
    return "unknown";
}

std::string_view lease_verdict_name(LeaseVerdict v) {
    switch (v) {
        case LeaseVerdict::ok: return "ok";
        case LeaseVerdict::no_lease: return "no_lease";
        case LeaseVerdict::lapsed: return "lapsed";
        case LeaseVerdict::not_named: return "not_named";
    }
    return "unknown";
}

std::string_view quota_kind_name(QuotaKind k) {
    switch (k) {
        case QuotaKind::none: return "none";
        case QuotaKind::bytes: return "bytes";
        case QuotaKind::rows: return "rows";
        case QuotaKind::rows_per_s: return "rows_per_s";
        case QuotaKind::bytes_per_s: return "bytes_per_s";
    }
    return "unknown";
}

Status Status::error(Code code, std::string message, Detail detail) {
    Status s;
    s.rep_ = std::make_shared<const Rep>(Rep{code, std::move(message), detail});
    return s;
}

const Detail& Status::detail() const {
    static const Detail kNone;
    return rep_ ? rep_->detail : kNone;
}

std::string Status::to_string() const {
    if (is_ok()) return "ok";
    std::string s(code_name(rep_->code));
    s += ": ";
    s += rep_->message;
    return s;
}

}  // namespace fenec::engine
