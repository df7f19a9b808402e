// server/runtime/http.cc: the HTTP/1.1 codec of server/runtime/http.h: request and answer heads
// parsed, answers and requests written. Nothing here does I/O or keeps state between calls.
//
// A parse runs in two steps over the caller's bytes:
//   1. framing: find the blank line that ends the head, with memchr over '\n' only, inside the
//      first head_bytes_max bytes. Until it is there the answer is need_more (431 once the buffer
//      holds head_bytes_max bytes without it), so a head trickled in byte by byte costs a memchr
//      per read, not a parse; and every refusal waits for the whole head, so a prefix of any
//      input answers need_more or exactly what the whole input answers.
//   2. one pass over the head, copied once into `raw`: each byte is classed by a 256-entry table
//      (token, field value, target), fields are recorded as views into `raw` (no allocation per
//      field beyond the vector), and the framing fields (Content-Length, Transfer-Encoding,
//      Connection, Expect, Host) are read as they pass. The first problem found is the refusal,
//      except an unknown method (501), reported only once the rest of the head is sound.
//
// Line ends: CRLF, or a bare LF (RFC 9112 §2.2 lets a recipient take LF alone; curl and every
// client we know send CRLF, and taking LF costs nothing). A CR not followed by LF is a 400
// anywhere in the head. Leading empty lines before the start line are skipped (§2.2).
//
// The request target must be origin form ('/'...) or, for OPTIONS, '*' (absolute and authority
// forms are a proxy's: 400). Its bytes are visible ASCII without '#'; over target_bytes_max, 431.
#include "server/runtime/http.h"

#include <array>
#include <cassert>
#include <charconv>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace fenec::http {
namespace {

// ---- byte classes (RFC 9110 §5.6.2 token, §5.5 field-vchar; RFC 3986 visible ASCII) ----

constexpr uint8_t kToken = 1;   // tchar
constexpr uint8_t kField = 2;   // a byte of a field value or reason phrase: HTAB SP VCHAR obs-text
constexpr uint8_t kTarget = 4;  // a byte of a request target: VCHAR but '#'

constexpr std::array<uint8_t, 256> make_classes() {
    std::array<uint8_t, 256> t{};
    for (int c = 0x21; c <= 0x7e; ++c) t[c] |= kField | kTarget;
    for (int c = 0x80; c <= 0xff; ++c) t[c] |= kField;
    t[' '] |= kField;
    t['\t'] |= kField;
    t['#'] &= static_cast<uint8_t>(~kTarget);
    for (int c = '0'; c <= '9'; ++c) t[c] |= kToken;
    for (int c = 'a'; c <= 'z'; ++c) t[c] |= kToken;
    for (int c = 'A'; c <= 'Z'; ++c) t[c] |= kToken;
    for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<uint8_t>(c)] |= kToken;
    return t;
}
constexpr std::array<uint8_t, 256> kClass = make_classes();

inline bool is(char c, uint8_t cls) { return (kClass[static_cast<uint8_t>(c)] & cls) != 0; }

// Past the field-value bytes at `p`; never past `end`, and the byte at `end - 1` is not one (the
// head's last '\n'). Values are most of a head's bytes (tokens, cookies), so 16 at a time.
inline const char* skip_field_bytes(const char* p, const char* end) {
#if defined(__SSE2__)
    const __m128i ctl_max = _mm_set1_epi8(0x1f);
    const __m128i tab = _mm_set1_epi8('\t');
    const __m128i del = _mm_set1_epi8(0x7f);
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        __m128i ctl = _mm_cmpeq_epi8(_mm_min_epu8(v, ctl_max), v);  // v <= 0x1f, unsigned
        __m128i bad =
            _mm_or_si128(_mm_andnot_si128(_mm_cmpeq_epi8(v, tab), ctl), _mm_cmpeq_epi8(v, del));
        int mask = _mm_movemask_epi8(bad);
        if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
        p += 16;
    }
#endif
    while (is(*p, kField)) ++p;
    return p;
}

inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

inline int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

