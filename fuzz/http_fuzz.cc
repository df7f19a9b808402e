// fuzz/http_fuzz.cc: fuzz_http, arbitrary bytes read as an HTTP/1.1 head by server/runtime/http.cc.
// The first byte chooses the parser: even, parse_request_head; odd, parse_response_head; the rest
// is the input. Seeds: fuzz/corpus/http/, requests (valid, pipelined, edge cases) and answers, each
// led by its choosing byte ('0' for a request, '1' for an answer, so the seeds stay readable).
//
// Beyond "never crash, never read out of bounds, never leak", each answer must keep the contract
// of server/runtime/http.h; a broken one traps, so libFuzzer keeps the input:
//   - need_more only under head_bytes_max bytes; done and every refusal but the size's 431 come
//     with consumed <= size, and `raw` is the consumed bytes less the empty lines before them;
//   - a refusal is 400, 431, 501 (requests) or 505 with a message;
//   - every view lies inside `raw`, also after the head is moved to another object;
//   - fields hold what the grammar allows: token names, values without CR, LF, or edge blanks;
//     Content-Length fits 63 bits; at most header_fields_max fields;
//   - parsing `raw` again gives the same head (the parser keeps no state);
//   - split feeding: every prefix shorter than the head answers need_more, and a prefix holding
//     the whole head answers exactly what the whole input does;
//   - a request head written again by write_request (its method, target and fields but the
//     framing ones) parses back whole: the same method and target, Host, the fields in order,
//     then Content-Length and Connection as written.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "server/runtime/http.h"

namespace {

using namespace fenec::http;

void check(bool ok) {
    if (!ok) __builtin_trap();
}

bool inside(std::string_view v, const std::string& raw) {
    if (v.empty()) return true;
    return v.data() >= raw.data() && v.data() + v.size() <= raw.data() + raw.size();
}

bool is_token(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s) {
        bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) {
            return false;
        }
    }
    return true;
}

void check_fields(const std::vector<Header>& headers, const std::string& raw) {
    check(headers.size() <= header_fields_max);
    for (const Header& h : headers) {
        check(inside(h.name, raw) && inside(h.value, raw));
        check(is_token(h.name));
        for (char c : h.value) check(c != '\r' && c != '\n' && c != '\0');
        if (!h.value.empty()) {
            check(h.value.front() != ' ' && h.value.front() != '\t');
            check(h.value.back() != ' ' && h.value.back() != '\t');
        }
    }
}

// The consumed bytes are empty lines and then `raw`.
void check_raw(std::string_view in, size_t consumed, const std::string& raw) {
    check(consumed <= in.size() && raw.size() <= consumed && raw.size() <= head_bytes_max);
    check(in.substr(consumed - raw.size(), raw.size()) == raw);
    for (char c : in.substr(0, consumed - raw.size())) check(c == '\r' || c == '\n');
}

bool same_fields(const std::vector<Header>& a, const std::vector<Header>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].name != b[i].name || a[i].value != b[i].value) return false;
    }
    return true;
}

bool same(const RequestHead& a, const RequestHead& b) {
    return a.raw == b.raw && a.method == b.method && a.method_text == b.method_text &&
           a.target == b.target && a.path == b.path && a.query == b.query &&
           a.version_minor == b.version_minor && same_fields(a.headers, b.headers) &&
           a.content_length == b.content_length && a.transfer_encoding == b.transfer_encoding &&
           a.keep_alive == b.keep_alive && a.expect_continue == b.expect_continue;
}

bool same(const ResponseHead& a, const ResponseHead& b) {
    return a.raw == b.raw && a.status == b.status && a.reason == b.reason &&
           a.version_minor == b.version_minor && same_fields(a.headers, b.headers) &&
           a.content_length == b.content_length && a.transfer_encoding == b.transfer_encoding &&
           a.keep_alive == b.keep_alive;
}

void check_views(const RequestHead& h) {
    check(inside(h.method_text, h.raw) && inside(h.target, h.raw));
    check_fields(h.headers, h.raw);
}

void check_views(const ResponseHead& h) {
    check(inside(h.reason, h.raw));
    check_fields(h.headers, h.raw);
}

void check_request(const RequestHead& h) {
    check_views(h);
    check(h.method != Method::other && h.method_text == method_name(h.method));
    check(h.version_minor == 0 || h.version_minor == 1);
    check(!h.target.empty() && h.target.size() <= target_bytes_max);
    check(h.target == "*" ? h.method == Method::options : h.target.front() == '/');
    check(h.path.find('\0') == std::string::npos);
    check(!h.content_length || *h.content_length < (uint64_t{1} << 63));
    check(!h.expect_continue || h.version_minor == 1);
}

