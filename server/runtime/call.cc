// server/runtime/call.cc: the rules and words both HTTP clients share (server/runtime/call.h): what
// each mishap comes to (failure, phase, whether the request was sent whole, the message), the
// resend rule, the answer's framing and when its connection may be pooled again.
#include "server/runtime/call.h"

namespace fenec::server {

std::optional<std::string_view> Answer::header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
        if (http::iequals(n, name)) return std::string_view(v);
    }
    return std::nullopt;
}

std::string_view phase_name(CallPhase phase) {
    switch (phase) {
        case CallPhase::resolving:
            return "resolving";
        case CallPhase::connecting:
            return "connecting";
        case CallPhase::sending:
            return "sending";
        case CallPhase::awaiting_head:
            return "awaiting the head";
        case CallPhase::answer:
            return "answer";
        case CallPhase::streaming:
            return "streaming";
        case CallPhase::done:
            return "done";
    }
    return "";
}

std::string seconds_text(uint64_t ms) {
    std::string s = std::to_string(ms / 1000);
    if (ms % 1000) {
        std::string frac = std::to_string(1000 + ms % 1000).substr(1);
        while (frac.back() == '0') frac.pop_back();
        s += "." + frac;
    }
    return s;
}

std::string peer_name(const CallRequest& request) {
    return request.peer_text.empty() ? "`" + request.addr + "`" : request.peer_text;
}

std::string who(const CallRequest& request) {
    return request.peer_text.empty() ? peer_name(request)
                                     : request.peer_text + " (" + request.addr + ")";
}

CallError call_error(const CallRequest& request, Mishap what, std::string_view detail,
                     uint64_t bound_ms) {
    auto error = [&](CallFailure f, CallPhase p, bool sent, std::string message) {
        return CallError{f, p, sent, std::move(message)};
    };
    const std::string d(detail);
    switch (what) {
        case Mishap::lookup_failed:
            return error(CallFailure::unreachable, CallPhase::resolving, false,
                         who(request) + " is unreachable: " + d);
        case Mishap::no_socket:
            return error(CallFailure::unreachable, CallPhase::connecting, false,
                         who(request) + " is unreachable: socket: " + d);
        case Mishap::connect_refused:
            return error(CallFailure::unreachable, CallPhase::connecting, false,
                         who(request) + " is unreachable: " + d);
        case Mishap::connect_timed_out:
            return error(CallFailure::unreachable, CallPhase::connecting, false,
                         who(request) + " did not accept a connection within " +
                             seconds_text(bound_ms) + " s");
        case Mishap::send_failed:
            return error(CallFailure::unreachable, CallPhase::sending, false,
                         who(request) + " ended the connection before the request was sent");
        case Mishap::send_stalled:
            return error(CallFailure::unreachable, CallPhase::sending, false,
                         who(request) + " took nothing of the request within " +
                             seconds_text(bound_ms) + " s");
        case Mishap::no_answer:
            return error(
                CallFailure::timeout, CallPhase::awaiting_head, true,
                peer_name(request) + " did not answer within " + seconds_text(bound_ms) + " s");
        case Mishap::closed_before_answer:
            return error(CallFailure::may_have_run, CallPhase::awaiting_head, true,
                         peer_name(request) +
                             " ended the connection after the request was sent: it may have "
                             "run");
        case Mishap::answer_cut:
            return error(CallFailure::cut, CallPhase::answer, true,
                         who(request) + " ended its answer part-way");
        case Mishap::malformed_head:
            return error(CallFailure::cut, CallPhase::answer, true,
                         who(request) + " answered a malformed head: " + d);
        case Mishap::answer_stalled:
            return error(CallFailure::timeout, CallPhase::answer, true,
                         who(request) + " stopped mid-answer: nothing within " +
                             seconds_text(bound_ms) + " s");
        case Mishap::too_large:
            return error(CallFailure::too_large, CallPhase::answer, true,
                         who(request) + " answered " + d);
        case Mishap::cancelled:
            return error(CallFailure::cancelled, CallPhase::done, false,
                         "the call to " + who(request) + " was cancelled");
        case Mishap::cancelled_after_send:
            return error(CallFailure::cancelled, CallPhase::awaiting_head, true,
                         "the call to " + who(request) +
                             " was cancelled after its request was sent: it may have run");
    }
    return error(CallFailure::unreachable, CallPhase::connecting, false, who(request));
}

const char* resend_reason(Mishap what, const CallRequest& request, bool resent_already) {
    if (resent_already) return nullptr;
    switch (what) {
        case Mishap::connect_refused:
        case Mishap::send_failed:
        case Mishap::send_stalled:
            return "unsent";  // the far end cannot have run it
        case Mishap::closed_before_answer:
            return request.resend_after_sent ? "idempotent" : nullptr;
        default:
            return nullptr;
    }
}

Framing framing_of(const http::ResponseHead& head, const CallRequest& request) {
    if (request.head_only || head.status == 204 || head.status == 304) return Framing::none;
    if (head.content_length && !head.transfer_encoding) return Framing::length;
    return request.allow_stream ? Framing::stream : Framing::to_end;
}

bool reusable(Framing framing, bool close, bool read_past_end) {
    return (framing == Framing::none || framing == Framing::length) && !close && !read_past_end;
}

Answer answer_of(const http::ResponseHead& head) {
    Answer a;
    a.status = head.status;
    a.content_length = head.content_length;
    a.close = !head.keep_alive;
    a.headers.reserve(head.headers.size());
    for (const http::Header& h : head.headers) a.headers.emplace_back(h.name, h.value);
    return a;
}

}  // namespace fenec::server