constexpr uint64_t content_length_max = (uint64_t{1} << 63) - 1;  // "fits 63 bits" (http.h)

ParseStatus fail(ParseError& error, int status, std::string message) {
    error.status = status;
    error.message = std::move(message);
    return ParseStatus::error;
}

// Shown in messages: at most 64 bytes of what was sent, so a refusal never echoes a whole head.
std::string excerpt(std::string_view s) {
    constexpr size_t excerpt_bytes_max = 64;
    if (s.size() <= excerpt_bytes_max) return std::string(s);
    return std::string(s.substr(0, excerpt_bytes_max)) + "...";
}

// ---- step 1: framing ----

enum class Frame : uint8_t { need_more, whole, too_large };

// Finds the head at the start of `in`: `start` past the empty lines before it, `end` just past
// its blank line. Only the first head_bytes_max bytes are looked at.
Frame find_head(std::string_view in, size_t& start, size_t& end) {
    const size_t limit = std::min(in.size(), head_bytes_max);
    const char* d = in.data();
    size_t s = 0;
    for (;;) {
        if (s < limit && d[s] == '\n') {
            ++s;
        } else if (s + 1 < limit && d[s] == '\r' && d[s + 1] == '\n') {
            s += 2;
        } else {
            break;
        }
    }
    size_t pos = s;
    while (pos < limit) {
        const void* hit = std::memchr(d + pos, '\n', limit - pos);
        if (hit == nullptr) break;
        size_t nl = static_cast<const char*>(hit) - d;
        if (nl + 1 < limit && d[nl + 1] == '\n') {
            start = s;
            end = nl + 2;
            return Frame::whole;
        }
        if (nl + 2 < limit && d[nl + 1] == '\r' && d[nl + 2] == '\n') {
            start = s;
            end = nl + 3;
            return Frame::whole;
        }
        pos = nl + 1;
    }
    return in.size() >= head_bytes_max ? Frame::too_large : Frame::need_more;
}

// ---- step 2: the head's lines. `p` walks `raw`, which ends with the blank line's '\n'. ----

// Past the line end at `p` (CRLF or LF); nullptr if `p` is not at one.
inline const char* line_end(const char* p) {
    if (*p == '\n') return p + 1;
    if (*p == '\r' && p[1] == '\n') return p + 2;
    return nullptr;
}

// What the framing fields said, shared by requests and answers.
struct Framing {
    std::optional<uint64_t> content_length;
    bool transfer_encoding = false;
    bool close = false;       // a `close` connection option
    bool keep_alive = false;  // a `keep-alive` connection option
    bool expect_continue = false;
    bool host = false;
};

inline std::string_view trim_ows(std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return v;
}

// Calls fn(element) for each element of a comma-separated list (RFC 9110 §5.6.1), OWS trimmed;
// empty elements included.
template <typename Fn>
void each_element(std::string_view v, Fn&& fn) {
    for (;;) {
        size_t comma = v.find(',');
        fn(trim_ows(v.substr(0, comma)));
        if (comma == std::string_view::npos) return;
        v.remove_prefix(comma + 1);
    }
}

// Content-Length: 1*DIGIT, or a list of equal such values (RFC 9110 §8.6). nullptr when good.
const char* read_content_length(std::string_view v, Framing& f) {
    const char* problem = nullptr;
    each_element(v, [&](std::string_view e) {
        if (problem != nullptr) return;
        uint64_t n = 0;
        if (e.empty()) {
            problem = "Content-Length is not a decimal";
            return;
        }
        for (char c : e) {
            if (c < '0' || c > '9') {
                problem = "Content-Length is not a decimal";
                return;
            }
            uint64_t digit = static_cast<uint64_t>(c - '0');
            if (n > (content_length_max - digit) / 10) {
                problem = "Content-Length over 2^63-1";
                return;
            }
            n = n * 10 + digit;
        }
        if (f.content_length && *f.content_length != n) {
            problem = "Content-Length values differ";
            return;
        }
        f.content_length = n;
    });
    return problem;
}

