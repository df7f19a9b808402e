// server/node/follower.cc: a followed copy's thread (node-http.md §10.4), the `<t>.follows` side
// file, and the admin routes that start following (§8.7) and promote (§8.6).
#include "server/node/follower.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <filesystem>

#include "engine/format.h"
#include "server/node/handlers.h"
#include "server/node/subscriptions.h"
#include "server/node/test_hooks.h"
#include "server/obs/audit.h"
#include "server/runtime/http.h"

namespace fenec::node {

namespace {

constexpr int64_t backoff_first_ms = 100;   // §10.4
constexpr int64_t backoff_max_ms = 5000;
constexpr size_t head_bytes_max = 64 << 10;
// How long an image's install waits for the copy's holders (requests, subscribers and streams
// told to end) to let it go, as a delete does (§8.1); past it the image is dropped and asked
// again on the next connection.
constexpr int64_t image_wait_ms = 5'000;

// `http://host:port` with no path: host and port, or false.
bool split_from(std::string_view from, std::string& host, uint16_t& port) {
    if (!from.starts_with("http://")) return false;
    std::string_view rest = from.substr(7);
    if (rest.ends_with("/")) rest.remove_suffix(1);
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || rest.find('/') != std::string_view::npos) {
        return false;
    }
    host = std::string(rest.substr(0, colon));
    unsigned p = 0;
    auto [end, ec] = std::from_chars(rest.data() + colon + 1, rest.data() + rest.size(), p);
    if (ec != std::errc() || end != rest.data() + rest.size() || p == 0 || p > 65535) return false;
    port = static_cast<uint16_t>(p);
    return true;
}

bool send_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
}

}  // namespace

// ---- the side file

std::string Replication::follows_path(std::string_view tenant) const {
    return node_.options().data_dir + "/" + std::string(tenant) + ".follows";
}

std::optional<Follows> Replication::read_follows(std::string_view tenant) const {
    FILE* f = std::fopen(follows_path(tenant).c_str(), "rb");
    if (!f) return std::nullopt;
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
    simdjson::dom::parser parser;
    simdjson::padded_string padded(text);
    simdjson::dom::element doc;
    if (parser.parse(padded).get(doc)) return std::nullopt;
    Follows out;
    std::string_view from;
    if (doc["from"].get(from)) return std::nullopt;
    out.from = std::string(from);
    uint64_t told = 0;
    if (!doc["told"].get(told)) out.told = told;
    int64_t stall = 0;
    if (!doc["apply_stall_ms"].get(stall)) out.apply_stall_ms = stall;
    simdjson::dom::object heard;
    if (!doc["heard"].get(heard)) {
        Follows::Heard h;
        std::string_view hist;
        if (!heard["history"].get(hist)) h.history = std::string(hist);
        uint64_t seq = 0;
        if (!heard["seq"].get(seq)) h.seq = seq;
        int64_t at = 0;
        if (!heard["at"].get(at)) h.at_ms = at;
        out.heard = h;
    }
    return out;
}

bool Replication::write_follows(std::string_view tenant, const Follows& f) const {
    std::string body;
    json::Writer w(body);
    w.begin_object();
    w.key("from");
    w.string(f.from);
    w.key("told");
    w.uint64(f.told);
    w.key("heard");
    if (f.heard) {
        w.begin_object();
        w.key("history");
        w.string(f.heard->history);
        w.key("seq");
        w.uint64(f.heard->seq);
        w.key("at");
        w.int64(f.heard->at_ms);
        w.end_object();
    } else {
        w.null();
    }
    w.key("apply_stall_ms");
    w.int64(f.apply_stall_ms);
    w.end_object();
    const std::string path = follows_path(tenant);
    const std::string tmp = path + ".new";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    const bool ok = ::write(fd, body.data(), body.size()) == ssize_t(body.size()) &&
                    ::fsync(fd) == 0;
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) return false;
    const int dfd = ::open(node_.options().data_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
    return true;
}

// ---- the follower's thread

Follower::Follower(Replication& replication, std::string tenant, Follows follows)
    : repl_(replication), tenant_(std::move(tenant)), follows_(std::move(follows)) {}

Follower::~Follower() { stop(); }

void Follower::begin() {
    thread_ = std::thread([this] { run(); });
}

void Follower::stop() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
        if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
    }
    cv_.notify_all();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

bool Follower::sleep_ms(int64_t ms) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stop_; });
    return !stop_;
}

