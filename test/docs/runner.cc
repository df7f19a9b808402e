// test/docs/runner.cc: a page's set-up started (the fixtures' NodeProcess and RouterProcess),
// its examples run in order, each answer held against the page's (compare.h). Network traffic
// goes to 127.0.0.1 only; every file goes under one temporary folder, removed afterwards.
#include "test/docs/runner.h"

#include <sys/stat.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "json/writer.h"
#include "test/docs/compare.h"
#include "test/docs/shell.h"
#include "test/shard/shard_fixture.h"

namespace fenec::test::docs {

namespace {

// How long one ```sh block may run: far past any page's step (the slowest sleeps a few seconds).
constexpr int kShellBlockMs = 60'000;
// How long a subscription stream is read for the events its page shows.
constexpr int kEventsMs = 5'000;

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// `from` replaced in `s` where it stands alone: not inside a longer word or number.
void replace_word(std::string& s, const std::string& from, const std::string& to) {
    auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at)) {
        const bool alone = (at == 0 || !word(s[at - 1])) &&
                           (at + from.size() == s.size() || !word(s[at + from.size()]));
        if (alone) {
            s.replace(at, from.size(), to);
            at += to.size();
        } else {
            at += from.size();
        }
    }
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
        s.replace(at, from.size(), to);
    }
}

// Loopback ports free now, distinct (each held until all are picked).
std::vector<uint16_t> free_ports(size_t n) {
    std::vector<int> fds;
    std::vector<uint16_t> ports;
    for (size_t i = 0; i < n; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
            ports.push_back(0);
        } else {
            ports.push_back(ntohs(a.sin_port));
        }
        fds.push_back(fd);
    }
    for (int fd : fds) {
        if (fd >= 0) ::close(fd);
    }
    return ports;
}

struct Request {
    std::string method, target, body;
    std::vector<std::pair<std::string, std::string>> headers;
};

// An ```http block: `METHOD /target`, header lines, a blank line, the body verbatim.
std::optional<Request> parse_request(const std::string& text, std::string& why) {
    Request r;
    std::istringstream in(text);
    std::string line;
    std::getline(in, line);
    std::istringstream first(line);
    std::string version;
    first >> r.method >> r.target >> version;
    if (r.method.empty() || !r.target.starts_with("/") ||
        (!version.empty() && version != "HTTP/1.1")) {
        why = "the block does not open with `METHOD /target`";
        return std::nullopt;
    }
    while (std::getline(in, line) && !line.empty()) {
        const size_t c = line.find(':');
        if (c == std::string::npos || c == 0) {
            why = "header line `" + line + "` is not `Name: value`";
            return std::nullopt;
        }
        std::string value = line.substr(c + 1);
        value.erase(0, value.find_first_not_of(' '));
        r.headers.emplace_back(line.substr(0, c), value);
    }
    std::string rest;
    bool first_body_line = true;
    while (std::getline(in, line)) {
        rest += (first_body_line ? "" : "\n") + line;
        first_body_line = false;
    }
    r.body = rest;
    return r;
}

bool has_header(const Request& r, std::string_view name) {
    for (const auto& [k, v] : r.headers) {
        if (http::iequals(k, name)) return true;
    }
    return false;
}

std::string wire(const Request& r) {
    std::string out = r.method + " " + r.target + " HTTP/1.1\r\n";
    if (!has_header(r, "Host")) out += "Host: 127.0.0.1\r\n";
    for (const auto& [k, v] : r.headers) out += k + ": " + v + "\r\n";
    const bool sends_body =
        !r.body.empty() || r.method == "POST" || r.method == "PUT" || r.method == "PATCH";
    if (sends_body && !has_header(r, "Content-Length") && !has_header(r, "Transfer-Encoding")) {
        out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
    }
    return out + "\r\n" + r.body;
}

// What one request got: a whole answer, or a stream's head and the events read from it.
struct Exchange {
    bool ok = false;
    std::string why;
    Answer answer;
    bool stream = false;
    std::vector<std::string> events;
};

