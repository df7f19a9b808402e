// server/node/replication_admin.cc: POST /_admin/tenants/<t>/follow (node-http.md §8.7) and
// …/promote (§8.6): bodies checked, the follows side file, the checks of a promotion in order,
// a forced promotion's audit line written and fsynced before the answer.
#include <simdjson.h>

#include "engine/format.h"
#include "server/node/admin.h"
#include "server/node/follower.h"
#include "server/node/handlers.h"
#include "server/node/routes.h"
#include "server/node/lease.h"
#include "server/node/replication.h"
#include "server/node/subscriptions.h"
#include "server/node/test_hooks.h"
#include "server/obs/audit.h"

namespace fenec::node {

namespace {

constexpr uint64_t follow_wait_ms_max = 60'000;  // an admin call is not held longer than this
// A primary copy told to follow waits this long for its holders to let it go, as a delete does
// (§8.1): requests in flight finish, held requests and streams are told to end.
constexpr int64_t demote_wait_ms = 5'000;
// A promotion that finds its copy out of service (a follower installing an image: up to 5 s for
// its holders, then its fsync, check and rename) waits this long for it before answering 404.
constexpr int64_t promote_wait_out_ms = 10'000;

struct ReplicationBody {
    std::optional<std::string> from;
    std::optional<uint64_t> lineage;
    std::optional<uint64_t> forked;
    std::optional<std::string> authority;
    std::optional<uint64_t> term;
    uint64_t wait_ms = 0;
    bool force = false;
};

// The members a follow or promote body may hold; "" or the problem.
std::string parse_body(std::string_view text, bool promote, ReplicationBody& out) {
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return "";
    simdjson::dom::parser parser;
    simdjson::padded_string padded(text);
    simdjson::dom::element doc;
    simdjson::dom::object obj;
    if (parser.parse(padded).get(doc)) return "the body is not JSON";
    if (doc.get(obj)) return "the body must be a JSON object";
    for (auto [key, value] : obj) {
        std::string_view s;
        if (key == "lineage" || (promote && key == "forked")) {
            if (value.is_null()) continue;
            if (value.get(s) || !engine::format::parse_hex16(s))
                return "`" + std::string(key) + "` must be 16 hex digits";
            (key == "lineage" ? out.lineage : out.forked) = engine::format::parse_hex16(s);
        } else if (key == "authority") {
            if (value.get(s) || s.empty()) return "`authority` must be a non-empty string";
            out.authority = std::string(s);
        } else if (key == "term") {
            uint64_t n = 0;
            if (value.get(n)) return "`term` must be a non-negative integer";
            out.term = n;
        } else if (!promote && key == "from") {
            if (value.get(s)) return "`from` must be a string http://host:port";
            out.from = std::string(s);
        } else if (!promote && key == "wait_ms") {
            uint64_t n = 0;
            if (value.get(n) || n > follow_wait_ms_max) {
                return "`wait_ms` must be an integer 0.." + std::to_string(follow_wait_ms_max);
            }
            out.wait_ms = n;
        } else if (promote && key == "force") {
            bool b = false;
            if (value.get(b)) return "`force` must be true or false";
            out.force = b;
        } else {
            return "unknown member `" + std::string(key) + "`";
        }
    }
    if (out.term && !out.authority) return "`term` needs `authority`";
    if (out.authority && !out.term) return "`authority` needs `term`";
    return "";
}

bool from_is_valid(std::string_view from) {
    if (!from.starts_with("http://")) return false;
    std::string_view rest = from.substr(7);
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || rest.find('/') != std::string_view::npos) {
        return false;
    }
    const std::string_view port = rest.substr(colon + 1);
    return !port.empty() && port.size() <= 5 &&
           port.find_first_not_of("0123456789") == std::string_view::npos && std::stoul(std::string(port)) > 0 &&
           std::stoul(std::string(port)) < 65536;
}

// A follow's or a promotion's request before anything is done: its method, the tenant's name,
// its body (read into `body`). A refusal, or nullopt.
std::optional<http::Response> request_refusal(Node& node, const Call& c, bool promote,
                                              ReplicationBody& body) {
    if (!route_takes(c)) return method_refusal(node, c);
    if (!valid_tenant_name(c.tenant)) {
        return node.refusal(400, "tenant name `" + c.tenant + "` is not [a-z0-9_-]{1,64}");
    }
    if (std::string e = parse_body(c.request.body, promote, body); !e.empty()) {
        return node.refusal(400, e);
    }
    return std::nullopt;
}

// A follow's `from`: given, http://host:port, and not this node.
std::optional<http::Response> from_refusal(Node& node, const ReplicationBody& body) {
    if (!body.from) return node.refusal(400, "`from` is required: http://host:port");
    if (!from_is_valid(*body.from)) {
        return node.refusal(400, "`from` must be http://host:port with no path");
    }
    const std::string self_port = ":" + std::to_string(node.port());
    if (body.from->ends_with(self_port) &&
        (body.from->starts_with("http://127.") || body.from->starts_with("http://localhost:") ||
         *body.from == "http://" + node.options().listen)) {
        return node.refusal(400, "`from` is this node");
    }
    return std::nullopt;
}

// §9.5, for a call carrying `authority` and `term`: a lower term → 409 naming the holder, a
// higher one kept before anything else is done (500 if it cannot be).
std::optional<http::Response> fence_of(Node& node, const ReplicationBody& body) {
    if (!body.authority) return std::nullopt;
    const FenceOutcome fenced = node.fencing().fence(*body.authority, *body.term);
    if (fenced.ok()) return std::nullopt;
    return fence_refusal(node, fenced);
}

// No copy here → an empty one, of `lineage` when given (§8.7): it stands at 0 of that lineage
// (§10.3), answers lineage checks and can be promoted before any image reached it. Made after
// `<t>.follows`, so it opens as a follower.
std::optional<http::Response> empty_copy(Node& node, const Call& c, const ReplicationBody& body) {
    if (node.registry().file_exists(c.tenant)) return std::nullopt;
    engine::LineageId lineage{body.lineage.value_or(0)};
    engine::Status st = node.registry().create(
        c.tenant, [](Tenant&) { return engine::Status::ok(); }, lineage);
    if (st.is_ok() || st.code() == engine::Code::already_exists) return std::nullopt;
    if (st.code() == engine::Code::limit_exceeded) {  // the descriptor budget
        return node.refusal(503, std::string(st.message()), "descriptors");
    }
    return node.refusal(500,
                        "an empty copy of `" + c.tenant + "` cannot be made: " + st.to_string());
}

http::Response following_answer(const Call& c, const Follows& f, bool heard) {
    http::Response r;
    json::Writer w(r.body);
    w.begin_object();
    w.key("following");
    w.string(c.tenant);
    w.key("from");
    w.string(f.from);
    w.key("told");
    w.uint64(f.told);
    w.key("heard");
    w.boolean(heard);
    w.end_object();
    return r;
}

// §8.6 checks 3 to 5 for a promotion not forced: nullopt when `db` may be promoted.
std::optional<http::Response> promote_refusal(Node& node, const Call& c, engine::Database& db,
                                              const std::optional<Follows>& follows,
                                              const ReplicationBody& body) {
    // 3. Another lineage.
    if (*body.lineage != db.lineage().v) {
        const std::string copy = engine::format::hex16(db.lineage().v);
        return node.refusal(409,
                            "`" + c.tenant + "`: this copy is of another lineage (" + copy + ")",
                            {}, [&](json::Writer& w) {
                                w.key("lineage");
                                w.string(copy);
                            });
    }
    // 4. Heard from the node it follows since told: promoted whatever it holds.
    const bool heard = follows && follows->heard.has_value();
    // 5. An old primary's copy that has not heard from the new primary since.
    if (!heard && body.forked) {
        bool among = false;
        for (const engine::Fork& fk : db.history().forks) among |= fk.history.v == *body.forked;
        if (!among) {
            return node.refusal(
                409, "`" + c.tenant + "`: this copy never saw history " +
                         engine::format::hex16(*body.forked) +
                         " and has not heard from its primary since; promoting it would take "
                         "back every write after that failover");
        }
    }
    return std::nullopt;
}

http::Response promoted(const Call& c, engine::Database& db, const engine::History& h,
                        bool forked) {
    http::Response r;
    json::Writer w(r.body);
    w.begin_object();
    w.key("promoted");
    w.string(c.tenant);
    w.key("lineage");
    w.string(engine::format::hex16(db.lineage().v));
    w.key("history");
    w.string(engine::format::hex16(h.current().v));
    w.key("seq");
    w.uint64(db.seq().v);
    w.key("forked");
    w.boolean(forked);
    w.end_object();
    return r;
}

// A forced promotion's audit line, written and fsynced before the answer (§8.6).
engine::Status audit_forced(Node& node, const Call& c, engine::Database& db,
                            const engine::History& h) {
    obs::LineLog* log = node.audit();
    if (!log) return engine::Status::ok();
    obs::AuditLine line;
    line.at_ms = node.now_ms();
    line.event = obs::AuditEvent::promote;
    line.who = obs::AuditWho{static_cast<obs::Credential>(c.who.credential)};
    line.peer = audit_peer(c);
    line.via = c.via;
    line.request_id = c.request_id;
    line.fields = {{"tenant", c.tenant},
                   {"history", engine::format::hex16(h.current().v)},
                   {"seq", db.seq().v},
                   {"forced", true}};
    return log->write_synced(obs::audit_line(line));
}

}  // namespace

