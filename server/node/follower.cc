// server/node/follower.cc: a followed copy's thread (node-http.md §10.4), the `<t>.follows` side
// file, and the admin routes that start following (§8.7) and promote (§8.6).
#include "server/node/follower.h"

#include <simdjson.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <optional>

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
// A promotion's drain of what the primary already sent (Follower::stop): what had reached this
// node's socket as it began is applied whatever it takes; this bounds only what comes after it,
// from a primary that keeps sending.
constexpr int64_t keep_received_ms_max = 1000;
// How long an image's install waits for the copy's holders (requests, subscribers and streams
// told to end) to let it go, as a delete does (§8.1); past it the image is dropped and asked
// again on the next connection.
constexpr int64_t image_wait_ms = 5'000;
// How long a copy latched by a failed write waits for its holders to let it go before it is
// opened again (Follower::run); not had, it is tried again after the next session.
constexpr int64_t reopen_wait_ms = 500;

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

}  // namespace

// ---- the side file

std::string Replication::follows_path(std::string_view tenant) const {
    return node_.options().data_dir + "/" + std::string(tenant) + ".follows";
}

std::optional<Follows> Replication::read_follows(std::string_view tenant) const {
    // Through the node's file system, as it is written (a few hundred bytes; 64 KiB is not one).
    auto read = engine::read_small(node_.fs(), follows_path(tenant), 64 << 10);
    if (!read.is_ok()) return std::nullopt;
    const std::string& text = *read;
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
    if (!doc["install_stall_ms"].get(stall)) out.install_stall_ms = stall;
    if (!doc["received_stall_ms"].get(stall)) out.received_stall_ms = stall;
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
    w.key("install_stall_ms");
    w.int64(f.install_stall_ms);
    w.key("received_stall_ms");
    w.int64(f.received_stall_ms);
    w.end_object();
    // Through the node's file system, the one durable replace: kept whole across a crash, and a
    // failure at any step (the directory's fsync included) is reported, never taken as kept.
    return engine::replace_durably(node_.fs(), follows_path(tenant), body).is_ok();
}

// ---- the follower's thread

Follower::Follower(Replication& replication, std::string tenant, Follows follows)
    : repl_(replication),
      tenant_(std::move(tenant)),
      follows_(std::move(follows)),
      client_(server::BlockingClient::Options{}) {}

Follower::~Follower() { stop(); }

void Follower::begin() {
    thread_ = std::thread([this] { run(); });
}

void Follower::stop(bool keep_received) {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
        if (keep_received) {
            keep_until_ =
                std::chrono::steady_clock::now() + std::chrono::milliseconds(keep_received_ms_max);
            keep_received_ = true;
        }
    }
    cancel_.cancel();
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
        // A copy latched read-only by a failed write (ENOSPC, EIO) refuses every block until it
        // is opened again, and this follower's hold would keep it open for good: it is closed
        // here, so the next session opens it from its file (the open cuts what the failed write
        // left). Its hello resets no backoff, so a disk still full is asked at the backoff's pace.
        bool stopping = false;
        {
            std::lock_guard lock(mu_);
            stopping = stop_;  // a promotion or delete waits on this thread: not held up here
        }
        const bool latched = !stopping && held_ && held_->db().failure().has_value();
        if (latched) {
            {
                std::lock_guard lock(mu_);
                held_.reset();
            }
            // Briefly: a promotion holding the tenant while it joins this thread is not held up
            // (a copy still held is tried again after the next session).
            Registry::TakenOut taken = repl_.take_copy_out(tenant_, "closing", reopen_wait_ms);
            taken.out.reset();  // back in service: the next acquire opens the file again
        }
        {
            std::lock_guard lock(mu_);
            connected_ = false;
            if (!error.empty()) error_ = error;
            if (!heard) ++attempts_failed_;
            image_.reset();
            if (stop_) break;
        }
        cv_.notify_all();
        ++reconnects_;
        if (heard && !latched) backoff = backoff_first_ms;
        if (!sleep_ms(backoff)) break;
        backoff = std::min(backoff * 2, backoff_max_ms);
    }
    std::lock_guard lock(mu_);
    held_.reset();
}

// One connection: connect, ask from this copy's position, apply frames until it ends. True when
// a hello was heard on it.
bool Follower::session(std::string& error) {
    std::unique_ptr<server::Connection> feed = open_feed(error);
    if (!feed) return false;
    {
        std::lock_guard lock(mu_);
        connected_ = true;
    }
    return follow_feed(*feed, error);
}