void check_response(const ResponseHead& h) {
    check_views(h);
    check(h.status >= 100 && h.status <= 599);
    check(h.version_minor == 0 || h.version_minor == 1);
    check(!h.content_length || *h.content_length < (uint64_t{1} << 63));
}

bool framing_field(std::string_view name) {
    for (std::string_view f :
         {"Host", "Content-Length", "Connection", "Expect", "Transfer-Encoding"}) {
        if (iequals(name, f)) return true;
    }
    return false;
}

// The head as the router would send it on: write_request, then the codec again.
void check_written(const RequestHead& h) {
    OutRequest out{.method = h.method_text, .target = h.target, .host = "node:1"};
    for (const Header& f : h.headers) {
        if (!framing_field(f.name)) out.headers.push_back(f);
    }
    out.body = "{}";
    // Past the codec's bounds the written head is refused like any other (431): not this check.
    if (out.headers.size() + 3 > header_fields_max) return;
    std::string bytes;
    write_request(out, bytes);
    if (bytes.size() - out.body.size() > head_bytes_max) return;
    RequestHead again;
    size_t consumed = 0;
    ParseError error;
    check(parse_request_head(bytes, again, consumed, error) == ParseStatus::done);
    check(again.method_text == h.method_text && again.target == h.target);
    check(again.headers.size() == out.headers.size() + 3);
    for (size_t i = 0; i < out.headers.size(); ++i) {  // after Host, in order
        check(again.headers[i + 1].name == out.headers[i].name);
        check(again.headers[i + 1].value == out.headers[i].value);
    }
    check(again.header("Host") == std::optional<std::string_view>("node:1"));
    check(again.content_length == 2u && again.keep_alive);
    check(std::string_view(bytes).substr(consumed) == "{}");
}

ParseStatus parse(std::string_view in, RequestHead& h, size_t& consumed, ParseError& e) {
    return parse_request_head(in, h, consumed, e);
}
ParseStatus parse(std::string_view in, ResponseHead& h, size_t& consumed, ParseError& e) {
    return parse_response_head(in, h, consumed, e);
}

template <typename Head>
void run(std::string_view in, bool request) {
    Head head;
    size_t consumed = 0;
    ParseError error;
    ParseStatus s = parse(in, head, consumed, error);
    // A head whose `raw` and fields are filled: done, or a request's 501.
    bool filled = s == ParseStatus::done || (request && error.status == 501);
    if (s == ParseStatus::need_more) {
        check(in.size() < head_bytes_max && consumed == 0);
    } else if (s == ParseStatus::error) {
        check(error.status == 400 || error.status == 431 || error.status == 505 ||
              (request && error.status == 501));
        check(!error.message.empty());
        if (consumed == 0) check(error.status == 431 && in.size() >= head_bytes_max);
    }
    if (consumed > 0) check_raw(in, consumed, head.raw);
    if (s == ParseStatus::done) {
        if constexpr (std::is_same_v<Head, RequestHead>) {
            check_request(head);
            check_written(head);
        } else {
            check_response(head);
        }
    }
    if (filled) {
        check_views(head);
        // The same bytes parse the same way again, with nothing before them.
        Head again;
        size_t consumed_again = 0;
        ParseError error_again;
        check(parse(head.raw, again, consumed_again, error_again) == s);
        check(consumed_again == head.raw.size() && error_again.status == error.status);
        check(same(again, head));
        // A move keeps every view inside the new owner's `raw`.
        Head moved(std::move(again));
        check_views(moved);
        check(same(moved, head));
        Head assigned;
        assigned = std::move(moved);
        check_views(assigned);
        check(same(assigned, head));
    }

    // Split feeding: prefixes that end before the head answer need_more; the others agree.
    auto feed = [&](size_t cut) {
        Head part;
        size_t part_consumed = 0;
        ParseError part_error;
        ParseStatus ps = parse(in.substr(0, cut), part, part_consumed, part_error);
        if (consumed == 0 || cut < consumed) {
            // The size's 431 comes once a prefix reaches head_bytes_max bytes.
            check(ps == ParseStatus::need_more ||
                  (cut >= head_bytes_max && part_error.status == 431));
            return;
        }
        check(ps == s && part_consumed == consumed && part_error.status == error.status);
        check(part_error.message == error.message);
        if (filled) check(same(part, head));
    };
    size_t end = consumed > 0 ? consumed : in.size();
    size_t step = end <= 512 ? 1 : end / 64;
    for (size_t cut = 0; cut < end; cut += step) feed(cut);
    feed(end);
    if (in.size() != end) feed(in.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
    if ((data[0] & 1) == 0) {
        run<RequestHead>(in, true);
    } else {
        run<ResponseHead>(in, false);
    }
    return 0;
}
