// server/node/lifecycle.cc: a tenant's life on the admin plane (node-http.md §8.1, §8.2): its
// deletion, which takes it out of service before anything is removed, and freeze and thaw,
// whose mark `<t>.frozen` outlives a restart (the registry applies it as the tenant opens).
//
// Invariants: a delete removes nothing while anything still holds the tenant (409 after
// delete_wait_ms); a freeze answers only once every write admitted before its mark was set has
// been answered (Tenant::WriteTicket), so the seq it reports is final until a thaw.
#include "server/node/admin.h"
#include "server/node/replication.h"
#include "server/node/subscriptions.h"

namespace fenec::node {

namespace {

constexpr int64_t delete_wait_ms = 5'000;  // §8.1: requests in flight get 5 s, then 409
// How long a freeze waits for the writes in flight to be answered. A write is answered once its
// fsync returns; one slower than this means the disk is failing, and the freeze says so (500)
// with the tenant frozen all the same.
constexpr int64_t freeze_wait_ms = 30'000;

engine::Status remove_mark(Node& node, const std::string& path) {
    return engine::remove_durably(node.fs(), path);
}

// The delete's answer, made while the tenant is out of service and sent once it is back (so a
// request after the answer finds it absent, never still leaving).
// The tenant if it was open and its database, closed, for the caller to free after the answer.
struct Closed {
    std::unique_ptr<engine::Database> db;  // freed first: it points at the tenant's indexes
    std::shared_ptr<Tenant> tenant;
};

// `closed`: the tenant if it was open, for the caller to release after the answer; `trash`: its
// file under the name it was moved to, for the caller to unlink after the answer.
http::Response remove_tenant(Node& node, Call& call, bool sidecars, Closed& closed,
                             std::string& trash) {
    // Its subscriptions end `gone`, its feed streams `deleted`, and its held requests are woken
    // to answer 503 (the tenant is marked leaving); asked again while references remain, for any
    // that came in between.
    Registry::TakenOut taken =
        node.registry().take_out(call.tenant, delete_wait_ms, [&node](Tenant& t) {
            node.subscriptions().end_tenant(t.name(), "gone");
            node.replication().end_streams(t.name(), "deleted");  // §10.2: `E deleted`
            t.wake_all();
        });
    if (!taken.out) return node.refusal(409, taken.message);
    closed.tenant = std::move(taken.closed);
    closed.db = std::move(taken.closed_db);
    if (!taken.out->file_exists())
        return node.refusal(404, "tenant `" + call.tenant + "` not found");
    if (engine::Status st = taken.out->remove_files(sidecars, trash); !st.is_ok()) {
        return node.refusal(500,
                            "tenant `" + call.tenant + "` could not be removed: " + st.to_string());
    }
    http::Response r;
    r.status = 204;
    r.content_type.clear();
    return r;
}

}  // namespace

// The mark replaced durably (a line naming when), through the node's file system: a freeze
// answered has its mark as it says, across a crash. Removed durably by remove_mark.
engine::Status write_frozen_mark(Node& node, const std::string& path) {
    const std::string line = "{\"frozen_ms\":" + std::to_string(node.now_ms()) + "}\n";
    return engine::replace_durably(node.fs(), path, line);
}

void delete_tenant(Node& node, Call& call, bool sidecars) {
    // A followed copy's follower holds it (§11): it stops first, and starts again if
    // `<t>.follows` outlived the delete (refused, or the file removed without its sidecars).
    const bool followed = node.replication().stop_following(call.tenant);
    Closed closed;
    std::string trash;
    http::Response r = remove_tenant(node, call, sidecars, closed, trash);
    // Gone: a tenant of its name made later is not frozen by its freeze. Kept where the delete
    // failed, so a stale thaw under another id still leaves it frozen.
    if (r.status / 100 == 2) node.unfrozen(call.tenant);
    if (followed) node.replication().resume_following(call.tenant);
    answer_audited(node, call, std::move(r));
    // Its documents, graphs and indexes freed once the answer is on its way (a 69 MB @hnsw
    // tenant: ~250 MB given back, 15-30 ms the delete's caller no longer waits for). The file
    // was removed and its directory fsynced before the answer; what is freed here holds no
    // file and no slot, so a create of the same name meanwhile opens a tenant of its own.
    closed.db.reset();
    closed.tenant.reset();
    // Its blocks freed last: the name went (renamed, the directory synced) before the answer.
    if (!trash.empty()) node.fs().remove(trash).ignore();
}

void freeze_tenant(Node& node, Call& call) {
    const std::string id(call.request.head.header("Fenec-Freeze-Id").value_or(""));
    // Its id thawed already: a move's freeze its router gave up on (this node silent, its lease
    // lapsed) and undid, read only now. Taken, it would leave the tenant frozen for good.
    const auto late = [&] {
        return node.refusal(
            409,
            "tenant `" + call.tenant + "`: this freeze (`" + id + "`) was thawed before it came",
            "thawed");
    };
    if (node.thawed_before(call.tenant, id)) return answer_audited(node, call, late());
    Acquired a = node.registry().acquire(call.tenant);
    if (!a.tenant) return answer_audited(node, call, acquire_refusal(node, a));
    Tenant& t = *a.tenant;
    // Marked as this freeze's before it freezes: a stale thaw of another id meanwhile leaves it.
    node.freezing(call.tenant, id);
    // The mark first: a crash after it leaves the tenant frozen, as it was asked to be.
    const std::string mark = node.registry().sidecar_of(call.tenant, sidecar_frozen);
    if (engine::Status st = write_frozen_mark(node, mark); !st.is_ok()) {
        return answer_audited(node, call,
                              node.refusal(500, "tenant `" + call.tenant +
                                                    "`: the freeze mark could not be "
                                                    "written: " +
                                                    st.to_string()));
    }
    if (engine::Status st = t.db().freeze(); !st.is_ok()) {  // waits for the block in progress
        return answer_audited(node, call, node.refusal(500, st.to_string()));
    }
    // Asked again, frozen: a thaw of this id that ran meanwhile recorded it before it thawed
    // (thaw_tenant), so either it is seen here, or that thaw comes after this freeze.
    if (node.thawed_before(call.tenant, id)) {
        // Another freeze took it meanwhile (a later move's): that one's, left as it is.
        if (node.frozen_by_another(call.tenant, id)) return answer_audited(node, call, late());
        if (engine::Status st = remove_mark(node, mark); !st.is_ok()) {
            return answer_audited(node, call,
                                  node.refusal(500, "tenant `" + call.tenant +
                                                        "`: thawed before this freeze came, but "
                                                        "the freeze mark could not be removed: " +
                                                        st.to_string()));
        }
        t.db().thaw();
        node.unfrozen(call.tenant);
        return answer_audited(node, call, late());
    }
    t.wake_all();  // held requests answer 503 at once (§8.2), not at their deadline
    if (!t.wait_writes(freeze_wait_ms)) {
        return answer_audited(node, call,
                              node.refusal(500, "tenant `" + call.tenant +
                                                    "` is frozen, but writes in flight "
                                                    "were not answered within " +
                                                    std::to_string(freeze_wait_ms / 1000) + " s"));
    }
    http::Response r;
    json::Writer w(r.body);
    w.begin_object();
    w.key("frozen");
    w.boolean(true);
    w.key("seq");
    w.uint64(t.db().seq().v);
    w.key("history");
    w.string(engine::format::hex16(t.db().history().current().v));
    w.end_object();
    answer_audited(node, call, std::move(r));
}

void thaw_tenant(Node& node, Call& call) {
    const std::string id(call.request.head.header("Fenec-Freeze-Id").value_or(""));
    // First: a freeze of this id running now sees it once it has frozen, and undoes itself.
    node.thawing(call.tenant, id);
    Acquired a = node.registry().acquire(call.tenant);
    if (!a.tenant) return answer_audited(node, call, acquire_refusal(node, a));
    // A thaw under an id undoes only its own freeze: one of another (a later move's) stays.
    if (!id.empty() && node.frozen_by_another(call.tenant, id)) {
        http::Response r;
        r.body = "{\"frozen\":true}";
        return answer_audited(node, call, std::move(r));
    }
    // The mark first: a crash after it leaves the tenant thawed, as it was asked to be.
    const std::string mark = node.registry().sidecar_of(call.tenant, sidecar_frozen);
    if (engine::Status st = remove_mark(node, mark); !st.is_ok()) {
        return answer_audited(node, call,
                              node.refusal(500, "tenant `" + call.tenant +
                                                    "`: the freeze mark could not be "
                                                    "removed: " +
                                                    st.to_string()));
    }
    a.tenant->db().thaw();
    node.unfrozen(call.tenant);
    http::Response r;
    r.body = "{\"frozen\":false}";
    answer_audited(node, call, std::move(r));
}

}  // namespace fenec::node
