// server/runtime/http.h: Fenec's one HTTP/1.1 codec (STYLE.md: one parser per format), shared
// unchanged by fenec-node and fenec-shard. It frames bytes and nothing else: no sockets, no
// routing, no I/O.
//
// Requests (node-http.md §2.1): a head is parsed from a buffer that may hold less than a head (need
// more), exactly one, or one followed by its body and pipelined requests (the caller keeps the
// bytes after `consumed`). Bodies are framed by Content-Length only; Transfer-Encoding is refused
// 411 by the node, so the codec reports it rather than decoding chunks. Answers are framed by
// Content-Length, or written without one for streams (then the connection closes after them).
// Answers from an upstream (the router, a follower) are parsed by the same code, and the
// requests sent to it written here (write_request), the one request writer.
//
// Invariants: a parse never reads past `input`; a head is accepted only whole and well formed
// (RFC 9112 §2-§6: token methods and field names, no whitespace before a colon, no obs-fold, no
// bare CR, at most one Content-Length value, a decimal that fits 63 bits); every refusal carries
// the status the spec gives it and a message naming the problem. Not thread-safe per object.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fenec::http {

// Limits of node-http.md §2.1 / §12.
inline constexpr size_t head_bytes_max = 64 * 1024;   // request line and headers: 431 past it
inline constexpr size_t header_fields_max = 100;      // fields in one head: 431 past it
inline constexpr size_t target_bytes_max = 8 * 1024;  // inside the head bound; 414 is not ours: 431

enum class Method : uint8_t { get, head, post, put, patch, del, options, other };

std::string_view method_name(Method m);  // "GET", ... ("" for other)

struct Header {
    std::string_view name;   // as sent; compare with iequals
    std::string_view value;  // leading and trailing spaces and tabs removed
};

// One parsed request head. Every string_view points into `raw`, which the head owns, so a head
// may be moved to another thread with its request.
struct RequestHead {
    std::string raw;  // the head's bytes, request line to the blank line
    Method method = Method::other;
    std::string_view method_text;  // as sent (the 501 names it)
    std::string_view target;       // the request target as sent (origin form)
    std::string path;              // target before '?', percent-decoded once
    // The query string in order, keys and values percent-decoded, '+' kept as '+'. A key without
    // '=' has an empty value; repeats stay repeated.
    std::vector<std::pair<std::string, std::string>> query;
    int version_minor = 1;  // HTTP/1.0 or HTTP/1.1
    std::vector<Header> headers;

    std::optional<uint64_t> content_length;
    bool transfer_encoding = false;  // any Transfer-Encoding header (the node answers 411)
    bool keep_alive = true;          // 1.1 unless `Connection: close`; 1.0 only with keep-alive
    bool expect_continue = false;    // `Expect: 100-continue`

    // The first field named `name` (ASCII case-insensitive), or nullopt.
    std::optional<std::string_view> header(std::string_view name) const;
    // The first query value for `key`, or nullopt.
    const std::string* query_value(std::string_view key) const;

    RequestHead() = default;
    RequestHead(RequestHead&&) noexcept;
    RequestHead& operator=(RequestHead&&) noexcept;
    RequestHead(const RequestHead&) = delete;
    RequestHead& operator=(const RequestHead&) = delete;
};

// A refusal of the bytes as HTTP: 400 malformed, 431 head too large or too many fields, 501 an
// unknown method (the head is otherwise whole), 505 a version other than 1.0 and 1.1.
struct ParseError {
    int status = 400;
    std::string message;
};

enum class ParseStatus : uint8_t { need_more, done, error };

// Parses a request head at the start of `input`. On done, `consumed` is the head's length
// (blank line included) and `out` is filled; on error `error` says why. need_more while `input`
// holds no blank line and is under head_bytes_max; past it, 431. Empty lines before a request
// line are skipped (RFC 9112 §2.2) and counted in `consumed`. Every refusal but the size's 431
// waits for the blank line too, so any prefix of an input answers need_more or what the whole
// does. On a refusal after the blank line `consumed` is still the head's length, and on a 501
// `out` is filled as on done (the 501 names `method_text`); `out` is untouched on need_more.
// Lines end in CRLF or a bare LF (RFC 9112 §2.2 allows it); a CR without LF is a 400.
ParseStatus parse_request_head(std::string_view input, RequestHead& out, size_t& consumed,
                               ParseError& error);