void Replication::serve_follow(const std::shared_ptr<Call>& call) {
    Call& c = *call;
    auto answer = [&](http::Response r) {
        audit_admin(node_, c, r.status);
        node_.answer(c, std::move(r));
    };
    ReplicationBody body;
    if (auto r = request_refusal(node_, c, false, body)) return answer(std::move(*r));
    if (auto r = from_refusal(node_, body)) return answer(std::move(*r));
    if (auto r = fence_of(node_, body)) return answer(std::move(*r));
    Follows f;
    if (auto old = read_follows(c.tenant)) f.told = old->told;
    f.from = *body.from;
    f.told += 1;
    f.apply_stall_ms = test_hooks::apply_stall_ms(c.request.head);
    f.install_stall_ms = test_hooks::install_stall_ms(c.request.head);
    f.received_stall_ms = test_hooks::received_stall_ms(c.request.head);
    if (auto r = keep_follows(c.tenant, f)) return answer(std::move(*r));
    if (auto r = empty_copy(node_, c, body)) return answer(std::move(*r));
    std::shared_ptr<Follower> follower = start_follower(c.tenant, f);
    bool heard = false;
    std::string error;
    if (body.wait_ms > 0) {
        heard = follower->wait_heard(static_cast<int64_t>(body.wait_ms), error);
        if (!heard && !error.empty()) {
            return answer(node_.refusal(502, error, {}, [&](json::Writer& w) {
                w.key("following");
                w.string(c.tenant);
            }));
        }
    }
    answer(following_answer(c, f, heard));
}