bool Follower::wait_heard(int64_t ms, std::string& error) {
    std::unique_lock lock(mu_);
    const uint64_t failed_before = attempts_failed_;
    cv_.wait_for(lock, std::chrono::milliseconds(ms),
                 [&] { return follows_.heard || attempts_failed_ != failed_before || stop_; });
    if (follows_.heard) return true;
    error = error_;
    return false;
}

void Follower::write_json(json::Writer& w) const {
    std::lock_guard lock(mu_);
    w.begin_object();
    w.key("from");
    w.string(follows_.from);
    w.key("told");
    w.uint64(follows_.told);
    w.key("heard");
    if (follows_.heard) {
        w.begin_object();
        w.key("history");
        w.string(follows_.heard->history);
        w.key("seq");
        w.uint64(follows_.heard->seq);
        w.key("at");
        w.int64(follows_.heard->at_ms);
        w.end_object();
    } else {
        w.null();
    }
    w.key("connected");
    w.boolean(connected_);
    const uint64_t have = held_ ? held_->db().seq().v : 0;
    w.key("behind");
    w.uint64(primary_seq_ > have ? primary_seq_ - have : 0);
    w.key("last_contact_ms");
    if (last_contact_ms_) {
        w.int64(last_contact_ms_);
    } else {
        w.null();
    }
    w.key("images");
    w.uint64(images_.load());
    w.key("reconnects");
    w.uint64(reconnects_.load());
    w.key("error");
    if (error_.empty()) {
        w.null();
    } else {
        w.string(error_);
    }
    w.end_object();
}

void Follower::run() {
    int64_t backoff = backoff_first_ms;
    for (;;) {
        std::string error;
        const bool heard = session(error);
        {
            std::lock_guard lock(mu_);
            connected_ = false;
            if (!error.empty()) error_ = error;
            if (!heard) ++attempts_failed_;
            if (fd_ >= 0) ::close(fd_);
            fd_ = -1;
            if (image_fd_ >= 0) ::close(image_fd_);
            image_fd_ = -1;
            if (stop_) break;
        }
        cv_.notify_all();
        ++reconnects_;
        if (heard) backoff = backoff_first_ms;
        if (!sleep_ms(backoff)) break;
        backoff = std::min(backoff * 2, backoff_max_ms);
    }
    std::lock_guard lock(mu_);
    held_.reset();
}

