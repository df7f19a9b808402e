// shard/standby.cc: a standby router's follower of its primary's directory (router.md §10,
// shard/standby.h), and the router's `/_replication` routes: the feed served (directory_feed.cc),
// the status, and promotion.
#include "shard/standby.h"

#include <openssl/crypto.h>
#include <simdjson.h>

#include <charconv>
#include <cstdio>
#include <thread>
#include <vector>

#include "engine/format.h"
#include "shard/global_copy.h"
#include "shard/log_line.h"
#include "shard/move.h"
#include "shard/node_calls.h"
#include "shard/routes.h"
#include "shard/test_hooks.h"

namespace fenec::shard {

namespace {

// `{"<node>":"<token>",…}`, or none when the body is not such an object.
std::optional<TokenSidecar::Tokens> tokens_of(const std::string& body) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(body);
    simdjson::dom::object o;
    if (parser.parse(padded).get(o)) return std::nullopt;
    TokenSidecar::Tokens tokens;
    for (auto field : o) {
        std::string_view v;
        if (field.value.get(v)) return std::nullopt;
        tokens[std::string(field.key)] = std::string(v);
    }
    return tokens;
}

}  // namespace

// ---- the follower

DirectoryFollower::DirectoryFollower(Directory& directory, Options options,
                                     const engine::Clock& clock)
    : directory_(directory),
      options_(std::move(options)),
      clock_(clock),
      client_(server::BlockingClient::Options{}) {}

DirectoryFollower::~DirectoryFollower() { stop(); }

void DirectoryFollower::on_failover(std::function<void(const std::vector<FailedOver>&)> fn) {
    on_failover_ = std::move(fn);
}

void DirectoryFollower::start() {
    thread_ = std::thread([this] { run(); });
}

void DirectoryFollower::stop() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    cancel_.cancel();
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

bool DirectoryFollower::sleep_ms(int64_t ms) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stop_; });
    return !stop_;
}

std::string DirectoryFollower::current() const {
    std::lock_guard lock(mu_);
    return options_.primaries.empty() ? std::string() : options_.primaries[at_];
}

void DirectoryFollower::run() {
    int64_t backoff = standby_backoff_first_ms;
    for (;;) {
        const std::string followed = current();
        std::string error;
        bool heard = session(error);
        bool next_in_round = false;
        {
            std::lock_guard lock(mu_);
            // An image refused (another scope's directory) is no primary heard: asked again at
            // once it would be refused again.
            if (!refused_.empty()) heard = false;
            connected_ = false;
            in_image_ = false;
            image_.clear();
            image_.shrink_to_fit();
            if (!error.empty()) error_ = error;
            if (stop_) return;
            // Not heard: the next URL, at once while the round lasts; the backoff between rounds.
            if (!heard && options_.primaries.size() > 1) {
                at_ = (at_ + 1) % options_.primaries.size();
                next_in_round = at_ != 0;
            }
        }
        if (!error.empty()) log_line(options_.what + " " + followed + ": " + error);
        ++reconnects_;
        if (heard) backoff = standby_backoff_first_ms;
        if (next_in_round) continue;
        if (!sleep_ms(backoff)) return;
        backoff = std::min(backoff * 2, standby_backoff_max_ms);
    }
}

// One connection: asked from the file's position, frames applied until it ends. True when a
// hello was heard on it.
bool DirectoryFollower::session(std::string& error) {
    std::unique_ptr<server::Connection> feed = open_feed(error);
    if (!feed) return false;
    {
        std::lock_guard lock(mu_);
        connected_ = true;
    }
    return follow_feed(*feed, error);
}