std::optional<http::Response> Replication::keep_follows(const std::string& tenant,
                                                        const Follows& f) {
    end_follower(tenant);
    // The copy is taken out of service while `<t>.follows` is written, so that whatever opens it
    // next opens a follower: an open primary copy is closed (writes in flight finish; its streams
    // end `demoted`, its subscribers `closing`), and an open in progress, which read no
    // `.follows` and would serve a primary taking writes, is waited for and closed the same
    // way. A copy that is a replica already stays as it is: open as one, or with its `.follows`
    // in place (closed, or opening: an open reads it there). Still held past demote_wait_ms →
    // 409, nothing changed.
    std::unique_ptr<Registry::OutOfService> out;
    auto open = node_.registry().try_get(tenant);
    const bool replica_already = open ? open->db().history().replica || open->db().following()
                                      : node_.registry().has_sidecar(tenant, sidecar_follows);
    open.reset();
    if (!replica_already) {
        Registry::TakenOut taken = take_copy_out(tenant, "demoted", demote_wait_ms);
        if (!taken.out) return node_.refusal(409, taken.message);
        out = std::move(taken.out);
    }
    if (!write_follows(tenant, f)) {
        return node_.refusal(500, "the follows file of `" + tenant + "` cannot be written");
    }
    return std::nullopt;
}