// Reads one field's meaning for framing. nullptr when good, else the 400's message.
const char* read_field(std::string_view name, std::string_view value, Framing& f) {
    switch (name.size()) {
        case 4:
            if (iequals(name, "host")) {
                if (f.host) return "more than one Host field";  // RFC 9112 §3.2
                f.host = true;
            }
            return nullptr;
        case 6:
            if (iequals(name, "expect") && iequals(value, "100-continue")) f.expect_continue = true;
            return nullptr;
        case 10:
            if (iequals(name, "connection")) {
                each_element(value, [&](std::string_view e) {
                    if (iequals(e, "close")) f.close = true;
                    if (iequals(e, "keep-alive")) f.keep_alive = true;
                });
            }
            return nullptr;
        case 14:
            if (iequals(name, "content-length")) return read_content_length(value, f);
            return nullptr;
        case 17:
            if (iequals(name, "transfer-encoding")) f.transfer_encoding = true;
            return nullptr;
        default:
            return nullptr;
    }
}

// Parses the field lines at `p` through the blank line ending the head.
ParseStatus parse_fields(const char* p, const char* end, std::vector<Header>& headers, Framing& f,
                         ParseError& error) {
    for (;;) {
        // The blank line: the head's end (find_head put the first one last).
        if (line_end(p) != nullptr) return ParseStatus::done;
        if (*p == ' ' || *p == '\t') {
            return fail(error, 400, "obs-fold or whitespace before a field");
        }
        const char* name_begin = p;
        while (is(*p, kToken)) ++p;
        if (*p != ':') {
            if (*p == ' ' || *p == '\t') return fail(error, 400, "whitespace before a colon");
            if (*p == '\r') return fail(error, 400, "bare CR in the head");
            if (p == name_begin) return fail(error, 400, "field line without a name");
            return fail(error, 400, "field name is not a token or has no colon");
        }
        if (p == name_begin) return fail(error, 400, "field line without a name");
        std::string_view name(name_begin, static_cast<size_t>(p - name_begin));
        ++p;
        while (*p == ' ' || *p == '\t') ++p;
        const char* value_begin = p;
        p = skip_field_bytes(p, end);
        const char* value_end = p;
        const char* next = line_end(p);
        if (next == nullptr) {
            if (*p == '\r') return fail(error, 400, "bare CR in the head");
            return fail(error, 400, "control character in the value of " + excerpt(name));
        }
        while (value_end > value_begin && (value_end[-1] == ' ' || value_end[-1] == '\t')) {
            --value_end;
        }
        if (headers.size() == header_fields_max) {
            return fail(error, 431,
                        "more than " + std::to_string(header_fields_max) + " header fields");
        }
        std::string_view value(value_begin, static_cast<size_t>(value_end - value_begin));
        headers.push_back(Header{name, value});
        if (const char* problem = read_field(name, value, f)) return fail(error, 400, problem);
        p = next;
    }
}

// "HTTP/d.d" at `p` (8 bytes available): 1 for a version we speak (minor in `minor`), 0 for
// another (505), -1 when not a version at all (400).
int read_version(const char* p, int& minor) {
    if (std::memcmp(p, "HTTP/", 5) != 0) return -1;
    char major = p[5], dot = p[6], mi = p[7];
    if (major < '0' || major > '9' || dot != '.' || mi < '0' || mi > '9') return -1;
    if (major != '1' || (mi != '0' && mi != '1')) return 0;
    minor = mi - '0';
    return 1;
}

Method method_of(std::string_view m) {
    switch (m.size()) {
        case 3:
            if (m == "GET") return Method::get;
            if (m == "PUT") return Method::put;
            break;
        case 4:
            if (m == "HEAD") return Method::head;
            if (m == "POST") return Method::post;
            break;
        case 5:
            if (m == "PATCH") return Method::patch;
            break;
        case 6:
            if (m == "DELETE") return Method::del;
            break;
        case 7:
            if (m == "OPTIONS") return Method::options;
            break;
        default:
            break;
    }
    return Method::other;
}