// GET /_replication from the file's position (none yet: an image), up to a 200's head.
std::unique_ptr<server::Connection> DirectoryFollower::open_feed(std::string& error) {
    const std::string primary = current();
    const std::string addr = replica_addr(primary);
    if (addr.empty()) {
        error = primary + ": not http://host:port";
        return nullptr;
    }
    std::string target = "/_replication";
    if (std::optional<engine::Position> at = directory_.position()) {
        target += "?since=" + std::to_string(at->seq.v) +
                  "&history=" + engine::format::hex16(at->history.v);
    }
    server::CallRequest r;
    r.peer = primary;
    r.peer_text = "the primary router";
    r.addr = addr;
    r.resend_after_sent = true;  // a GET
    r.allow_stream = true;
    r.timeout_ms = options_.timeout_ms;
    http::OutRequest get{.method = "GET", .target = target, .host = addr};
    const std::string bearer = "Bearer " + options_.token;
    get.headers.push_back({"User-Agent", "fenec-shard"});
    get.headers.push_back({"Authorization", bearer});
    http::write_request(get, r.bytes);
    server::BlockingClient::Opened opened = client_.open(r, {.cancel = &cancel_});
    if (!opened.head) {
        error = primary + ": " + opened.error.message;
        return nullptr;
    }
    if (opened.head->status != 200) {
        error = primary + ": answered " + std::to_string(opened.head->status) + " " +
                opened.head->body;
        return nullptr;
    }
    return std::move(opened.connection);
}

// The frames applied as they come, each read bounded by the timeout (the primary sends
// keep-alives), until the feed ends, fails, stops, or a frame is refused.
bool DirectoryFollower::follow_feed(server::Connection& feed, std::string& error) {
    std::string buf;
    bool heard = false;
    replication::FrameJoiner joiner;
    for (;;) {
        replication::Frame f;
        size_t used = 0;
        std::string ferr;
        const replication::FrameRead r = replication::decode_frame(buf, f, used, ferr);
        if (r == replication::FrameRead::bad) {
            error = ferr;
            return heard;
        }
        if (r == replication::FrameRead::more) {
            // Caught up with what came: the tokens of the changes applied, fetched once for them.
            if (tokens_due_) fetch_tokens();
            if (feed.read_some(buf, options_.timeout_ms) != server::Connection::Read::data) {
                return heard;
            }
            continue;
        }
        buf.erase(0, used);
        const replication::FrameJoiner::Step step = joiner.take(f, ferr);
        if (step == replication::FrameJoiner::Step::bad) {
            error = ferr;
            return heard;
        }
        if (step == replication::FrameJoiner::Step::held) continue;
        if (f.kind == 'H') heard = true;
        if (f.kind == 'E') return heard;
        if (!handle(f, error)) return heard;
        std::lock_guard lock(mu_);
        if (stop_) return heard;
        last_contact_ms_ = clock_.wall_ms();
        if (heard) error_.clear();
    }
}

bool DirectoryFollower::handle(replication::Frame& f, std::string& error) {
    switch (f.kind) {
        case 'H': {
            const std::optional<replication::Hello> hello =
                replication::parse_hello(f.payload, error);
            if (!hello) return false;
            std::lock_guard lock(mu_);
            primary_seq_ = hello->seq;
            in_image_ = hello->image;
            image_.clear();
            return true;
        }
        case 'I': {
            std::lock_guard lock(mu_);
            if (!in_image_ || image_.size() + f.payload.size() > standby_image_bytes_max) {
                error = "an image chunk out of place, or an image over its bound";
                return false;
            }
            image_.append(f.payload);
            return true;
        }
        case 'i':
            return on_image_end(f, error);
        case 'B':
        case 'F':
            return on_entry(f, error);
        case 'K': {
            const std::optional<uint64_t> seq = replication::parse_keepalive(f.payload);
            std::lock_guard lock(mu_);
            primary_seq_ = seq.value_or(primary_seq_);
            return true;
        }
        default:
            error = std::string("an unknown frame `") + f.kind + "`";
            return false;
    }
}