// One parsed answer head (the router's upstream, the follower's feed).
struct ResponseHead {
    std::string raw;
    int status = 0;
    std::string_view reason;
    int version_minor = 1;
    std::vector<Header> headers;
    std::optional<uint64_t> content_length;
    bool transfer_encoding = false;
    bool keep_alive = true;

    std::optional<std::string_view> header(std::string_view name) const;

    ResponseHead() = default;
    ResponseHead(ResponseHead&&) noexcept;
    ResponseHead& operator=(ResponseHead&&) noexcept;
    ResponseHead(const ResponseHead&) = delete;
    ResponseHead& operator=(const ResponseHead&) = delete;
};

ParseStatus parse_response_head(std::string_view input, ResponseHead& out, size_t& consumed,
                                ParseError& error);

// The reason phrase of a status ("OK", "Not Found"; "Unknown" for one we never send).
std::string_view reason_phrase(int status);

// An answer to be written. `body` is sent after the head; with `stream` the head has no
// Content-Length and the connection closes after the stream ends.
struct Response {
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;  // besides the framing ones
    std::string body;
    std::string content_type = "application/json; charset=utf-8";  // "" for none
    bool stream = false;
    bool close = false;  // `Connection: close`, and the connection ends after it

    Response& header(std::string name, std::string value) {
        headers.emplace_back(std::move(name), std::move(value));
        return *this;
    }
};

// Appends the status line and head of `r` to `out`: `HTTP/1.1 <status> <reason>`, `Server`,
// the caller's headers, `Content-Type` (when set), `Content-Length` (unless streaming; also
// for HEAD, where `head_only` leaves the body out but keeps its length), `Connection: close`
// when closing. Then the body unless `head_only`. A 1xx, 204 or 304 has no content (RFC 9110
// §8.6): no Content-Type, no Content-Length, no body. CR, LF or NUL in a caller's header is
// written as a space (and asserts in debug builds), so no answer can be split.
void write_response(const Response& r, bool head_only, std::string_view server, std::string& out);

// A request to be written: the client side of write_response, for every request Fenec sends
// (the router's to its nodes, a follower's to its primary). The views must stay alive until
// write_request returns.
struct OutRequest {
    std::string_view method{};  // as sent: "GET", or a client's method text passed on
    std::string_view target{};  // origin form, sent byte for byte (a forwarder's original target)
    std::string_view host{};    // the Host field
    std::vector<Header> headers{};  // in order, besides the framing ones write_request adds
    std::string_view body{};
    // The body's length when the caller sends the body itself after the head (an image relayed
    // from another connection); `body` is then empty.
    std::optional<uint64_t> body_bytes{};
    bool expect_continue = false;  // `Expect: 100-continue`: the answer's 100 before the body
    bool close = false;            // `Connection: close` rather than keep-alive
};

// Appends `METHOD target HTTP/1.1`, `Host`, the caller's headers in order, `Content-Length`
// (whenever there is a body, and for a method that carries one even when empty: RFC 9110 §8.6
// asks for none on a GET, HEAD, DELETE or OPTIONS without one), `Expect: 100-continue` when
// asked, `Connection: keep-alive` or `close`, the blank line, then the body. As in
// write_response, CR, LF or NUL in a caller's text is written as a space (and asserts in debug
// builds), so no request can be split by a value that came from elsewhere.
void write_request(const OutRequest& r, std::string& out);

// ASCII case-insensitive equality, for field names and tokens.
bool iequals(std::string_view a, std::string_view b);

// Percent-decodes `in` once; nullopt for a '%' not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view in);

}  // namespace fenec::http