// Fills `path` and `query` from the origin-form target.
ParseStatus split_target(std::string_view target, RequestHead& out, ParseError& error) {
    size_t q = target.find('?');
    std::string_view path = target.substr(0, q);
    if (path.find('%') == std::string_view::npos) {
        out.path.assign(path);
    } else {
        std::optional<std::string> decoded = percent_decode(path);
        if (!decoded) return fail(error, 400, "bad percent escape in the path");
        if (decoded->find('\0') != std::string::npos) {
            return fail(error, 400, "percent-encoded NUL in the path");
        }
        out.path = std::move(*decoded);
    }
    if (q == std::string_view::npos) return ParseStatus::done;
    std::string_view rest = target.substr(q + 1);
    while (!rest.empty()) {
        size_t amp = rest.find('&');
        std::string_view piece = rest.substr(0, amp);
        rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
        if (piece.empty()) continue;  // "a=1&&b=2": no empty key from the doubled '&'
        size_t eq = piece.find('=');
        std::optional<std::string> key = percent_decode(piece.substr(0, eq));
        std::optional<std::string> value = eq == std::string_view::npos
                                               ? std::optional<std::string>(std::string())
                                               : percent_decode(piece.substr(eq + 1));
        if (!key || !value) return fail(error, 400, "bad percent escape in the query");
        out.query.emplace_back(std::move(*key), std::move(*value));
    }
    return ParseStatus::done;
}

ParseStatus parse_request(RequestHead& out, ParseError& error) {
    const char* p = out.raw.data();
    const char* end = p + out.raw.size();

    const char* m = p;
    while (is(*p, kToken)) ++p;
    if (p == m || *p != ' ') return fail(error, 400, "malformed request line (method)");
    out.method_text = std::string_view(m, static_cast<size_t>(p - m));
    out.method = method_of(out.method_text);
    ++p;

    const char* t = p;
    while (is(*p, kTarget)) ++p;
    size_t target_bytes = static_cast<size_t>(p - t);
    if (target_bytes > target_bytes_max) {
        return fail(error, 431,
                    "request target over " + std::to_string(target_bytes_max) + " bytes");
    }
    if (t == p || *p != ' ') return fail(error, 400, "malformed request line (target)");
    out.target = std::string_view(t, target_bytes);
    ++p;

    // The version's 8 bytes, then at least the two line ends.
    if (end - p < 10) return fail(error, 400, "malformed request line (version)");
    int v = read_version(p, out.version_minor);
    if (v < 0) return fail(error, 400, "malformed request line (version)");
    if (v == 0) return fail(error, 505, "HTTP version " + excerpt({p, 8}) + " not supported");
    p = line_end(p + 8);
    if (p == nullptr) return fail(error, 400, "malformed request line (after the version)");

    Framing f;
    if (parse_fields(p, end, out.headers, f, error) != ParseStatus::done) return ParseStatus::error;

    if (out.target == "*") {
        if (out.method != Method::options && out.method != Method::other) {
            return fail(error, 400, "asterisk-form target on a method other than OPTIONS");
        }
        out.path = "*";
    } else if (out.target.front() != '/') {
        return fail(error, 400, "request target not in origin form");
    } else if (split_target(out.target, out, error) != ParseStatus::done) {
        return ParseStatus::error;
    }

    out.content_length = f.content_length;
    out.transfer_encoding = f.transfer_encoding;
    out.keep_alive = !f.close && (out.version_minor == 1 || f.keep_alive);
    // RFC 9110 §10.1.1: a 100-continue from an HTTP/1.0 client is ignored.
    out.expect_continue = f.expect_continue && out.version_minor == 1;

    if (out.method == Method::other) {
        return fail(error, 501, "method " + excerpt(out.method_text) + " not implemented");
    }
    return ParseStatus::done;
}

void reset(RequestHead& h) {
    h.method = Method::other;
    h.method_text = {};
    h.target = {};
    h.path.clear();
    h.query.clear();
    h.version_minor = 1;
    h.headers.clear();
    h.content_length.reset();
    h.transfer_encoding = false;
    h.keep_alive = true;
    h.expect_continue = false;
}