// The image's end: the whole image put in the file's place, the maps rebuilt from it.
bool DirectoryFollower::on_image_end(const replication::Frame& f, std::string& error) {
    std::string image;
    {
        std::lock_guard lock(mu_);
        if (!in_image_) {
            error = "an image end out of place";
            return false;
        }
        image.swap(image_);
        in_image_ = false;
    }
    const std::optional<replication::ImageEnd> end = replication::parse_image_end(f.payload, error);
    if (!end) return false;
    // An image that arrived other than its end says is not installed (as a node's copy's).
    const std::string got = engine::format::hex16(replication::image_digest(image));
    if ((end->bytes && *end->bytes != image.size()) || (end->digest && *end->digest != got)) {
        error = "an image that arrived as " + std::to_string(image.size()) + " bytes of digest " +
                got + ", its end frame said " +
                (end->bytes ? std::to_string(*end->bytes) : std::string("no")) +
                " bytes of digest " + end->digest.value_or("none");
        std::lock_guard lock(mu_);
        refused_ = error;
        return false;
    }
    auto before = directory_.maps();
    const engine::Status st = directory_.adopt_image(
        {reinterpret_cast<const std::byte*>(image.data()), image.size()}, end->seq);
    if (!st.is_ok()) {
        error = "the image does not install: " + st.to_string();
        std::lock_guard lock(mu_);
        refused_ = error;
        return false;
    }
    {
        std::lock_guard lock(mu_);
        refused_.clear();
    }
    ++images_;
    tokens_due_ = true;
    changed(*before);
    return true;
}

// A block (`B`) or the forks (`F`), applied to the file; the maps rebuilt from it.
bool DirectoryFollower::on_entry(const replication::Frame& f, std::string& error) {
    engine::Result<engine::FeedEntry> e =
        f.kind == 'B' ? replication::decode_block(f.payload) : replication::decode_forks(f.payload);
    if (!e.is_ok()) {
        error = std::string(e.status().message());
        return false;
    }
    auto before = directory_.maps();
    if (engine::Status st = directory_.apply(*e); !st.is_ok()) {
        error = st.to_string();
        return false;
    }
    tokens_due_ = true;
    changed(*before);
    return true;
}

// GET /_replication/tokens from the primary into this router's own sidecar. A failure is said
// and asked again at the next pause in the feed, a second at least after this one; a primary
// from before the route (404) keeps the tokens in its rows, which the file brings.
void DirectoryFollower::fetch_tokens() {
    if (tokens_tried_ms_ == 0) test_hooks::stall_first_tokens();
    const int64_t now_ms = clock_.wall_ms();
    if (now_ms - tokens_tried_ms_ < standby_tokens_retry_ms) return;
    tokens_tried_ms_ = now_ms;
    const std::string primary = current();
    const std::string addr = replica_addr(primary);
    server::CallRequest r;
    r.peer = primary;
    r.peer_text = "the primary router";
    r.addr = addr;
    r.resend_after_sent = true;  // a GET
    r.timeout_ms = options_.timeout_ms;
    http::OutRequest get{.method = "GET", .target = "/_replication/tokens", .host = addr};
    const std::string bearer = "Bearer " + options_.token;
    get.headers.push_back({"User-Agent", "fenec-shard"});
    get.headers.push_back({"Authorization", bearer});
    http::write_request(get, r.bytes);
    const server::CallResult got = client_.call(r, {.cancel = &cancel_});
    std::string why;
    if (!got.answer) {
        why = got.error.message;
    } else if (got.answer->status == 404) {
        tokens_due_ = false;
        directory_.settle_tokens();
        return;
    } else if (got.answer->status != 200) {
        why = "answered " + std::to_string(got.answer->status) + " " + got.answer->body;
    } else if (std::optional<TokenSidecar::Tokens> tokens = tokens_of(got.answer->body); !tokens) {
        why = "the tokens are not a JSON object of strings";
    } else if (engine::Status st = directory_.take_tokens(*tokens); !st.is_ok()) {
        why = "the tokens could not be kept: " + st.to_string();
    }
    if (!why.empty()) {
        log_line("the nodes' tokens from " + primary + ": " + why);
        return;
    }
    tokens_due_ = false;
}