// Reads `want` events from a stream whose head was taken out of `c`'s buffer: events end at a
// blank line, and one made only of comment lines (keep-alives) is not an event.
void read_events(Client& c, size_t want, std::vector<std::string>& events) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(kEventsMs);
    while (events.size() < want) {
        std::string& buf = c.buffer();
        const size_t at = buf.find("\n\n");
        if (at == std::string::npos) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  end - std::chrono::steady_clock::now())
                                  .count();
            if (left <= 0) return;
            const size_t before = buf.size();
            c.read_until("\n\n", static_cast<int>(left));
            if (c.buffer().size() == before) return;  // the stream ended or the time ran out
            continue;
        }
        std::string event = buf.substr(0, at);
        c.drop(at + 2);
        bool comment_only = true;
        std::istringstream in(event);
        std::string line;
        while (std::getline(in, line)) comment_only = comment_only && line.starts_with(":");
        if (!comment_only) events.push_back(std::move(event));
    }
}

Exchange exchange(uint16_t port, const Request& req, size_t events_wanted) {
    Exchange x;
    Client c(port);
    if (!c.ok()) {
        x.why = "cannot connect to 127.0.0.1:" + std::to_string(port);
        return x;
    }
    if (!c.send_raw(wire(req))) {
        x.why = "the request could not be sent";
        return x;
    }
    // The head first: a stream has no length and ends only when closed.
    c.read_until("\r\n\r\n", 10'000);
    http::ResponseHead head;
    size_t used = 0;
    http::ParseError err;
    if (http::parse_response_head(c.buffer(), head, used, err) != http::ParseStatus::done) {
        x.why = "no answer head within 10 s";
        return x;
    }
    const std::optional<std::string_view> type = head.header("Content-Type");
    if (type && type->starts_with("text/event-stream")) {
        x.stream = true;
        x.answer.status = head.status;
        x.answer.reason = std::string(head.reason);
        for (const auto& h : head.headers) x.answer.headers.emplace_back(h.name, h.value);
        c.drop(used);
        read_events(c, events_wanted, x.events);
        x.ok = true;
        return x;
    }
    x.answer.reason = std::string(head.reason);
    if (req.method == "HEAD") {  // a length but no body (RFC 9110 §9.3.2)
        x.answer.status = head.status;
        for (const auto& h : head.headers) x.answer.headers.emplace_back(h.name, h.value);
        x.ok = true;
        return x;
    }
    std::optional<Reply> reply = c.read_reply();
    if (!reply) {
        x.why = "the answer was cut short";
        return x;
    }
    x.answer.status = reply->status;
    x.answer.headers = std::move(reply->headers);
    x.answer.body = std::move(reply->body);
    x.ok = true;
    return x;
}

// Whether a block is an answer to the example before it (it is read with that example).
bool is_answer(const Block& b) {
    return b.lang == "json" || b.lang == "http-response" || (b.lang == "text");
}

class PageRun {
  public:
    explicit PageRun(const Page& page) : page_(page) {}

    Report run() {
        if (start()) {
            for (size_t k = 0; k < page_.blocks.size(); ++k) k += example(k);
        }
        if (report_.examples() == 0 && report_.failures.empty()) {
            fail(1,
                 "the page has no example the runner runs (```fenecql, ```http, ```sh): it "
                 "would not be checked at all");
        }
        shell_.reset();
        routers_.clear();
        nodes_.clear();
        return std::move(report_);
    }

  private:
    void fail(int line, std::string what) { report_.failures.push_back({line, std::move(what)}); }

    std::string rewrite(std::string s) const {
        for (const auto& [from, to] : words_) replace_word(s, from, to);
        for (const auto& [from, to] : paths_) replace_all(s, from, to);
        return s;
    }

    // Starts the processes and creates the tenant; false (with a failure) when one did not come.
    bool start() {
        const Setup& setup = page_.setup;
        for (const Process& p : setup.processes) {
            std::vector<std::string> flags;
            for (std::string f : p.flags) {
                replace_all(f, "{dir}", dir_.path());
                flags.push_back(rewrite(f));
            }
            const std::string err = dir_.path() + "/" + p.name + ".err";
            uint16_t port = 0;
            if (p.kind == Process::Kind::node) {
                const std::string data = dir_.path() + "/" + p.name;
                nodes_.push_back(std::make_unique<NodeProcess>(data, flags, err, FENEC_NODE_BIN));
                port = nodes_.back()->port();
            } else {
                if (p.flag_value("--directory").empty()) {
                    flags.insert(flags.begin(),
                                 {"--directory", dir_.path() + "/" + p.name + ".fenec"});
                }
                routers_.push_back(std::make_unique<RouterProcess>(flags, err));
                port = routers_.back()->port();
            }
            if (port == 0) {
                fail(p.line, "process " + p.name + " did not start: " + read_file(err));
                return false;
            }
            ports_[p.name] = port;
            words_.emplace_back(p.port, std::to_string(port));
        }
        if (!setup.sh_ports.empty()) {
            const std::vector<uint16_t> picked = free_ports(setup.sh_ports.size());
            for (size_t i = 0; i < picked.size(); ++i) {
                words_.emplace_back(setup.sh_ports[i], std::to_string(picked[i]));
            }
        }
        for (const std::string& d : setup.sh_dirs) {
            paths_.emplace_back(d, dir_.path() + "/sh" + d);
        }
        if (!setup.tenant.empty()) {
            const Process* node = setup.process(setup.tenant_node);
            Client c(ports_[node->name]);
            const auto r = c.request("PUT", "/_admin/tenants/" + setup.tenant, {},
                                     bearer(node->flag_value("--admin-token")));
            if (!r || r->status != 201) {
                fail(1, "tenant " + setup.tenant + " was not created on " + node->name + ": " +
                            (r ? std::to_string(r->status) + " " + r->body : "no answer"));
                return false;
            }
        }
        return true;
    }

    // Runs the example at blocks[k]; answers how many blocks after it it took (its answer's).
    size_t example(size_t k) {
        const Block& b = page_.blocks[k];
        const Block* next = k + 1 < page_.blocks.size() ? &page_.blocks[k + 1] : nullptr;
        if (b.lang == "fenecql") return fenecql(b, next);
        if (b.lang == "http") return http(b, next);
        if (b.lang == "sh" && !b.has_arg("no-run")) return sh(b, next);
        if ((b.lang == "json" && !b.arg_value("status").empty()) || b.lang == "http-response" ||
            (b.lang == "text" && b.has_arg("events"))) {
            fail(b.line, "an answer with no example before it (```" + b.lang + ")");
        }
        return 0;
    }

    size_t fenecql(const Block& b, const Block* next) {
        ++report_.fenecql;
        const bool admin = b.has_arg("admin");
        if (b.args.size() > (admin ? 1u : 0u)) {
            fail(b.line, "```fenecql takes `admin` only");
            return 0;
        }
        if (!next || next->lang != "json") {
            fail(b.line, "a ```fenecql block is followed by its ```json answer");
            return 0;
        }
        if (page_.setup.tenant.empty()) {
            fail(b.line, "```fenecql needs `runner: tenant <t> on <node>` in the opening comment");
            return 1;
        }
        const std::string text = rewrite(b.text);
        std::string body;
        json::Writer w(body);
        w.begin_object();
        w.key("query");
        w.string(text);
        std::istringstream lines(text);
        std::string l;
        while (std::getline(lines, l)) {
            l.erase(0, l.find_first_not_of(" \t"));
            if (l.starts_with("-- params:")) {
                w.key("params");
                w.raw(l.substr(10));
            }
        }
        w.end_object();
        const Process* node = page_.setup.process(page_.setup.tenant_node);
        Request req;
        req.method = "POST";
        req.body = body;
        req.headers.emplace_back("Content-Type", "application/json");
        const std::string token = node->flag_value(admin ? "--admin-token" : "--token");
        if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);
        req.target = admin ? "/_admin/tenants/" + page_.setup.tenant + "/query"
                           : "/t/" + page_.setup.tenant + "/query";
        check_json_answer(b, *next, exchange(ports_.at(node->name), req, 0));
        return 1;
    }

    size_t http(const Block& b, const Block* next) {
        ++report_.http;
        std::string target = page_.setup.http_target;
        if (b.args.size() > 1 || (b.args.size() == 1 && !page_.setup.process(b.args[0]))) {
            fail(b.line, "```http takes at most the name of a process of the page");
            return 0;
        }
        if (!b.args.empty()) target = b.args[0];
        if (target.empty() && !page_.setup.processes.empty()) {
            target = page_.setup.processes[0].name;
        }
        if (target.empty()) {
            fail(b.line, "```http needs a process: `runner: node …` or `runner: router …`");
            return 0;
        }
        if (!next || !is_answer(*next) || (next->lang == "text" && !next->has_arg("events"))) {
            fail(b.line,
                 "a ```http block is followed by ```json, ```http-response or ```text events");
            return 0;
        }
        std::string why;
        const std::optional<Request> req = parse_request(rewrite(b.text), why);
        if (!req) {
            fail(b.line, why);
            return 1;
        }
        const std::string expected = rewrite(next->text);
        const bool events = next->lang == "text";
        size_t want = 0;
        if (events) {
            ++report_.events;
            // Events are separated by blank lines; the count is what the page shows.
            std::istringstream in(expected);
            std::string line;
            bool in_event = false;
            while (std::getline(in, line)) {
                if (!line.empty() && !in_event) ++want;
                in_event = !line.empty();
            }
        }
        Exchange x = exchange(ports_.at(target), *req, want);
        const std::string where = req->method + " " + req->target + ": ";
        if (!x.ok) {
            fail(b.line, where + x.why);
        } else if (events != x.stream) {
            fail(b.line,
                 where + (events ? "not a subscription stream: " + std::to_string(x.answer.status) +
                                       " " + x.answer.body.substr(0, 300)
                                 : "a subscription stream, shown as a whole answer"));
        } else if (events) {
            if (auto d = events_differ(expected, x.events)) fail(b.line, where + *d);
        } else if (next->lang == "http-response") {
            if (auto d = response_differs(expected, x.answer)) fail(b.line, where + *d);
        } else {
            check_json_answer(b, *next, x);
        }
        return 1;
    }

    void check_json_answer(const Block& b, const Block& expected, const Exchange& x) {
        const std::string where = first_line(b.text) + ": ";
        if (!x.ok) {
            fail(b.line, where + x.why);
            return;
        }
        const std::string status = expected.arg_value("status");
        const int want = status.empty() ? 200 : std::atoi(status.c_str());
        if (auto d = json_answer_differs(want, rewrite(expected.text), x.answer)) {
            fail(b.line, where + *d);
        }
    }

    size_t sh(const Block& b, const Block* next) {
        ++report_.sh;
        if (!shell_) {
            const std::string cwd = dir_.path() + "/sh";
            std::filesystem::create_directories(cwd + "/build/server");
            std::filesystem::create_directories(cwd + "/build/shard");
            std::filesystem::create_directories(cwd + "/build/tools");
            std::filesystem::create_symlink(FENEC_NODE_BIN, cwd + "/build/server/fenec-node");
            std::filesystem::create_symlink(FENEC_SHARD_BIN, cwd + "/build/shard/fenec-shard");
            std::filesystem::create_symlink(FENEC_CLI_BIN, cwd + "/build/tools/fenec");
            shell_ = std::make_unique<Shell>(cwd, dir_.path() + "/sh.err");
        }
        const std::string script = dir_.path() + "/block-" + std::to_string(b.line) + ".sh";
        std::ofstream(script) << rewrite(b.text) << "\n";
        const Shell::Result r = shell_->run(script, kShellBlockMs);
        const std::string where = first_line(b.text) + ": ";
        const bool has_output = next && ((next->lang == "json" && next->args.empty()) ||
                                         (next->lang == "text" && next->args.empty()));
        if (!r.ok) {
            fail(b.line, where + r.why + (r.out.empty() ? "" : "; its stdout: " + r.out));
            return has_output ? 1 : 0;
        }
        if (!has_output) return 0;
        const std::string expected = rewrite(next->text);
        const auto d = next->lang == "json" ? json_differs(expected, r.out, false)
                                            : text_differs(expected, r.out);
        if (d) fail(b.line, where + *d);
        return 1;
    }

    const Page& page_;
    Report report_;
    TempDir dir_;
    std::vector<std::unique_ptr<NodeProcess>> nodes_;
    std::vector<std::unique_ptr<RouterProcess>> routers_;
    std::unique_ptr<Shell> shell_;
    std::map<std::string, uint16_t> ports_;
    std::vector<std::pair<std::string, std::string>> words_;  // a page's port, the real one
    std::vector<std::pair<std::string, std::string>> paths_;  // a page's folder, the real one
};

}  // namespace

Report run_page(const Page& page) { return PageRun(page).run(); }

}  // namespace fenec::test::docs