ParseStatus parse_response(ResponseHead& out, ParseError& error) {
    const char* p = out.raw.data();
    const char* end = p + out.raw.size();
    if (end - p < 12) return fail(error, 400, "malformed status line");
    int v = read_version(p, out.version_minor);
    if (v < 0) return fail(error, 400, "malformed status line (version)");
    if (v == 0) return fail(error, 505, "HTTP version " + excerpt({p, 8}) + " not supported");
    p += 8;
    if (*p != ' ') return fail(error, 400, "malformed status line");
    int status = 0;
    for (int i = 1; i <= 3; ++i) {
        if (p[i] < '0' || p[i] > '9') return fail(error, 400, "malformed status code");
        status = status * 10 + (p[i] - '0');
    }
    if (status < 100 || status > 599) return fail(error, 400, "status code out of range");
    out.status = status;
    p += 4;
    // RFC 9112 §4 wants the SP before an empty reason; some servers leave it out: taken.
    if (*p == ' ') {
        ++p;
        const char* r = p;
        while (is(*p, kField)) ++p;
        out.reason = std::string_view(r, static_cast<size_t>(p - r));
    }
    const char* next = line_end(p);
    if (next == nullptr) {
        if (*p == '\r') return fail(error, 400, "bare CR in the head");
        return fail(error, 400, "malformed status line");
    }
    Framing f;
    if (parse_fields(next, end, out.headers, f, error) != ParseStatus::done) {
        return ParseStatus::error;
    }
    out.content_length = f.content_length;
    out.transfer_encoding = f.transfer_encoding;
    out.keep_alive = !f.close && (out.version_minor == 1 || f.keep_alive);
    return ParseStatus::done;
}

void reset(ResponseHead& h) {
    h.status = 0;
    h.reason = {};
    h.version_minor = 1;
    h.headers.clear();
    h.content_length.reset();
    h.transfer_encoding = false;
    h.keep_alive = true;
}

// Parses one head of either kind: framing, then `parse` over the copy in `out.raw`.
template <typename Head, typename ParseFn>
ParseStatus parse_head(std::string_view input, Head& out, size_t& consumed, ParseError& error,
                       ParseFn parse) {
    consumed = 0;
    size_t start = 0, end = 0;
    switch (find_head(input, start, end)) {
        case Frame::need_more:
            return ParseStatus::need_more;
        case Frame::too_large:
            return fail(error, 431,
                        "head over " + std::to_string(head_bytes_max) + " bytes without its end");
        case Frame::whole:
            break;
    }
    reset(out);
    out.raw.assign(input.data() + start, end - start);
    consumed = end;
    return parse(out, error);
}

// ---- moves: every view into `raw` re-pointed at the same offset of the new buffer ----

// A view inside [from, from + size] is moved to the same offset from `to`; any other is kept.
inline std::string_view rebase(std::string_view v, const char* from, size_t size, const char* to) {
    auto at = reinterpret_cast<uintptr_t>(v.data());
    auto base = reinterpret_cast<uintptr_t>(from);
    if (v.data() == nullptr || at < base || at > base + size) return v;
    return std::string_view(to + (at - base), v.size());
}

void rebase_headers(std::vector<Header>& headers, const char* from, size_t size, const char* to) {
    if (from == to) return;
    for (Header& h : headers) {
        h.name = rebase(h.name, from, size, to);
        h.value = rebase(h.value, from, size, to);
    }
}

std::optional<std::string_view> find_header(const std::vector<Header>& headers,
                                            std::string_view name) {
    for (const Header& h : headers) {
        if (iequals(h.name, name)) return h.value;
    }
    return std::nullopt;
}

// ---- writing ----

void append_number(std::string& out, uint64_t n) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, n);
    (void)ec;
    out.append(buf, end);
}