// §9.12: the tenants whose rows now name a failover they did not before.
void DirectoryFollower::changed(const DirectoryMaps& before) {
    if (!on_failover_) return;
    auto after = directory_.maps();
    std::vector<FailedOver> failed;
    for (const auto& [name, t] : after->tenants) {
        if (t.failed_from.empty()) continue;
        auto was = before.tenants.find(name);
        if (was != before.tenants.end() && was->second.failed_from == t.failed_from &&
            was->second.node == t.node) {
            continue;
        }
        failed.push_back(FailedOver{name, t.node, t.failed_from});
    }
    if (!failed.empty()) on_failover_(failed);
}

std::string DirectoryFollower::refused() const {
    std::lock_guard lock(mu_);
    return refused_;
}

void DirectoryFollower::write_json(json::Writer& w) const {
    std::optional<engine::Position> at = directory_.position();
    std::lock_guard lock(mu_);
    const uint64_t seq = at ? at->seq.v : 0;
    w.begin_object();
    w.key("primary");
    w.string(options_.primaries.empty() ? std::string() : options_.primaries[at_]);
    w.key("connected");
    w.boolean(connected_);
    w.key("primary_seq");
    w.uint64(primary_seq_);
    w.key("behind");
    w.uint64(primary_seq_ > seq ? primary_seq_ - seq : 0);
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

}  // namespace fenec::shard

// ---- the router's part