// GET /_replication/tenants/<t> from this copy's position (its seq, history and lineage, when it
// holds the tenant), up to a 200's head: the feed, left to read as it comes.
std::unique_ptr<server::Connection> Follower::open_feed(std::string& error) {
    std::string host;
    uint16_t port = 0;
    if (!split_from(follows_.from, host, port)) {
        error = follows_.from + ": not http://host:port";
        return nullptr;
    }
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
    server::CallRequest r;
    r.peer = follows_.from;
    r.peer_text = "the primary";
    r.about = tenant_;
    r.addr = host + ":" + std::to_string(port);
    r.resend_after_sent = true;  // a GET
    r.allow_stream = true;
    r.timeout_ms = repl_.node().options().upstream_timeout_s * 1000;
    http::OutRequest get{.method = "GET", .target = target, .host = r.addr};
    std::string bearer;
    get.headers.push_back({"User-Agent", "fenec-node"});
    if (const auto& tok = repl_.node().options().replication_token) {
        bearer = "Bearer " + *tok;
        get.headers.push_back({"Authorization", bearer});
    }
    http::write_request(get, r.bytes);
    server::BlockingClient::Opened opened = client_.open(r, {.cancel = &cancel_});
    if (!opened.head) {
        error = follows_.from + ": " + opened.error.message;
        return nullptr;
    }
    if (opened.head->status != 200) {
        error = follows_.from + ": answered " + std::to_string(opened.head->status);
        return nullptr;
    }
    return std::move(opened.connection);
}

// The feed's frames applied as they come, each read bounded by --upstream-timeout (the primary
// sends keep-alives), until it ends, fails, stops, or a frame is refused. True when a hello was
// heard.
bool Follower::follow_feed(server::Connection& feed, std::string& error) {
    const uint64_t read_ms = repl_.node().options().upstream_timeout_s * 1000;
    std::string buf;
    bool heard = false;
    FrameJoiner joiner;  // `C` pieces of the next `B` payload (a block past the frame bound)
    const uint32_t bound = feed_frame_bound();
    uint64_t taken = 0;  // the stream's bytes decoded so far
    // Stopped for a promotion: the stream's byte count that ends what had reached this node's
    // socket when the drain began. All of it is applied however long that takes (INVARIANTS
    // R22); what comes after it only within keep_received_ms_max.
    std::optional<uint64_t> owed_to;
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
            // Stopped for a promotion (Follower::stop): what has arrived, and where a block is
            // part-way in (its rest still on the wire, or in the primary's send queue behind this
            // node's full receive window), its rest up to keep_received_ms_max (R22). Between
            // blocks, an empty socket ends it: a primary cut off sends nothing more.
            if (keep_received_) {
                uint64_t wait_ms = 0;
                if (!buf.empty() || joiner.held_bytes() > 0) {
                    std::lock_guard lock(mu_);
                    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        keep_until_ - std::chrono::steady_clock::now());
                    wait_ms = static_cast<uint64_t>(std::max<int64_t>(0, left.count()));
                }
                if (feed.read_now(buf, wait_ms) != server::Connection::Read::data) return heard;
                continue;
            }
            const server::Connection::Read got = feed.read_some(buf, read_ms);
            if (got == server::Connection::Read::data) continue;
            if (got == server::Connection::Read::cancelled && keep_received_) continue;
            return heard;
        }
        buf.erase(0, used);
        taken += used;
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
            if (stop_) {
                if (!keep_received_) return heard;
                if (!owed_to) owed_to = taken + buf.size() + feed.received_unread();
                if (taken >= *owed_to && std::chrono::steady_clock::now() > keep_until_) {
                    return heard;
                }
            }
            last_contact_ms_ = repl_.node().now_ms();
            if (heard) error_.clear();
        }
    }
}

void Follower::drop_image() {
    image_.reset();
    // The side file is nobody's: a failed removal leaves it to be emptied by the next image.
    (void)repl_.node().fs().remove(repl_.node().registry().path_of(tenant_) + ".incoming");
}

// One frame. False drops the connection (the follower asks again from its seq).
bool Follower::handle(const Frame& f, std::string& error) {
    switch (f.kind) {
        case 'H':
            return on_hello(f, error);
        case 'I': {
            if (!image_) {
                error = "an image chunk out of place";
                return false;
            }
            // Bounded as an image put by hand is (--max-image): the side file is on the disk
            // every tenant shares, and the install reads it whole.
            image_bytes_ += f.payload.size();
            if (image_bytes_ > repl_.node().options().max_image_mib << 20) {
                drop_image();
                error = "an image past --max-image (" +
                        std::to_string(repl_.node().options().max_image_mib) + " MiB)";
                return false;
            }
            const auto* bytes = reinterpret_cast<const std::byte*>(f.payload.data());
            if (engine::Status st = image_->append({bytes, f.payload.size()}); !st.is_ok()) {
                error = "an image chunk not written: " + st.to_string();
                return false;
            }
            XXH3_64bits_update(image_hash_.get(), f.payload.data(), f.payload.size());
            return true;
        }
        case 'i':
            return on_image_end(f, error);
        case 'B':
        case 'F':
            return on_entry(f, error);
        case 'K': {
            if (const std::optional<uint64_t> seq = replication::parse_keepalive(f.payload)) {
                std::lock_guard lock(mu_);
                primary_seq_ = *seq;
            }
            return true;
        }
        default:
            error = std::string("an unknown frame `") + f.kind + "`";
            return false;
    }
}