void Replication::serve_promote(const std::shared_ptr<Call>& call) {
    Call& c = *call;
    auto answer = [&](http::Response r) {
        audit_admin(node_, c, r.status);
        node_.answer(c, std::move(r));
    };
    ReplicationBody body;
    if (auto r = request_refusal(node_, c, true, body)) return answer(std::move(*r));
    if (!body.force && !body.lineage) {
        return answer(node_.refusal(400, "`lineage` is required unless `force`"));
    }
    // 1. Fenced (§9.5): a lower term from `authority` → 409 naming the holder.
    if (auto r = fence_of(node_, body)) return answer(std::move(*r));
    // 2. No copy. One out of service for an image's install is waited for, and promoted as
    // installed: the image is the primary's newer state, and the copy is there (not a 404).
    Acquired a;
    auto acquire_copy = [&]() -> std::optional<http::Response> {
        a = node_.registry().acquire(c.tenant, promote_wait_out_ms);
        if (a.tenant) return std::nullopt;
        if (a.error == AcquireError::not_found) {
            return node_.refusal(404, "no copy of `" + c.tenant + "` here");
        }
        return acquire_refusal(node_, a);
    };
    if (auto r = acquire_copy()) return answer(std::move(*r));
    std::optional<Follows> follows = read_follows(c.tenant);
    const bool replica = follows || a.tenant->db().history().replica;
    // 3 to 5, unless forced.
    if (!body.force) {
        if (auto r = promote_refusal(node_, c, a.tenant->db(), follows, body)) {
            return answer(std::move(*r));
        }
    }
    if (!replica) return answer(promoted(c, a.tenant->db(), a.tenant->db().history(), false));
    // Stops following at once, a pending connect included; the block being applied finishes,
    // and so does every block the primary already put on the wire: a write it answered was
    // sent into its socket before the answer (wait_handed), so what has reached this node's
    // socket is kept rather than cut off with the connection. Nothing of this call holds the
    // copy meanwhile: an image received whole installs (its copy taken out of service, which
    // waits for every holder) rather than wait on this call's reference, give up and be
    // dropped, leaving the copy from before it to be promoted. The copy is then acquired again,
    // as the follower left it, and checked again.
    a.tenant.reset();
    end_follower(c.tenant, /*keep_received=*/true);
    // Refused from here on, the copy follows again as it did before this call.
    if (auto r = acquire_copy()) {
        if (r->status != 404) resume_following(c.tenant);
        return answer(std::move(*r));
    }
    if (following(c.tenant)) {  // a follow arrived meanwhile and started a follower of its own
        return answer(node_.refusal(
            409, "`" + c.tenant + "` was told to follow during its promotion: not promoted"));
    }
    follows = read_follows(c.tenant);
    if (!body.force) {
        if (auto r = promote_refusal(node_, c, a.tenant->db(), follows, body)) {
            a.tenant.reset();
            resume_following(c.tenant);
            return answer(std::move(*r));
        }
    }
    engine::Database& db = a.tenant->db();
    // A copy promoted already, whose `.follows` a call before this one could not remove, is not
    // forked again (its file is a primary's: promote() would refuse it, and every retry with
    // it); only the file is removed, which that call left to do.
    bool forks = db.history().replica || db.following();
    engine::History h = db.history();
    if (forks) {
        // The keys of the writes this copy applied as a follower, whose rows came in their
        // blocks: the table is built as a copy opens and grows with its own writes only. Read
        // again while nothing writes here (the follower ended; a replica takes no writes), so a
        // keyed write its old primary answered is answered as made when sent again (§5.7).
        load_idempotency_keys(*a.tenant);
        auto forked = db.promote();
        if (forked.is_ok()) {
            h = *forked;
        } else if (forked.status().code() == engine::Code::invalid_argument) {
            // Not a replica any more: a promotion beside this one forked it first (the engine
            // lets one through and refuses the other once that fork is durable). Answered as a
            // retry would be. (A fork whose sync failed is an io_error: answered 500 below.)
            forks = false;
            h = db.history();
        } else {
            return answer(node_.refusal(
                500, "`" + c.tenant + "` cannot be promoted: " + forked.status().to_string()));
        }
    }
    // A fork is answered only once durable: a copy whose file failed (a fork's sync among what
    // may have failed) is not taken for promoted by a retry.
    if (std::optional<engine::Status> failed = db.failure()) {
        return answer(node_.refusal(
            500, "`" + c.tenant + "` cannot be promoted: its file failed: " + failed->to_string()));
    }
    // A forced promotion is audited before anything after its fork can fail, and again on a
    // retry that finds it forked: a second line for one promotion, never none.
    if (body.force) {
        if (engine::Status st = audit_forced(node_, c, db, h); !st.is_ok()) {
            return answer(node_.refusal(
                500, "promoted, but the audit line was not written: " + st.to_string()));
        }
    }
    // Gone for good before the answer: a copy that found it after a crash (or a restart) would
    // follow again, and an image from its old primary would take every write since.
    if (engine::Status st = engine::remove_durably(node_.fs(), follows_path(c.tenant));
        !st.is_ok()) {
        return answer(node_.refusal(500, "`" + c.tenant +
                                             "` was promoted, but its follows file could "
                                             "not be removed (asking again removes it): " +
                                             st.to_string()));
    }
    answer(promoted(c, db, h, forks));
}

}  // namespace fenec::node