namespace fenec::shard {

namespace {

// `?since=<seq>&history=<16 hex>`: each absent or well formed; `bad` names the one that is not.
bool feed_position(const http::RequestHead& h, std::optional<uint64_t>& since,
                   std::optional<uint64_t>& history, std::string& bad) {
    if (const std::string* v = h.query_value("since"); v && !v->empty()) {
        uint64_t n = 0;
        auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
        if (ec != std::errc() || p != v->data() + v->size()) {
            bad = "`since` must be a seq";
            return false;
        }
        since = n;
    }
    if (const std::string* v = h.query_value("history"); v && !v->empty()) {
        history = engine::format::parse_hex16(*v);
        if (!history) {
            bad = "`history` must be 16 hex";
            return false;
        }
    }
    return true;
}

}  // namespace

Standby::Standby(Router& router)
    : router_(router), primary_(router.options().replica_of.value_or("")) {
    const RouterOptions& o = router.options();
    if (o.replication_token) {
        feed_ = std::make_unique<DirectoryFeed>(router.directory(), router.clock(), o.listen);
    }
    make_follower();
}

void Standby::make_follower() {
    const RouterOptions& o = router_.options();
    if (primary_.empty() || !o.replication_token) return;
    follower_ = std::make_unique<DirectoryFollower>(
        router_.directory(),
        DirectoryFollower::Options{{primary_}, *o.replication_token, o.upstream_timeout_ms},
        router_.clock());
    if (on_failover_) follower_->on_failover(on_failover_);
}

Standby::~Standby() { stop(); }

void Standby::on_failover(std::function<void(const std::vector<FailedOver>&)> fn) {
    on_failover_ = std::move(fn);
    if (follower_) follower_->on_failover(on_failover_);
}

void Standby::start() {
    if (follower_ && following()) follower_->start();
}

void Standby::stop() {
    if (follower_) follower_->stop();
    if (feed_) feed_->stop();
}

bool Standby::following() const { return router_.directory().following(); }

void Standby::wait_for_standbys(int64_t bound_ms) {
    if (!feed_ || following()) return;
    feed_->wait_sent(std::nullopt, bound_ms);
}

std::optional<http::Response> Standby::check_token(const server::Request& request) const {
    const std::string& token = *router_.options().replication_token;
    const auto auth = request.head.header("Authorization");
    std::string_view value;
    if (auth && auth->size() > 7 && http::iequals(auth->substr(0, 7), "Bearer ")) {
        value = auth->substr(7);
    }
    if (value.size() == token.size() &&
        CRYPTO_memcmp(value.data(), token.data(), token.size()) == 0) {
        return std::nullopt;
    }
    http::Response r = Router::error(
        401, value.empty() ? "/_replication needs the replication token: Authorization: Bearer "
                             "<token>"
                           : "the token is not the router's --replication-token");
    r.header("WWW-Authenticate", "Bearer");
    return r;
}

void Standby::serve(server::Request request, std::shared_ptr<server::Exchange> exchange,
                    const Router::Answering& a,
                    const std::function<bool(std::function<void()>)>& submit) {
    const http::RequestHead& h = request.head;
    if (!feed_) {
        return router_.answer(*exchange, a,
                              Router::error(404, "no route " + h.path +
                                                     ": this router serves no directory feed "
                                                     "(start it with --replication-token)"));
    }
    if (std::optional<http::Response> refuse = check_token(request)) {
        router_.audit_refused(request, a.request_id);
        auto r = std::make_shared<http::Response>(std::move(*refuse));
        return router_.after_refusal(
            request.peer, [this, exchange, a, r] { router_.answer(*exchange, a, std::move(*r)); });
    }
    router_.accepted(request.peer);
    const ShardRoute* row = find_shard_route(h.path);
    if (!row || row->plane != ShardPlane::replication) {
        return router_.answer(
            *exchange, a,
            Router::error(404, "no route " + h.path +
                                   ": /_replication serves the feed, /status, /tokens and "
                                   "/promote"));
    }
    if (auto r = method_refusal(h)) return router_.answer(*exchange, a, std::move(*r));
    if (router_.is_superseded() && row->id != ShardRouteId::status) {
        // No feed, tokens or promotion from a directory no longer the primary's.
        return router_.answer(*exchange, a, router_.refused_superseded(503));
    }
    switch (row->id) {
        case ShardRouteId::status:
            return router_.answer(*exchange, a, status());
        case ShardRouteId::tokens:
            return router_.answer(*exchange, a, tokens());
        case ShardRouteId::promote: {
            auto req = std::make_shared<server::Request>(std::move(request));
            if (!submit([this, req, exchange, a] { router_.answer(*exchange, a, promote(*req, a)); })) {
                http::Response r = Router::error(503, "the router's API queue is full");
                r.header("Retry-After", "1");
                router_.answer(*exchange, a, std::move(r));
            }
            return;
        }
        default:
            break;  // the feed, below
    }
    if (following()) {
        // A standby serves no feed: its file changes only by its primary's, whose feed to follow.
        http::Response r =
            Router::error(409, "this router follows " + primary_ + ": follow the directory there");
        return router_.answer(*exchange, a, std::move(r));
    }
    std::optional<uint64_t> since, history;
    std::string bad;
    if (!feed_position(h, since, history, bad)) {
        return router_.answer(*exchange, a, Router::error(400, bad));
    }
    http::Response head;
    head.stream = true;
    head.close = true;
    head.content_type = "application/x-fenec-feed";
    head.header("X-Request-Id", a.request_id);
    router_.count(a, 200);
    feed_->serve(std::move(exchange), std::move(head), since, history, std::string(request.peer));
}

// The nodes' tokens given in the clear, for the standbys (shard/node_tokens.h): they are not in
// the directory's feed. A standby has only its primary's copy, and serves none.
http::Response Standby::tokens() const {
    if (following()) {
        return Router::error(409, "this router follows " + primary_ + ": ask the tokens there");
    }
    http::Response r;
    r.header("Cache-Control", "no-store");
    json::Writer w(r.body);
    w.begin_object();
    for (const auto& [node, token] : router_.directory().clear_tokens()) {
        w.key(node);
        w.string(token);
    }
    w.end_object();
    return r;
}

void Standby::superseded() {
    if (feed_) feed_->stop();
}

http::Response Standby::status() const {
    Directory& d = router_.directory();
    auto maps = d.maps();
    const std::optional<engine::Position> at = d.position();
    http::Response r;
    json::Writer w(r.body);
    w.begin_object();
    w.key("role");
    w.string(following() ? "standby" : router_.is_superseded() ? "superseded" : "primary");
    w.key("scope");
    w.string(scope_of(router_.options()));
    w.key("term");
    w.int64(maps->term);
    w.key("position");
    if (at) {
        w.begin_object();
        w.key("seq");
        w.uint64(at->seq.v);
        w.key("history");
        w.string(engine::format::hex16(at->history.v));
        w.end_object();
    } else {
        w.null();
    }
    if (const GlobalCopy* global = router_.global_copy()) {
        w.key("global");
        global->write_json(w);
    }
    if (following()) {
        w.key("following");
        if (follower_) {
            follower_->write_json(w);
        } else {
            w.null();
        }
    } else {
        w.key("followers");
        if (feed_) {
            feed_->write_followers(w);
        } else {
            w.begin_array();
            w.end_array();
        }
    }
    w.end_object();
    return r;
}

std::string Standby::superseded_at_nodes() const {
    const auto maps = router_.directory().maps();
    const std::string authority = maps->authority();
    std::vector<const NodeRow*> nodes;
    for (const auto& [name, row] : maps->nodes) nodes.push_back(&row);
    std::vector<LeaseHolderReply> said(nodes.size());
    // A node at a time would make a start wait a second for each node down: all at once, in
    // batches (each call blocks a thread), each within a second.
    constexpr size_t batch = 32;
    for (size_t from = 0; from < nodes.size(); from += batch) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        std::vector<std::thread> asks;
        for (size_t i = from; i < std::min(nodes.size(), from + batch); ++i) {
            asks.emplace_back([&, i] {
                said[i] = router_.node_calls().lease_holder(
                    *nodes[i], router_.new_request_id(std::nullopt), deadline);
            });
        }
        for (std::thread& t : asks) t.join();
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
        const LeaseHolderReply& s = said[i];
        if (s.authority && *s.authority == authority && s.term > maps->term) {
            return "node `" + nodes[i]->name + "` is held by this directory's authority `" +
                   authority + "` at term " + std::to_string(s.term) + ", above this file's term " +
                   std::to_string(maps->term) +
                   ": a standby was promoted over this router, which comes back only as its "
                   "follower (start it with --replica-of the promoted router)";
        }
    }
    return "";
}