// A caller's header name or value (or a request line's method or target), with CR, LF and NUL
// written as spaces: no answer or request can be split by a value that came from elsewhere (a
// programmer error, caught in debug builds).
void append_field_text(std::string& out, std::string_view s) {
    uint8_t least = 0xff;  // a min over the bytes, which compilers vectorize; CR is 13
    for (char c : s) least = std::min(least, static_cast<uint8_t>(c));
    size_t from = out.size();
    out.append(s);
    if (least > '\r' || s.find_first_of(std::string_view("\r\n\0", 3)) == s.npos) return;
    assert(false && "CR, LF or NUL in a header or request line");
    for (size_t i = from; i < out.size(); ++i) {
        if (out[i] == '\r' || out[i] == '\n' || out[i] == '\0') out[i] = ' ';
    }
}

void append_field(std::string& out, std::string_view name, std::string_view value) {
    append_field_text(out, name);
    out.append(": ", 2);
    append_field_text(out, value);
    out.append("\r\n", 2);
}

}  // namespace

// ---- public ----

std::string_view method_name(Method m) {
    switch (m) {
        case Method::get:
            return "GET";
        case Method::head:
            return "HEAD";
        case Method::post:
            return "POST";
        case Method::put:
            return "PUT";
        case Method::patch:
            return "PATCH";
        case Method::del:
            return "DELETE";
        case Method::options:
            return "OPTIONS";
        case Method::other:
            return "";
    }
    return "";
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (lower(a[i]) != lower(b[i])) return false;
    }
    return true;
}

std::optional<std::string> percent_decode(std::string_view in) {
    std::string out;
    out.reserve(in.size());
    size_t i = 0;
    while (i < in.size()) {
        size_t pct = in.find('%', i);
        if (pct == std::string_view::npos) {
            out.append(in.substr(i));
            break;
        }
        out.append(in.substr(i, pct - i));
        if (pct + 2 >= in.size()) return std::nullopt;
        int hi = hex_value(in[pct + 1]);
        int lo = hex_value(in[pct + 2]);
        if (hi < 0 || lo < 0) return std::nullopt;
        out.push_back(static_cast<char>(hi * 16 + lo));
        i = pct + 3;
    }
    return out;
}

RequestHead::RequestHead(RequestHead&& o) noexcept { *this = std::move(o); }

RequestHead& RequestHead::operator=(RequestHead&& o) noexcept {
    if (this == &o) return *this;
    const char* from = o.raw.data();
    size_t size = o.raw.size();
    raw = std::move(o.raw);
    const char* to = raw.data();
    method = o.method;
    method_text = rebase(o.method_text, from, size, to);
    target = rebase(o.target, from, size, to);
    path = std::move(o.path);
    query = std::move(o.query);
    version_minor = o.version_minor;
    headers = std::move(o.headers);
    rebase_headers(headers, from, size, to);
    content_length = o.content_length;
    transfer_encoding = o.transfer_encoding;
    keep_alive = o.keep_alive;
    expect_continue = o.expect_continue;
    o.raw.clear();
    reset(o);
    return *this;
}

std::optional<std::string_view> RequestHead::header(std::string_view name) const {
    return find_header(headers, name);
}

const std::string* RequestHead::query_value(std::string_view key) const {
    for (const auto& [k, v] : query) {
        if (k == key) return &v;
    }
    return nullptr;
}

ResponseHead::ResponseHead(ResponseHead&& o) noexcept { *this = std::move(o); }

ResponseHead& ResponseHead::operator=(ResponseHead&& o) noexcept {
    if (this == &o) return *this;
    const char* from = o.raw.data();
    size_t size = o.raw.size();
    raw = std::move(o.raw);
    const char* to = raw.data();
    status = o.status;
    reason = rebase(o.reason, from, size, to);
    version_minor = o.version_minor;
    headers = std::move(o.headers);
    rebase_headers(headers, from, size, to);
    content_length = o.content_length;
    transfer_encoding = o.transfer_encoding;
    keep_alive = o.keep_alive;
    o.raw.clear();
    reset(o);
    return *this;
}

