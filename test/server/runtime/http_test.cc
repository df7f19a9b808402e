// test/server/runtime/http_test.cc: proves the HTTP/1.1 codec of server/runtime/http.h
// (node-http.md §2.1, §12): every refusal with its status (400 malformed, 431 too large, 501
// unknown method only once the head is whole, 505 version); the framing fields (Content-Length,
// Transfer-Encoding, Connection, Expect); pipelined heads parsed one after another from one buffer;
// a head split at every byte offset answers need_more and then exactly what the whole answers;
// moved heads (short ones in the string's inline buffer, long ones on the heap) keep views into
// their own `raw`; path and query decoding with repeated keys; answers written by write_response
// read back by parse_response_head, HEAD keeping Content-Length without the body; requests written
// by write_request parsed back with their framing (Content-Length only where a body is or may be,
// Expect, Connection).
#include "server/runtime/http.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fenec::http::http_test {
namespace {

struct Parsed {
    ParseStatus status = ParseStatus::need_more;
    RequestHead head;
    size_t consumed = 0;
    ParseError error;
};

Parsed parse(std::string_view in) {
    Parsed p;
    p.status = parse_request_head(in, p.head, p.consumed, p.error);
    return p;
}

// The status of a refusal, or 0 for done and -1 for need_more.
int status_of(std::string_view in) {
    Parsed p = parse(in);
    if (p.status == ParseStatus::done) return 0;
    if (p.status == ParseStatus::need_more) return -1;
    EXPECT_FALSE(p.error.message.empty()) << in;
    return p.error.status;
}

bool inside(std::string_view view, const std::string& raw) {
    return view.data() >= raw.data() && view.data() + view.size() <= raw.data() + raw.size();
}

void expect_views_inside(const RequestHead& h) {
    EXPECT_TRUE(inside(h.method_text, h.raw));
    EXPECT_TRUE(inside(h.target, h.raw));
    for (const Header& f : h.headers) {
        EXPECT_TRUE(inside(f.name, h.raw)) << f.name;
        EXPECT_TRUE(inside(f.value, h.raw)) << f.value;
    }
}

TEST(HttpRequest, ParsesAWholeHead) {
    std::string in =
        "POST /t/acme/query HTTP/1.1\r\nHost: node\r\nContent-Type: application/json\r\n"
        "Content-Length: 12\r\nX-Empty:\r\nX-Pad: \t spaced out \t\r\n\r\n{\"q\":\"x\"}xx";
    Parsed p = parse(in);
    ASSERT_EQ(p.status, ParseStatus::done) << p.error.message;
    EXPECT_EQ(p.consumed, in.find("\r\n\r\n") + 4);
    EXPECT_EQ(p.head.raw, in.substr(0, p.consumed));
    EXPECT_EQ(p.head.method, Method::post);
    EXPECT_EQ(p.head.method_text, "POST");
    EXPECT_EQ(p.head.target, "/t/acme/query");
    EXPECT_EQ(p.head.path, "/t/acme/query");
    EXPECT_TRUE(p.head.query.empty());
    EXPECT_EQ(p.head.version_minor, 1);
    ASSERT_EQ(p.head.headers.size(), 5u);
    EXPECT_EQ(p.head.headers[1].name, "Content-Type");
    EXPECT_EQ(p.head.header("content-TYPE"), "application/json");
    EXPECT_EQ(p.head.header("x-empty"), "");
    EXPECT_EQ(p.head.header("X-Pad"), "spaced out");
    EXPECT_EQ(p.head.header("Absent"), std::nullopt);
    EXPECT_EQ(p.head.content_length, 12u);
    EXPECT_FALSE(p.head.transfer_encoding);
    EXPECT_TRUE(p.head.keep_alive);
    EXPECT_FALSE(p.head.expect_continue);
    expect_views_inside(p.head);
}

TEST(HttpRequest, KnowsEveryMethod) {
    for (Method m : {Method::get, Method::head, Method::post, Method::put, Method::patch,
                     Method::del, Method::options}) {
        std::string in = std::string(method_name(m)) + " / HTTP/1.1\r\n\r\n";
        Parsed p = parse(in);
        ASSERT_EQ(p.status, ParseStatus::done) << in;
        EXPECT_EQ(p.head.method, m);
    }
    EXPECT_EQ(method_name(Method::other), "");
}

TEST(HttpRequest, RefusesEachMalformedHeadWithItsStatus) {
    struct Case {
        std::string in;
        int status;
    };
    const std::string ok_line = "GET / HTTP/1.1\r\n";
    const std::vector<Case> cases = {
        // request line
        {"G@T / HTTP/1.1\r\n\r\n", 400},
        {" GET / HTTP/1.1\r\n\r\n", 400},
        {"GET  / HTTP/1.1\r\n\r\n", 400},
        {"GET / HTTP/1.1 \r\n\r\n", 400},
        {"GET /\r\n\r\n", 400},
        {"GET / http/1.1\r\n\r\n", 400},
        {"GET / HTTP/1\r\n\r\n", 400},
        {"GET / HTTP/1.1x\r\n\r\n", 400},
        {"GET / HTTPS/1.1\r\n\r\n", 400},
        {"GET /a#frag HTTP/1.1\r\n\r\n", 400},
        {"GET /a\x7f HTTP/1.1\r\n\r\n", 400},
        {"GET /\xc3\xa9 HTTP/1.1\r\n\r\n", 400},
        {"GET\t/ HTTP/1.1\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\r\n\r\n", 400},
        // target form
        {"GET http://host/ HTTP/1.1\r\n\r\n", 400},
        {"GET host:80 HTTP/1.1\r\n\r\n", 400},
        {"GET * HTTP/1.1\r\n\r\n", 400},
        {"GET /%zz HTTP/1.1\r\n\r\n", 400},
        {"GET /a%4 HTTP/1.1\r\n\r\n", 400},
        {"GET /a% HTTP/1.1\r\n\r\n", 400},
        {"GET /a%00b HTTP/1.1\r\n\r\n", 400},
        {"GET /?a=%g1 HTTP/1.1\r\n\r\n", 400},
        {"GET /?%=1 HTTP/1.1\r\n\r\n", 400},
        // fields
        {ok_line + "Host : x\r\n\r\n", 400},
        {ok_line + "Host\t: x\r\n\r\n", 400},
        {ok_line + "A: 1\r\n folded\r\n\r\n", 400},
        {ok_line + "A: 1\r\n\tfolded\r\n\r\n", 400},
        {ok_line + " A: 1\r\n\r\n", 400},
        {ok_line + ": v\r\n\r\n", 400},
        {ok_line + "NoColon\r\n\r\n", 400},
        {ok_line + "Bad(Name): v\r\n\r\n", 400},
        {ok_line + "A: x\ry\r\n\r\n", 400},
        {ok_line + "A: x\r\r\n\r\n", 400},
        {ok_line + "A: x\x01y\r\n\r\n", 400},
        {ok_line + "A: x\x7fy\r\n\r\n", 400},
        {ok_line + std::string("A: x\0y\r\n\r\n", 10), 400},
        {ok_line + "\rA: x\r\n\r\n", 400},
        {ok_line + "Host: a\r\nhost: b\r\n\r\n", 400},
        // Content-Length
        {ok_line + "Content-Length: abc\r\n\r\n", 400},
        {ok_line + "Content-Length: \r\n\r\n", 400},
        {ok_line + "Content-Length: -1\r\n\r\n", 400},
        {ok_line + "Content-Length: +1\r\n\r\n", 400},
        {ok_line + "Content-Length: 1 2\r\n\r\n", 400},
        {ok_line + "Content-Length: 0x10\r\n\r\n", 400},
        {ok_line + "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", 400},
        {ok_line + "Content-Length: 5, 6\r\n\r\n", 400},
        {ok_line + "Content-Length: 5,\r\n\r\n", 400},
        {ok_line + "Content-Length: 9223372036854775808\r\n\r\n", 400},
        {ok_line + "Content-Length: 18446744073709551616\r\n\r\n", 400},
        {ok_line + "Content-Length: 99999999999999999999999999\r\n\r\n", 400},
        // versions
        {"GET / HTTP/2.0\r\n\r\n", 505},
        {"GET / HTTP/1.2\r\n\r\n", 505},
        {"GET / HTTP/0.9\r\n\r\n", 505},
        {"GET / HTTP/3.1\r\n\r\n", 505},
        // methods: case-sensitive tokens; known only the seven
        {"FOO / HTTP/1.1\r\n\r\n", 501},
        {"get / HTTP/1.1\r\n\r\n", 501},
        {"CONNECT /x HTTP/1.1\r\n\r\n", 501},
        {"TRACE * HTTP/1.1\r\n\r\n", 501},
        // 501 only once the rest is sound: a malformed field wins, and so does the version
        {"FOO / HTTP/1.1\r\nBad Name: v\r\n\r\n", 400},
        {"FOO / HTTP/2.0\r\n\r\n", 505},
    };
    for (const Case& c : cases) {
        EXPECT_EQ(status_of(c.in), c.status) << testing::PrintToString(c.in);
    }
}

TEST(HttpRequest, UnknownMethodFillsTheHeadAndNamesIt) {
    Parsed p = parse("BREW /pot HTTP/1.1\r\nA: b\r\n\r\nrest");
    ASSERT_EQ(p.status, ParseStatus::error);
    EXPECT_EQ(p.error.status, 501);
    EXPECT_NE(p.error.message.find("BREW"), std::string::npos);
    EXPECT_EQ(p.head.method, Method::other);
    EXPECT_EQ(p.head.method_text, "BREW");
    EXPECT_EQ(p.head.header("a"), "b");
    EXPECT_EQ(p.consumed, 28u);
    EXPECT_EQ(status_of("BREW /pot HTTP/1.1\r\nA: b\r\n"), -1);  // not before the head is whole
}

TEST(HttpRequest, FindsABadValueByteAtEveryPosition) {
    // Values are scanned 16 bytes at a time: a control byte in any lane, or in the tail, is
    // found; tab, DEL's neighbours and obs-text in every lane are taken.
    const std::string good = "\t ~!\x80\xff\xc3\xa9" + std::string(37, 'v');
    for (size_t at = 0; at < good.size(); ++at) {
        for (char bad : {'\0', '\x01', '\x1f', '\x7f', '\r'}) {
            std::string value = good;
            value[at] = bad;
            std::string in = "GET / HTTP/1.1\r\nA: x" + value + "\r\nB: c\r\n\r\n";
            EXPECT_EQ(status_of(in), 400) << at << " " << int(bad);
        }
    }
    Parsed p = parse("GET / HTTP/1.1\r\nA: x" + good + "\r\n\r\n");
    ASSERT_EQ(p.status, ParseStatus::done);
    EXPECT_EQ(p.head.header("a"), "x" + good);
}

TEST(HttpRequest, AcceptsWhatRfc9112Allows) {
    const std::string line = "GET / HTTP/1.1\r\n";
    EXPECT_EQ(status_of(line + "Content-Length: 5\r\nContent-Length: 5\r\n\r\n"), 0);
    EXPECT_EQ(status_of(line + "Content-Length: 5 ,5\r\n\r\n"), 0);
    EXPECT_EQ(status_of(line + "Content-Length: 007\r\n\r\n"), 0);
    EXPECT_EQ(status_of(line + "A: caf\xc3\xa9 \t x\r\n\r\n"), 0);       // obs-text, inner spaces
    EXPECT_EQ(status_of(line + "!#$%&'*+-.^_`|~09azAZ: v\r\n\r\n"), 0);  // every tchar
    EXPECT_EQ(status_of("OPTIONS * HTTP/1.1\r\n\r\n"), 0);
    EXPECT_EQ(status_of("GET /a/b;c=d?e=f/g?h:@!$'()*+,; HTTP/1.0\r\n\r\n"), 0);
    EXPECT_EQ(status_of("GET /{\"a\":[1]}|^`\\ HTTP/1.1\r\n\r\n"), 0);  // unescaped, as curl sends

    Parsed p = parse(line + "Content-Length: 9223372036854775807\r\n\r\n");
    ASSERT_EQ(p.status, ParseStatus::done);
    EXPECT_EQ(p.head.content_length, 9223372036854775807u);

    Parsed star = parse("OPTIONS * HTTP/1.1\r\n\r\n");
    EXPECT_EQ(star.head.target, "*");
    EXPECT_EQ(star.head.path, "*");
}

TEST(HttpRequest, TakesBareLfLinesAndSkipsLeadingEmptyLines) {
    std::string in = "\r\n\n\r\nGET /x HTTP/1.1\nA: 1\r\nB: 2\n\nbody";
    Parsed p = parse(in);
    ASSERT_EQ(p.status, ParseStatus::done) << p.error.message;
    EXPECT_EQ(p.consumed, in.size() - 4);
    EXPECT_EQ(p.head.raw, "GET /x HTTP/1.1\nA: 1\r\nB: 2\n\n");
    EXPECT_EQ(p.head.header("A"), "1");
    EXPECT_EQ(p.head.header("B"), "2");
    EXPECT_EQ(status_of("\r\n\r\n"), -1);
    EXPECT_EQ(status_of("\r"), -1);
    EXPECT_EQ(status_of("\rGET / HTTP/1.1\r\n\r\n"), 400);
}

TEST(HttpRequest, RefusesOversizedHeads431) {
    const std::string line = "GET / HTTP/1.1\r\n";
    // No blank line: need_more below the bound, 431 once the buffer reaches it.
    std::string open = line + "A: " + std::string(head_bytes_max, 'x');
    EXPECT_EQ(status_of(std::string_view(open).substr(0, head_bytes_max - 1)), -1);
    EXPECT_EQ(status_of(std::string_view(open).substr(0, head_bytes_max)), 431);
    EXPECT_EQ(status_of(open), 431);
    // A head of exactly head_bytes_max bytes is taken; one byte more is not, blank line or not.
    std::string exact = line + "A: ";
    exact += std::string(head_bytes_max - exact.size() - 4, 'y') + "\r\n\r\n";
    ASSERT_EQ(exact.size(), head_bytes_max);
    EXPECT_EQ(status_of(exact), 0);
    EXPECT_EQ(status_of(exact + "trailing body"), 0);
    std::string over = line + "A: y" + exact.substr(line.size() + 3);
    ASSERT_EQ(over.size(), head_bytes_max + 1);
    EXPECT_EQ(status_of(over), 431);
    // Empty lines before the request line count toward the bound.
    EXPECT_EQ(status_of(std::string(head_bytes_max - 10, '\n') + "GET / HTTP/1.1\r\n\r\n"), 431);
    // Fields: 100 taken, 101 refused.
    std::string fields = line;
    for (size_t i = 0; i < header_fields_max; ++i) fields += "F" + std::to_string(i) + ": v\r\n";
    EXPECT_EQ(status_of(fields + "\r\n"), 0);
    EXPECT_EQ(status_of(fields + "One-More: v\r\n\r\n"), 431);
    // The target: 8 KiB taken, one byte more 431.
    std::string target(target_bytes_max, 'a');
    target[0] = '/';
    EXPECT_EQ(status_of("GET " + target + " HTTP/1.1\r\n\r\n"), 0);
    EXPECT_EQ(status_of("GET " + target + "a HTTP/1.1\r\n\r\n"), 431);
}

TEST(HttpRequest, ReadsConnectionAndExpect) {
    auto keep = [](const std::string& version, const std::string& fields) {
        Parsed p = parse("GET / HTTP/" + version + "\r\n" + fields + "\r\n");
        EXPECT_EQ(p.status, ParseStatus::done) << p.error.message;
        return p.head.keep_alive;
    };
    EXPECT_TRUE(keep("1.1", ""));
    EXPECT_FALSE(keep("1.1", "Connection: close\r\n"));
    EXPECT_FALSE(keep("1.1", "Connection: CLOSE\r\n"));
    EXPECT_FALSE(keep("1.1", "Connection: Upgrade , close\r\n"));
    EXPECT_FALSE(keep("1.1", "Connection: keep-alive\r\nconnection: close\r\n"));
    EXPECT_TRUE(keep("1.1", "Connection: closed, keep-alive\r\n"));
    EXPECT_FALSE(keep("1.0", ""));
    EXPECT_TRUE(keep("1.0", "Connection: Keep-Alive\r\n"));
    EXPECT_TRUE(keep("1.0", "Connection: foo,keep-alive\r\n"));
    EXPECT_FALSE(keep("1.0", "Connection: keep-alive, close\r\n"));

    EXPECT_TRUE(parse("PUT / HTTP/1.1\r\nExpect: 100-Continue\r\n\r\n").head.expect_continue);
    EXPECT_FALSE(parse("PUT / HTTP/1.1\r\nExpect: 200-ok\r\n\r\n").head.expect_continue);
    EXPECT_FALSE(parse("PUT / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").head.expect_continue);

    Parsed te = parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n");
    ASSERT_EQ(te.status, ParseStatus::done);
    EXPECT_TRUE(te.head.transfer_encoding);  // reported, never decoded: the node answers 411
    EXPECT_EQ(te.head.content_length, 3u);
}

TEST(HttpRequest, ParsesPipelinedHeadsOneAfterAnother) {
    std::string buf =
        "POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
        "GET /b?x=1 HTTP/1.1\r\n\r\n"
        "\r\n"  // a stray empty line between requests is skipped
        "DELETE /c HTTP/1.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
        "GET /d HTT";
    std::string_view rest = buf;
    RequestHead head;  // reused across requests, as a connection does
    std::vector<std::string> paths;
    for (;;) {
        size_t consumed = 0;
        ParseError error;
        ParseStatus s = parse_request_head(rest, head, consumed, error);
        if (s == ParseStatus::need_more) break;
        ASSERT_EQ(s, ParseStatus::done) << error.message;
        expect_views_inside(head);
        paths.push_back(head.path);
        rest.remove_prefix(consumed);
        rest.remove_prefix(head.content_length.value_or(0));
    }
    EXPECT_EQ(paths, (std::vector<std::string>{"/a", "/b", "/c"}));
    EXPECT_EQ(rest, "GET /d HTT");
    EXPECT_FALSE(head.keep_alive);
    EXPECT_TRUE(head.query.empty());  // the reused head holds only the last request's query
}

bool same_head(const RequestHead& a, const RequestHead& b) {
    if (a.raw != b.raw || a.method != b.method || a.method_text != b.method_text ||
        a.target != b.target || a.path != b.path || a.query != b.query ||
        a.version_minor != b.version_minor || a.headers.size() != b.headers.size() ||
        a.content_length != b.content_length || a.transfer_encoding != b.transfer_encoding ||
        a.keep_alive != b.keep_alive || a.expect_continue != b.expect_continue) {
        return false;
    }
    for (size_t i = 0; i < a.headers.size(); ++i) {
        if (a.headers[i].name != b.headers[i].name || a.headers[i].value != b.headers[i].value) {
            return false;
        }
    }
    return true;
}

TEST(HttpRequest, SplitAtEveryOffsetNeedsMoreThenAgrees) {
    const std::vector<std::string> inputs = {
        "\r\nPOST /t/a/c/x?k=1&k=2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
        "Expect: 100-continue\r\nConnection: keep-alive\r\n\r\nabc",
        "GET / HTTP/1.0\nA: 1\n\nGET /next HTTP/1.1\r\n\r\n",
        "FOO /x HTTP/1.1\r\nA: b\r\n\r\n",           // 501
        "GET /x HTTP/1.1\r\nA : b\r\nC: d\r\n\r\n",  // 400
        "GET / HTTP/1.1\r\nA: b\rc\r\n\r\n",         // 400, bare CR
        "GET / HTTP/9.9\r\n\r\n",                    // 505
    };
    for (const std::string& in : inputs) {
        Parsed whole = parse(in);
        ASSERT_NE(whole.status, ParseStatus::need_more) << in;
        ASSERT_GT(whole.consumed, 0u);
        for (size_t cut = 0; cut <= in.size(); ++cut) {
            Parsed part = parse(std::string_view(in).substr(0, cut));
            if (cut < whole.consumed) {
                EXPECT_EQ(part.status, ParseStatus::need_more) << cut << " of " << in;
                continue;
            }
            ASSERT_EQ(part.status, whole.status) << cut << " of " << in;
            EXPECT_EQ(part.consumed, whole.consumed);
            EXPECT_EQ(part.error.status, whole.error.status);
            EXPECT_EQ(part.error.message, whole.error.message);
            EXPECT_TRUE(same_head(part.head, whole.head)) << cut << " of " << in;
        }
    }
}

TEST(HttpRequest, MovedHeadsKeepValidViews) {
    const std::vector<std::string> inputs = {
        "A / HTTP/1.1\n\n",  // 14 bytes: fits the string's inline buffer (filled on a 501)
        "GET /short HTTP/1.1\r\nA: b\r\n\r\n",
        "GET /" + std::string(300, 'p') + " HTTP/1.1\r\nLong: " + std::string(2000, 'v') +
            "\r\nX: y\r\n\r\n",
    };
    for (const std::string& in : inputs) {
        Parsed p = parse(in);
        ASSERT_NE(p.status, ParseStatus::need_more);
        const std::string method(p.head.method_text);
        const std::string target(p.head.target);
        std::vector<std::pair<std::string, std::string>> fields;
        for (const Header& h : p.head.headers) fields.emplace_back(h.name, h.value);

        auto check = [&](const RequestHead& h) {
            expect_views_inside(h);
            EXPECT_EQ(h.raw, in);
            EXPECT_EQ(h.method_text, method);
            EXPECT_EQ(h.target, target);
            ASSERT_EQ(h.headers.size(), fields.size());
            for (size_t i = 0; i < fields.size(); ++i) {
                EXPECT_EQ(h.headers[i].name, fields[i].first);
                EXPECT_EQ(h.headers[i].value, fields[i].second);
            }
        };
        auto source = std::make_unique<RequestHead>(std::move(p.head));
        check(*source);
        RequestHead constructed(std::move(*source));
        source.reset();  // the moved-from head is gone: nothing may point into it
        check(constructed);
        EXPECT_TRUE(constructed.raw.size() == in.size());

        RequestHead assigned;
        ASSERT_EQ(parse_request_head("PUT /other HTTP/1.1\r\nZ: z\r\n\r\n", assigned, p.consumed,
                                     p.error),
                  ParseStatus::done);
        auto holder = std::make_unique<RequestHead>(std::move(constructed));
        assigned = std::move(*holder);
        holder.reset();
        check(assigned);
        RequestHead& self = assigned;
        assigned = std::move(self);  // self-move keeps the head
        check(assigned);
    }
}

TEST(HttpRequest, MovedHeadBuiltByHandKeepsInlineViews) {
    RequestHead h;
    h.raw = "GET /x";  // inline (SSO): the buffer moves with the object
    h.method_text = std::string_view(h.raw).substr(0, 3);
    h.target = std::string_view(h.raw).substr(4);
    h.headers.push_back(Header{std::string_view(h.raw).substr(0, 1), "static"});
    auto source = std::make_unique<RequestHead>(std::move(h));
    RequestHead moved(std::move(*source));
    source.reset();
    EXPECT_TRUE(inside(moved.method_text, moved.raw));
    EXPECT_EQ(moved.method_text, "GET");
    EXPECT_EQ(moved.target, "/x");
    EXPECT_EQ(moved.headers[0].name, "G");
    EXPECT_EQ(moved.headers[0].value, "static");  // a view outside raw is kept as it was
}

TEST(HttpRequest, DecodesPathOnceAndQueryInOrderWithRepeats) {
    Parsed p = parse(
        "GET /t/a%20b/c%2Fd/%2541?k=1&x=%41%2b+&k=2&flag&&=v&eq=a=b&k&%F0%9F%90%B1=cat"
        " HTTP/1.1\r\n\r\n");
    ASSERT_EQ(p.status, ParseStatus::done) << p.error.message;
    EXPECT_EQ(p.head.path, "/t/a b/c/d/%41");  // decoded once: %2541 is "%41"
    using Q = std::vector<std::pair<std::string, std::string>>;
    EXPECT_EQ(p.head.query, (Q{{"k", "1"},
                               {"x", "A++"},
                               {"k", "2"},
                               {"flag", ""},
                               {"", "v"},
                               {"eq", "a=b"},
                               {"k", ""},
                               {"\xf0\x9f\x90\xb1", "cat"}}));
    ASSERT_NE(p.head.query_value("k"), nullptr);
    EXPECT_EQ(*p.head.query_value("k"), "1");
    EXPECT_EQ(p.head.query_value("K"), nullptr);
    EXPECT_EQ(*p.head.query_value("flag"), "");

    Parsed empty = parse("GET /p? HTTP/1.1\r\n\r\n");
    EXPECT_EQ(empty.head.path, "/p");
    EXPECT_TRUE(empty.head.query.empty());
    Parsed nul = parse("GET /p?a=%00 HTTP/1.1\r\n\r\n");  // NUL refused in the path only
    ASSERT_EQ(nul.status, ParseStatus::done);
    EXPECT_EQ(nul.head.query[0].second, std::string(1, '\0'));
}

TEST(HttpCodec, PercentDecode) {
    EXPECT_EQ(percent_decode(""), "");
    EXPECT_EQ(percent_decode("plain+text"), "plain+text");
    EXPECT_EQ(percent_decode("%41%62%2f%2F"), "Ab//");
    EXPECT_EQ(percent_decode("%"), std::nullopt);
    EXPECT_EQ(percent_decode("a%4"), std::nullopt);
    EXPECT_EQ(percent_decode("%4g"), std::nullopt);
    EXPECT_EQ(percent_decode("%%41"), std::nullopt);
    EXPECT_TRUE(iequals("Content-Length", "content-LENGTH"));
    EXPECT_FALSE(iequals("Content-Length", "Content-Lengt"));
    EXPECT_FALSE(iequals("a", "b"));
}

TEST(HttpCodec, ReasonPhraseForEveryStatusWeSend) {
    for (int status : {100, 200, 201, 204, 206, 304, 400, 401, 403, 404, 405, 408, 409, 411,
                       412, 413, 415, 422, 429, 431, 500, 501, 502, 503, 504, 505, 507}) {
        EXPECT_NE(reason_phrase(status), "Unknown") << status;
    }
    EXPECT_EQ(reason_phrase(404), "Not Found");
    EXPECT_EQ(reason_phrase(299), "Unknown");
}

struct ParsedAnswer {
    ParseStatus status = ParseStatus::need_more;
    ResponseHead head;
    size_t consumed = 0;
    ParseError error;
};

ParsedAnswer parse_answer(std::string_view in) {
    ParsedAnswer p;
    p.status = parse_response_head(in, p.head, p.consumed, p.error);
    return p;
}

TEST(HttpResponse, RoundTripsThroughWriteAndParse) {
    Response r;
    r.status = 503;
    r.header("Retry-After", "1").header("Fenec-Lease", "lapsed");
    r.body = R"({"error":"lease lapsed"})";
    std::string out = "prefix:";
    write_response(r, false, "fenec-node/0.1", out);
    ASSERT_EQ(out.rfind("prefix:", 0), 0u);  // appended, never replaced
    std::string_view wire = std::string_view(out).substr(7);
    EXPECT_EQ(wire.substr(0, 34), "HTTP/1.1 503 Service Unavailable\r\n");

    ParsedAnswer p = parse_answer(wire);
    ASSERT_EQ(p.status, ParseStatus::done) << p.error.message;
    EXPECT_EQ(p.head.status, 503);
    EXPECT_EQ(p.head.reason, "Service Unavailable");
    EXPECT_EQ(p.head.version_minor, 1);
    EXPECT_EQ(p.head.header("server"), "fenec-node/0.1");
    EXPECT_EQ(p.head.header("Retry-After"), "1");
    EXPECT_EQ(p.head.header("Fenec-Lease"), "lapsed");
    EXPECT_EQ(p.head.header("Content-Type"), "application/json; charset=utf-8");
    EXPECT_EQ(p.head.content_length, r.body.size());
    EXPECT_TRUE(p.head.keep_alive);
    EXPECT_EQ(wire.substr(p.consumed), r.body);

    r.close = true;
    r.content_type = "";
    out.clear();
    write_response(r, false, "", out);
    p = parse_answer(out);
    ASSERT_EQ(p.status, ParseStatus::done);
    EXPECT_FALSE(p.head.keep_alive);
    EXPECT_EQ(p.head.header("Server"), std::nullopt);
    EXPECT_EQ(p.head.header("Content-Type"), std::nullopt);
}

TEST(HttpResponse, HeadKeepsContentLengthWithoutTheBody) {
    Response r;
    r.body = std::string(1000, 'b');
    std::string out;
    write_response(r, true, "fenec-node", out);
    ParsedAnswer p = parse_answer(out);
    ASSERT_EQ(p.status, ParseStatus::done);
    EXPECT_EQ(p.head.content_length, 1000u);
    EXPECT_EQ(p.consumed, out.size());  // nothing after the head
}

TEST(HttpResponse, StreamsAndContentlessStatusesHaveNoLength) {
    Response stream;
    stream.content_type = "text/event-stream";
    stream.stream = true;
    stream.close = true;
    std::string out;
    write_response(stream, false, "s", out);
    ParsedAnswer p = parse_answer(out);
    ASSERT_EQ(p.status, ParseStatus::done);
    EXPECT_EQ(p.head.content_length, std::nullopt);
    EXPECT_EQ(p.head.header("Content-Type"), "text/event-stream");
    EXPECT_FALSE(p.head.keep_alive);

    for (int status : {100, 204, 304}) {
        Response r;
        r.status = status;
        out.clear();
        write_response(r, false, "s", out);
        p = parse_answer(out);
        ASSERT_EQ(p.status, ParseStatus::done) << status;
        EXPECT_EQ(p.head.status, status);
        EXPECT_EQ(p.head.content_length, std::nullopt) << status;
        EXPECT_EQ(p.head.header("Content-Type"), std::nullopt) << status;
        EXPECT_EQ(p.consumed, out.size());
    }
    EXPECT_EQ(out, "HTTP/1.1 304 Not Modified\r\nServer: s\r\n\r\n");
}

#ifdef NDEBUG  // in a debug build a CR or LF in an answer header is a failed assertion
TEST(HttpResponse, AHeaderValueCannotSplitTheAnswer) {
    Response r;
    r.header("X-Request-Id", "a\r\nSet-Cookie: stolen");
    r.header(std::string("X-Zero", 6), std::string("b\0c", 3));
    std::string out;
    write_response(r, false, "s", out);
    ParsedAnswer p = parse_answer(out);
    ASSERT_EQ(p.status, ParseStatus::done) << p.error.message;
    EXPECT_EQ(p.head.header("X-Request-Id"), "a  Set-Cookie: stolen");
    EXPECT_EQ(p.head.header("Set-Cookie"), std::nullopt);
    EXPECT_EQ(p.head.header("X-Zero"), "b c");
}
#endif

TEST(HttpResponse, ParsesUpstreamHeadsAndRefusesMalformedOnes) {
    ParsedAnswer p = parse_answer("HTTP/1.0 200\r\nContent-Length: 2\r\n\r\nok");
    ASSERT_EQ(p.status, ParseStatus::done) << p.error.message;
    EXPECT_EQ(p.head.status, 200);
    EXPECT_EQ(p.head.reason, "");
    EXPECT_EQ(p.head.version_minor, 0);
    EXPECT_FALSE(p.head.keep_alive);
    EXPECT_EQ(parse_answer("HTTP/1.1 204 \n\n").status, ParseStatus::done);
    EXPECT_TRUE(parse_answer("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                    .head.transfer_encoding);
    EXPECT_EQ(parse_answer("HTTP/1.1 200 OK\r\nContent-Le").status, ParseStatus::need_more);

    const std::vector<std::pair<std::string, int>> cases = {
        {"HTTP/1.1 099 Low\r\n\r\n", 400},
        {"HTTP/1.1 600 High\r\n\r\n", 400},
        {"HTTP/1.1 2000 OK\r\n\r\n", 400},
        {"HTTP/1.1 20 OK\r\n\r\n", 400},
        {"HTTP/1.1  200 OK\r\n\r\n", 400},
        {"HTTP/1.1 200 O\x01K\r\n\r\n", 400},
        {"HTTP/1.1 200 OK\rX\r\n\r\n", 400},
        {"http/1.1 200 OK\r\n\r\n", 400},
        {"HTTP/2.0 200 OK\r\n\r\n", 505},
        {"HTTP/1.1 200 OK\r\nA : b\r\n\r\n", 400},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
    };
    for (const auto& [in, status] : cases) {
        ParsedAnswer a = parse_answer(in);
        ASSERT_EQ(a.status, ParseStatus::error) << testing::PrintToString(in);
        EXPECT_EQ(a.error.status, status) << testing::PrintToString(in);
    }
}

TEST(HttpResponse, MovedShortAnswerHeadKeepsViews) {
    const std::string in = "HTTP/1.1 200 \n\n";  // 15 bytes: inline in the string
    for (bool assign : {false, true}) {
        ParsedAnswer p = parse_answer(in);
        ASSERT_EQ(p.status, ParseStatus::done);
        ASSERT_EQ(p.head.reason.data(), p.head.raw.data() + 13);  // the empty reason's place
        auto source = std::make_unique<ResponseHead>(std::move(p.head));
        std::optional<ResponseHead> moved;
        if (assign) {
            moved.emplace();
            *moved = std::move(*source);
        } else {
            moved.emplace(std::move(*source));
        }
        source.reset();
        EXPECT_EQ(moved->raw, in);
        EXPECT_EQ(moved->status, 200);
        EXPECT_EQ(moved->reason.data(), moved->raw.data() + 13);
    }
    ParsedAnswer p = parse_answer("HTTP/1.1 200 OK\r\nX: 1\r\n\r\n");  // 27 bytes: on the heap
    auto source = std::make_unique<ResponseHead>(std::move(p.head));
    ResponseHead moved(std::move(*source));
    source.reset();
    EXPECT_EQ(moved.reason, "OK");
    EXPECT_TRUE(inside(moved.reason, moved.raw));
    EXPECT_EQ(moved.header("x"), "1");
    EXPECT_TRUE(inside(moved.headers[0].value, moved.raw));
}

// The one request writer: what it writes parses back to what it was given.
TEST(HttpRequestWriter, ParsesBackWithItsFramingAdded) {
    std::string out;
    write_request({.method = "POST",
                   .target = "/t/acme/c/notes?x=%41",
                   .host = "127.0.0.1:7001",
                   .headers = {{"Authorization", "Bearer t"}, {"X-Request-Id", "r1"}},
                   .body = "{}"},
                  out);
    RequestHead head;
    size_t used = 0;
    ParseError err;
    ASSERT_EQ(parse_request_head(out, head, used, err), ParseStatus::done) << err.message;
    EXPECT_EQ(head.method_text, "POST");
    EXPECT_EQ(head.target, "/t/acme/c/notes?x=%41");
    EXPECT_EQ(head.header("Host"), "127.0.0.1:7001");
    EXPECT_EQ(head.header("Authorization"), "Bearer t");
    EXPECT_EQ(head.content_length, 2u);
    EXPECT_TRUE(head.keep_alive);
    EXPECT_EQ(out.substr(used), "{}");

    std::string get;
    write_request({.method = "GET", .target = "/x", .host = "h:1"}, get);
    EXPECT_EQ(get, "GET /x HTTP/1.1\r\nHost: h:1\r\nConnection: keep-alive\r\n\r\n");

    std::string put;
    write_request({.method = "PUT",
                   .target = "/f",
                   .host = "h:1",
                   .body_bytes = 1234,
                   .expect_continue = true,
                   .close = true},
                  put);
    ASSERT_EQ(parse_request_head(put, head, used, err), ParseStatus::done);
    EXPECT_EQ(head.content_length, 1234u);
    EXPECT_TRUE(head.expect_continue);
    EXPECT_FALSE(head.keep_alive);
    EXPECT_EQ(used, put.size()) << "the body is the caller's to send";
}

}  // namespace
}  // namespace fenec::http::http_test