http::Response Standby::promote(const server::Request& request, const Router::Answering& a) {
    std::lock_guard lock(promote_mu_);
    Directory& d = router_.directory();
    auto refused = [&](int status, std::string why) {
        http::Response r = Router::error(status, std::move(why));
        router_.audit_admin(request, a, r.status);
        return r;
    };
    if (!following()) {
        return refused(409, "this router is not a standby: it leads the directory at term " +
                                std::to_string(d.maps()->term));
    }
    if (!d.ready()) {
        return refused(409, "the directory has not arrived from " + primary_ +
                                ": there is nothing to promote yet");
    }
    if (follower_) follower_->stop();
    // Set before the fork ends following(), cleared once this router leads or goes on following.
    promoting_.store(true, std::memory_order_release);
    struct Clear {
        std::atomic<bool>& flag;
        ~Clear() { flag.store(false, std::memory_order_release); }
    } clear{promoting_};
    const std::string self =
        router_.options().listen.substr(0, router_.options().listen.rfind(':')) + ":" +
        std::to_string(router_.port());
    engine::Result<Promoted> p = d.promote(self, router_.wall_ms());
    if (!p.is_ok()) {
        // Still a follower's file: it goes on following.
        if (following()) {
            make_follower();
            if (follower_) follower_->start();
        }
        return refused(500, "the promotion failed: " + p.status().to_string());
    }
    log_line("promoted: term " + std::to_string(p->term) + ", history " + p->history +
             " (followed " + primary_ + ")");
    test_hooks::stall_promotion();
    // §7.3: sources of moves left behind thawed, as a primary's start, but for rows inherited:
    // the old primary may have flipped one this copy was never sent.
    settle_moves(router_, MoveRows::inherited);
    if (on_leading_) on_leading_();
    http::Response r;
    json::Writer w(r.body);
    w.begin_object();
    w.key("promoted");
    w.boolean(true);
    w.key("term");
    w.int64(p->term);
    w.key("history");
    w.string(p->history);
    w.end_object();
    router_.audit_admin(request, a, r.status);
    return r;
}

}  // namespace fenec::shard