// The hello: remembered (in `<t>.follows`, before anything else is done with it), and an image
// announced opens its side file.
bool Follower::on_hello(const Frame& f, std::string& error) {
    const std::string incoming = repl_.node().registry().path_of(tenant_) + ".incoming";
    const std::optional<replication::Hello> hello = replication::parse_hello(f.payload, error);
    if (!hello) return false;
    if (!hello->history) {
        error = "a hello without history";
        return false;
    }
    const bool image = hello->image;
    Follows now;
    {
        std::lock_guard lock(mu_);
        follows_.heard = Follows::Heard{*hello->history, hello->seq, repl_.node().now_ms()};
        primary_seq_ = hello->seq;
        now = follows_;
    }
    // Remembered across restarts before anything else is done with it (§10.4).
    if (!repl_.write_follows(tenant_, now)) {
        error = "the follows file cannot be written";
        return false;
    }
    cv_.notify_all();
    if (image) {
        // Through the Fs seam as every file the node writes, so it is created 0600 (item 8) and
        // the fault-injecting double reaches it.
        auto opened = repl_.node().fs().open(incoming, engine::OpenMode::create_truncate);
        if (!opened.is_ok()) {
            error = "the image's side file cannot be written: " + opened.status().to_string();
            return false;
        }
        image_ = std::move(opened).value();
        image_bytes_ = 0;
        image_hash_.reset(XXH3_createState(), XXH3_freeState);
        XXH3_64bits_reset(image_hash_.get());
    }
    return true;
}

// The image's end: installed in the copy's place, and followed from its history on.
bool Follower::on_image_end(const Frame& f, std::string& error) {
    test_hooks::stall_install(follows_.received_stall_ms);  // received whole, not yet installed
    Registry& registry = repl_.node().registry();
    const std::string incoming = registry.path_of(tenant_) + ".incoming";
    if (!image_) {
        error = "an image end out of place";
        return false;
    }
    image_.reset();
    // The end frame says the image's seq, bytes and digest (§10.2): an image that arrived other
    // than it says is not installed.
    std::optional<uint64_t> told_seq;
    {
        const std::optional<replication::ImageEnd> end =
            replication::parse_image_end(f.payload, error);
        if (!end || !end->bytes || !end->digest) {
            drop_image();
            if (end) error = "an image end without bytes or digest";
            return false;
        }
        const std::string got = engine::format::hex16(XXH3_64bits_digest(image_hash_.get()));
        if (*end->bytes != image_bytes_ || *end->digest != got) {
            drop_image();
            error = "an image that arrived as " + std::to_string(image_bytes_) +
                    " bytes of digest " + got + ", its end frame said " +
                    std::to_string(*end->bytes) + " bytes of digest " + *end->digest;
            return false;
        }
        told_seq = end->seq;
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
        // The side file is nobody's: a failed removal leaves it to be emptied by the next image.
        (void)repl_.node().fs().remove(incoming);
        error = "the image does not install: " + taken.message;
        return false;
    }
    test_hooks::stall_install(follows_.install_stall_ms);
    engine::ImageInfo info;
    engine::Status st = taken.out->install(
        incoming, engine::InstallMode::replace,
        [&](const engine::ImageInfo& got) {
            if (told_seq && *told_seq != got.seq.v) {
                return engine::Status::error(engine::Code::corruption,
                                             "the image's seq is " + std::to_string(got.seq.v) +
                                                 ", its end frame said " +
                                                 std::to_string(*told_seq));
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

// A block (`B`) or the forks (`F`) of the primary, applied to the held copy.
bool Follower::on_entry(const Frame& f, std::string& error) {
    if (!held_) {
        error = f.kind == 'B' ? "a block out of place" : "forks out of place";
        return false;
    }
    engine::Result<engine::FeedEntry> e =
        f.kind == 'B' ? decode_block(f.payload) : decode_forks(f.payload);
    if (!e.is_ok()) {
        error = std::string(e.status().message());
        return false;
    }
    if (f.kind == 'B') test_hooks::stall_apply(follows_.apply_stall_ms);
    if (engine::Status st = held_->db().apply(*e); !st.is_ok()) {
        error = st.to_string();
        return false;
    }
    return true;
}

// ---- Replication: the followers it runs

engine::Status Replication::start() {
    auto files = node_.fs().list(node_.options().data_dir);
    if (!files.is_ok()) return files.status();
    for (const std::string& file : *files) {
        if (!file.ends_with(".follows")) continue;
        const std::string name = file.substr(0, file.size() - 8);
        if (!valid_tenant_name(name)) continue;
        if (auto f = read_follows(name)) start_follower(name, *f);
    }
    return engine::Status::ok();
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

void Replication::end_follower(std::string_view tenant, bool keep_received) {
    std::shared_ptr<Follower> f;
    {
        std::lock_guard lock(mu_);
        auto it = followers_.find(tenant);
        if (it == followers_.end()) return;
        f = it->second;
        followers_.erase(it);
    }
    f->stop(keep_received);
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