// One connection: connect, ask from this copy's position, apply frames until it ends. True when
// a hello was heard on it.
bool Follower::session(std::string& error) {
    std::string host;
    uint16_t port = 0;
    if (!split_from(follows_.from, host, port)) {
        error = follows_.from + ": not http://host:port";
        return false;
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) {
        error = follows_.from + ": the host does not resolve";
        return false;
    }
    const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    {
        std::lock_guard lock(mu_);
        if (stop_ || fd < 0) {
            if (fd >= 0) ::close(fd);
            ::freeaddrinfo(res);
            return false;
        }
        fd_ = fd;
    }
    int rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
    ::freeaddrinfo(res);
    if (rc != 0 && errno == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        rc = ::poll(&p, 1, static_cast<int>(repl_.node().options().upstream_timeout_s * 1000)) == 1 ? 0 : -1;
        int so = 0;
        socklen_t len = sizeof so;
        if (rc == 0 && (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len) != 0 || so != 0)) rc = -1;
    }
    if (rc != 0) {
        error = follows_.from + ": not reached";
        return false;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    timeval tv{static_cast<time_t>(repl_.node().options().upstream_timeout_s), 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (!held_) {
        Acquired a = repl_.node().registry().acquire(tenant_);
        std::lock_guard lock(mu_);
        held_ = a.tenant;
    }
    std::string target = "/_replication/tenants/" + tenant_;
    if (held_) {
        engine::Database& db = held_->db();
        target += "?since=" + std::to_string(db.seq().v) +
                  "&history=" + engine::format::hex16(db.history().current().v) +
                  "&lineage=" + engine::format::hex16(db.lineage().v);
    }
    std::string req = "GET " + target + " HTTP/1.1\r\nHost: " + host + ":" + std::to_string(port) +
                      "\r\nUser-Agent: fenec-node\r\n";
    if (const auto& tok = repl_.node().options().replication_token) {
        req += "Authorization: Bearer " + *tok + "\r\n";
    }
    req += "\r\n";
    if (!send_all(fd, req)) {
        error = follows_.from + ": not reached";
        return false;
    }
    std::string buf;
    char chunk[64 << 10];
    auto fill = [&]() {
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return false;
        buf.append(chunk, static_cast<size_t>(n));
        return true;
    };
    http::ResponseHead head;
    size_t consumed = 0;
    for (;;) {
        http::ParseError perr;
        const http::ParseStatus ps = http::parse_response_head(buf, head, consumed, perr);
        if (ps == http::ParseStatus::done) break;
        if (ps == http::ParseStatus::error || buf.size() > head_bytes_max) {
            error = follows_.from + ": a bad answer (" + perr.message + ")";
            return false;
        }
        if (!fill()) {
            error = follows_.from + ": closed before answering";
            return false;
        }
    }
    if (head.status != 200) {
        error = follows_.from + ": answered " + std::to_string(head.status);
        return false;
    }
    {
        std::lock_guard lock(mu_);
        connected_ = true;
    }
    buf.erase(0, consumed);
    bool heard = false;
    FrameJoiner joiner;  // `C` pieces of the next `B` payload (a block past the frame bound)
    const uint32_t bound = feed_frame_bound();
    for (;;) {
        Frame f;
        size_t used = 0;
        std::string ferr;
        const FrameRead r = decode_frame(buf, f, used, ferr, bound);
        if (r == FrameRead::bad) {
            error = follows_.from + ": " + ferr;
            return heard;
        }
        if (r == FrameRead::more) {
            if (!fill()) {
                if (error.empty()) error = "";
                return heard;
            }
            continue;
        }
        buf.erase(0, used);
        const FrameJoiner::Step step = joiner.take(f, ferr);
        if (step == FrameJoiner::Step::bad) {
            error = follows_.from + ": " + ferr;
            return heard;
        }
        if (step == FrameJoiner::Step::held) continue;
        if (f.kind == 'H') heard = true;
        if (f.kind == 'E') return heard;
        if (!handle(f, error)) return heard;
        {
            std::lock_guard lock(mu_);
            if (stop_) return heard;
            last_contact_ms_ = repl_.node().now_ms();
            if (heard) error_.clear();
        }
    }
}

// One frame. False drops the connection (the follower asks again from its seq).
bool Follower::handle(const Frame& f, std::string& error) {
    Registry& registry = repl_.node().registry();
    const std::string incoming = registry.path_of(tenant_) + ".incoming";
    switch (f.kind) {
        case 'H': {
            simdjson::dom::parser parser;
            simdjson::padded_string padded(f.payload);
            simdjson::dom::element doc;
            if (parser.parse(padded).get(doc)) {
                error = "a hello that is not JSON";
                return false;
            }
            std::string_view hist;
            uint64_t seq = 0;
            bool image = false;
            if (doc["history"].get(hist) || doc["seq"].get(seq) || doc["image"].get(image)) {
                error = "a hello without history, seq or image";
                return false;
            }
            Follows now;
            {
                std::lock_guard lock(mu_);
                follows_.heard = Follows::Heard{std::string(hist), seq, repl_.node().now_ms()};
                primary_seq_ = seq;
                now = follows_;
            }
            // Remembered across restarts before anything else is done with it (§10.4).
            if (!repl_.write_follows(tenant_, now)) {
                error = "the follows file cannot be written";
                return false;
            }
            cv_.notify_all();
            if (image) {
                image_fd_ = ::open(incoming.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (image_fd_ < 0) {
                    error = "the image's side file cannot be written";
                    return false;
                }
            }
            return true;
        }
        case 'I': {
            if (image_fd_ < 0 || ::write(image_fd_, f.payload.data(), f.payload.size()) !=
                                     ssize_t(f.payload.size())) {
                error = "an image chunk out of place or not written";
                return false;
            }
            return true;
        }
        case 'i': {
            if (image_fd_ < 0) {
                error = "an image end out of place";
                return false;
            }
            ::close(image_fd_);
            image_fd_ = -1;
            std::optional<uint64_t> told_seq;
            {
                simdjson::dom::parser parser;
                simdjson::padded_string padded(f.payload);
                simdjson::dom::element doc;
                uint64_t seq = 0;
                if (!parser.parse(padded).get(doc) && !doc["seq"].get(seq)) told_seq = seq;
            }
            {
                std::lock_guard lock(mu_);
                held_.reset();  // the copy is taken out of service: nothing may hold it
            }
            // One way to put a file in a tenant's place (§11's installing): out of service, its
            // subscribers ended `closing` (§5.4: they reopen and are reseeded), streams served
            // from this copy ended `closing`, held requests woken; the image verified as an
            // install is (§8.3) and renamed over the copy.
            Registry::TakenOut taken = repl_.take_copy_out(tenant_, "closing", image_wait_ms);
            if (!taken.out) {
                ::unlink(incoming.c_str());
                error = "the image does not install: " + taken.message;
                return false;
            }
            engine::ImageInfo info;
            engine::Status st = taken.out->install(
                incoming, engine::InstallMode::replace,
                [&](const engine::ImageInfo& got) {
                    if (told_seq && *told_seq != got.seq.v) {
                        return engine::Status::error(
                            engine::Code::corruption,
                            "the image's seq is " + std::to_string(got.seq.v) +
                                ", its end frame said " + std::to_string(*told_seq));
                    }
                    return engine::Status::ok();
                },
                info);
            taken.out.reset();  // back in service: the next acquire opens the new file
            if (!st.is_ok()) {
                error = "the image does not install: " + st.to_string();
                return false;
            }
            ++images_;
            Acquired a = registry.acquire(tenant_);
            if (!a.tenant) {
                error = a.message;
                return false;
            }
            // The image's history is the primary's, replica = false: this copy now follows it.
            if (engine::Status fs = a.tenant->db().follow(a.tenant->db().history()); !fs.is_ok()) {
                error = fs.to_string();
                return false;
            }
            std::lock_guard lock(mu_);
            held_ = std::move(a.tenant);
            return true;
        }
        case 'B': {
            if (!held_) {
                error = "a block out of place";
                return false;
            }
            engine::Result<engine::FeedEntry> e = decode_block(f.payload);
            if (!e.is_ok()) {
                error = std::string(e.status().message());
                return false;
            }
            test_hooks::stall_apply(follows_.apply_stall_ms);
            if (engine::Status st = held_->db().apply(*e); !st.is_ok()) {
                error = st.to_string();
                return false;
            }
            return true;
        }
        case 'F': {
            if (!held_) {
                error = "forks out of place";
                return false;
            }
            engine::Result<engine::FeedEntry> e = decode_forks(f.payload);
            if (!e.is_ok()) {
                error = std::string(e.status().message());
                return false;
            }
            if (engine::Status st = held_->db().apply(*e); !st.is_ok()) {
                error = st.to_string();
                return false;
            }
            return true;
        }
        case 'K': {
            simdjson::dom::parser parser;
            simdjson::padded_string padded(f.payload);
            simdjson::dom::element doc;
            uint64_t seq = 0;
            if (!parser.parse(padded).get(doc) && !doc["seq"].get(seq)) {
                std::lock_guard lock(mu_);
                primary_seq_ = seq;
            }
            return true;
        }
        default:
            error = std::string("an unknown frame `") + f.kind + "`";
            return false;
    }
}

// ---- Replication: the followers it runs

void Replication::start() {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(node_.options().data_dir, ec)) {
        const std::string file = entry.path().filename().string();
        if (!file.ends_with(".follows")) continue;
        const std::string name = file.substr(0, file.size() - 8);
        if (!valid_tenant_name(name)) continue;
        if (auto f = read_follows(name)) start_follower(name, *f);
    }
}

std::shared_ptr<Follower> Replication::start_follower(const std::string& tenant, const Follows& f) {
    auto follower = std::make_shared<Follower>(*this, tenant, f);
    {
        std::lock_guard lock(mu_);
        followers_[tenant] = follower;
    }
    follower->begin();
    return follower;
}

std::shared_ptr<Follower> Replication::find_follower(std::string_view tenant) const {
    std::lock_guard lock(mu_);
    auto it = followers_.find(tenant);
    return it == followers_.end() ? nullptr : it->second;
}

void Replication::end_follower(std::string_view tenant) {
    std::shared_ptr<Follower> f;
    {
        std::lock_guard lock(mu_);
        auto it = followers_.find(tenant);
        if (it == followers_.end()) return;
        f = it->second;
        followers_.erase(it);
    }
    f->stop();
}

bool Replication::stop_following(std::string_view tenant) {
    if (!find_follower(tenant)) return false;
    end_follower(tenant);
    return true;
}

void Replication::resume_following(std::string_view tenant) {
    if (stopping_ || find_follower(tenant)) return;
    if (auto f = read_follows(tenant)) start_follower(std::string(tenant), *f);
}

bool Replication::following(std::string_view tenant) const { return find_follower(tenant) != nullptr; }

void Replication::write_following(std::string_view tenant, json::Writer& w) const {
    if (auto f = find_follower(tenant)) {
        f->write_json(w);
    } else {
        w.null();
    }
}

}  // namespace fenec::node