std::optional<std::string_view> ResponseHead::header(std::string_view name) const {
    return find_header(headers, name);
}

ParseStatus parse_request_head(std::string_view input, RequestHead& out, size_t& consumed,
                               ParseError& error) {
    return parse_head(input, out, consumed, error, parse_request);
}

ParseStatus parse_response_head(std::string_view input, ResponseHead& out, size_t& consumed,
                                ParseError& error) {
    return parse_head(input, out, consumed, error, parse_response);
}

std::string_view reason_phrase(int status) {
    switch (status) {
        case 100:
            return "Continue";
        case 200:
            return "OK";
        case 201:
            return "Created";
        case 204:
            return "No Content";
        case 206:
            return "Partial Content";
        case 304:
            return "Not Modified";
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 409:
            return "Conflict";
        case 411:
            return "Length Required";
        case 412:
            return "Precondition Failed";
        case 413:
            return "Content Too Large";
        case 415:
            return "Unsupported Media Type";
        case 422:
            return "Unprocessable Content";
        case 429:
            return "Too Many Requests";
        case 431:
            return "Request Header Fields Too Large";
        case 500:
            return "Internal Server Error";
        case 501:
            return "Not Implemented";
        case 502:
            return "Bad Gateway";
        case 503:
            return "Service Unavailable";
        case 504:
            return "Gateway Timeout";
        case 505:
            return "HTTP Version Not Supported";
        case 507:
            return "Insufficient Storage";
        default:
            return "Unknown";
    }
}

void write_response(const Response& r, bool head_only, std::string_view server, std::string& out) {
    // RFC 9110 §6.4.1, §8.6: 1xx, 204 and 304 carry no content, so no length and no type.
    const bool no_content = r.status < 200 || r.status == 204 || r.status == 304;
    std::string_view reason = reason_phrase(r.status);
    out.reserve(out.size() + 128 + server.size() + r.headers.size() * 48 +
                (head_only || no_content ? 0 : r.body.size()));
    out.append("HTTP/1.1 ", 9);
    append_number(out, static_cast<uint64_t>(r.status < 0 ? 0 : r.status));
    out.push_back(' ');
    out.append(reason);
    out.append("\r\n", 2);
    if (!server.empty()) append_field(out, "Server", server);
    for (const auto& [name, value] : r.headers) append_field(out, name, value);
    if (!no_content) {
        if (!r.content_type.empty()) append_field(out, "Content-Type", r.content_type);
        if (!r.stream) {
            out.append("Content-Length: ", 16);
            append_number(out, r.body.size());
            out.append("\r\n", 2);
        }
    }
    if (r.close && r.status >= 200) out.append("Connection: close\r\n", 19);
    out.append("\r\n", 2);
    if (!head_only && !no_content) out.append(r.body);
}

void write_request(const OutRequest& r, std::string& out) {
    const uint64_t body_bytes = r.body_bytes.value_or(r.body.size());
    assert(!r.body_bytes || r.body.empty());
    const Method m = method_of(r.method);
    const bool bodiless_method =
        m == Method::get || m == Method::head || m == Method::del || m == Method::options;
    out.reserve(out.size() + 96 + r.method.size() + r.target.size() + r.host.size() +
                r.headers.size() * 48 + r.body.size());
    append_field_text(out, r.method);
    out.push_back(' ');
    append_field_text(out, r.target);
    out.append(" HTTP/1.1\r\n", 11);
    append_field(out, "Host", r.host);
    for (const Header& h : r.headers) append_field(out, h.name, h.value);
    if (body_bytes > 0 || !bodiless_method) {
        out.append("Content-Length: ", 16);
        append_number(out, body_bytes);
        out.append("\r\n", 2);
    }
    if (r.expect_continue) out.append("Expect: 100-continue\r\n", 22);
    if (r.close) {
        out.append("Connection: close\r\n", 19);
    } else {
        out.append("Connection: keep-alive\r\n", 24);
    }
    out.append("\r\n", 2);
    out.append(r.body);
}

}  // namespace fenec::http
