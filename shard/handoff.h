// shard/handoff.h: a region's half of a move across regions (router.md §11.7), the relay-only
// endpoints `/_shard/handoff/<t>/<step>` a region's router answers for the global router, and the
// export's own timer.
//
// The steps, as the global router calls them, and what each undoes:
//   POST   …/export {"to":"@us"}   claim; row `moving` to `@us` (synced); frozen on its node; the
//                                  image answered with the node's Fenec-* headers
//   POST   …/undo-export            thawed; row `active`; the claim released; after a release,
//                                  refused 409 with `released_to` (how a global router that lost
//                                  the release's answer learns that it ran)
//   PUT    …/import[?node=<n>]      the image installed frozen on the node named or with the fewest
//                                  bytes; row `importing` there (synced), which no lease names;
//                                  its replica
//   DELETE …/import                 the copy and its replica deleted; the row removed
//   POST   …/activate               thawed; row `importing` → `active` (synced); its node granted
//                                  at once; a settling of the row in progress waited for (up to
//                                  half --upstream-timeout), not refused
//   POST   …/release {"to":"@us"}   row `@us` (synced): placed nowhere here, no lease names it; its
//                                  node granted at once without it; the frozen copy stays;
//                                  answered once the standby routers keeping up were sent the
//                                  row (≤ 1 s), so none promoted after it thaws the source
//   POST   …/undo-release           row back on its node (synced); thawed; the node granted;
//                                  answered, as the release, once the standbys were sent it
//   POST   …/drop                   the frozen source copy and its copies deleted; row removed
//
// Deviation from router.md §11.7 (issue 20): the target is leased only after the source was
// released and the home moved in the global directory (the global router's `activate`, after its
// step 4), not at the import. Until then the target's row is `importing`: its node holds the copy,
// installed frozen (`Fenec-Frozen: true` on its PUT …/file), and answers reads from it, but no
// grant names the tenant, so a write sent there is refused unrun (503 `Retry-After: 1`: through a
// router, the router's body naming the move; to the node straight, for its lease where it takes
// leases and for the freeze either way), and no write lands on a copy that an undo of the import
// would discard; nor do two nodes' leases name the tenant at once (the source's frozen one and
// the target's).
//
// An `activate` the global router could not deliver is settled here: at start and every
// settle_period_ms (shard/two_level.h), a row `importing` whose home in this router's copy of the
// global directory is this region is activated; one whose home is elsewhere, that no claim holds,
// and that is older than 2 × --upstream-timeout is activated where the source region says it
// released the tenant to this region, and its import deleted (as `DELETE …/import`) where the
// source still places it on a node of its own (a home on a node of the global directory's own:
// the global router is the source asked, and only a row `active` there deletes the import);
// anything else is left and logged. Each pass then asks the global router to state the home of
// every tenant `active` here whose home in the copy of the global directory is still another
// region (an activation of a release whose home statement was never made): the global router
// states it once both regions say so (`POST …/home`), and one out of reach is asked again at the
// next pass.
//
// Invariants: every step is refused 403 unless the request bears a valid `Fenec-Relay` mark
// (§11.5: only a router holding the shared --token makes one), so no client moves a tenant out
// from under the directory by hand. An export holds the tenant's claim until release, undo-export
// or its lapse: nothing else changes the tenant meanwhile. An export that hears neither release
// nor undo-export within 2 × --upstream-timeout lapses: the source thaws the tenant itself and
// puts its row back, and a release after it is refused 409 (the copy the target took is stale).
//
// Limit: the router's `/_shard/` API answers and reads whole bodies, so an export's answer and an
// import's request hold the image in the region router's memory, once; an image larger than
// --max-body (MiB) is refused (413 on the import, 507 on the export) rather than truncated.
//
// What is remembered between steps (the source's node, between release and drop) is in this
// process's memory: a region router restarted mid-move loses it; the row `moving` to `@<r>` is
// then thawed at start (settle_moves), and a drop without it finds the frozen copy by asking the
// region's nodes for their lists (the primary copy of the tenant that says it is frozen) and
// deletes it and its copies; where no node lists one, the row alone goes, logged.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <variant>

#include "server/runtime/http.h"
#include "server/runtime/http_server.h"
#include "shard/copies.h"
#include "shard/directory.h"
#include "shard/move_image.h"
#include "shard/router.h"

namespace fenec::shard {

// The node's part of an export (step 1), shared by a region's router and by the global router
// moving a tenant out of a region it keeps itself (shard/region_move.h); the tenant's row is the
// caller's. `tenant` frozen on `node` and its image taken whole, checked against the freeze's seq
// and --max-body: the answer holds the image and its Fenec-Seq, -History, -Lineage,
// -Image-Digest and Fenec-Node headers. A failure names its step ("freeze", "image") and leaves
// the tenant frozen: the caller thaws it.
std::variant<http::Response, MoveFailure> freeze_and_take_image(Router& router, const NodeRow& node,
                                                                const std::string& tenant,
                                                                const std::string& request_id);

// What an image says of itself, sent with it to the node that installs it.
struct ImageHeaders {
    std::string_view digest, seq, lineage;
};

// The node's part of an import (step 2), shared as the export's: the image `body` installed
// frozen on `node` (its PUT …/file with Fenec-Frozen; a 409, a stale copy an interrupted attempt
// left, deletes that copy and asks once more), which must answer the seq and lineage sent.
// nullopt when it did; else the refusal, a copy installed otherwise deleted. The caller has
// written the tenant's row `importing` on `node` first (synced), so that a router stopped after
// the install leaves a row its settling (or the global router's delete-import) deletes with the
// copy, never a frozen copy that no directory names.
std::optional<http::Response> install_image(Router& router, const NodeRow& node,
                                            const std::string& tenant,
                                            const std::string& request_id,
                                            const ImageHeaders& image, std::string_view body);
// An install refused: the copy deleted from `node` (its answer may have been lost after the node
// made it), then the row the import wrote first undone: `before` put back, or, with none, the row
// removed. What could not be done is logged; a row left `importing` is the settling's.
void not_installed(Router& router, const NodeRow& node, const std::string& tenant,
                   const std::string& request_id, const std::optional<TenantRow>& before);

// The row `importing` of `tenant` made `active` (synced) and its node granted at once, the
// caller holding the tenant's claim, its copy thawed first (502 or the node's status, the row
// left `importing`, where the thaw is not answered 200); already `active` on a node of this
// directory, 200 as well.
// A region's router's `activate`, and the global router's home statement for a tenant moved into
// a region it keeps itself.
http::Response activate_import(Router& router, const std::string& tenant);

// An import's 201 body, from a region's router or the global router alike: `{"tenant","node",
// "region","seq","state":"importing"}` and the replica's fields (write_copy).
std::string import_answer(const std::string& tenant, const NodeRow& node, std::string_view seq,
                          const CopyOutcome& copy);

// The released row `released` (`@<r>`) of `tenant` and its frozen source copy, with that copy's
// copies, gone, the caller holding the tenant's claim: a drop's work, an import's where a drop
// never came, and a create's the global router relayed where one never came either (its home
// was deleted since). `removed`: the source copy was deleted. A 500 where the row could not be
// removed. `copy_first` (a create, which places the name anew): the row is kept, 503 with
// `Retry-After: 1`, unless the frozen copy was deleted or every node said it holds none, since a
// copy left behind would refuse the create on its node with the row that leads to it gone.
std::optional<http::Response> drop_leftover(Router& router, const DirectoryMaps& maps,
                                            const TenantRow& released, const std::string& tenant,
                                            const std::string& request_id, bool& removed,
                                            bool copy_first);

// The steps' names, the last segment of `/_shard/handoff/<t>/<step>`.
enum class HandoffStep : uint8_t {
    export_image,
    undo_export,
    import_image,
    release,
    undo_release,
    drop,
    activate,
    home,  // the global router's: the home statement a settling asks for (shard/handoff.cc)
};
std::optional<HandoffStep> handoff_step(std::string_view name);

// The body of an export or a release, `{"to":"@<region>"}` and no other member: `region` the
// region named (a valid, non-empty name), or `error` (a 400's message, naming the field) and no
// region.
struct HandoffTo {
    std::string region;
    std::string error;
};
HandoffTo parse_handoff_to(std::string_view body);
// The `released_to` of an undo-export refused because the release ran (a 409's body), or "".
std::string released_to(std::string_view body);

// The handoffs in progress on a region's router, and the timer that lapses an export. Thread-
// safe; the timer's thread calls the source node (blocking), so stop() runs before the upstream
// loops stop.
class Handoffs {
  public:
    explicit Handoffs(Router& router);
    ~Handoffs();  // stop()
    Handoffs(const Handoffs&) = delete;
    Handoffs& operator=(const Handoffs&) = delete;

    void stop();

    // What a handoff's source remembers of its tenant: the row before the export, and where
    // its export stands.
    struct Entry {
        TenantRow before;      // on its node, active
        std::string to;        // `@<region>` the export named
        uint64_t deadline_ms;  // the export lapses at this router's now_ms
        // `releasing`: a release writing its row; it ends `released`, or `exported` again when
        // the write failed. Every change of state is from the state its caller found.
        enum class State : uint8_t { exported, releasing, released, lapsed } state = State::exported;
    };

    // The export of `before.name` answered: its claim is held until release or undo-export.
    void exported(const TenantRow& before, const std::string& to, uint64_t deadline_ms);
    // The entry of `tenant`, if any.
    std::optional<Entry> find(const std::string& tenant) const;
    // `tenant`'s entry set from `from` to `to`; false when it has none or is not in `from`.
    bool set(const std::string& tenant, Entry::State from, Entry::State to);
    // `tenant`'s entry forgotten (an undo-export, undo-release or drop done).
    void forget(const std::string& tenant);

    // The target's side: `tenant` imported (row `importing`) at this router's `now_ms`; forgotten
    // once activated or deleted. A row `importing` this process did not import (a restart) counts
    // from when the settling first saw it.
    void imported(const std::string& tenant, uint64_t now_ms);
    void forget_import(const std::string& tenant);
    // An import between its row and the end of its install (InstallingMark): the row is
    // `importing` already and the node has no copy yet, so what the node answers 404 meanwhile is
    // the move's refusal (forward.cc), not a tenant the directory places there and the node lacks.
    void installing(const std::string& tenant, bool on);
    bool installing(const std::string& tenant) const;

    // The settling of rows left `importing` (above): once now, then every `period_ms`, on this
    // object's thread. A region's router's primary calls it once its upstream, relays and leases
    // are up; a standby settles nothing.
    void start_settling(int64_t period_ms);
    // One settling pass. Blocks on the regions' routers and the nodes.
    void settle_imports();
    // Rows left `moving` to another region with no export in flight here (an undo or a lapse
    // whose thaw the source's node did not answer, a stop): the source thawed again, and the row
    // put back `active` once it is (settle_move), each round until then.
    void settle_moving();

  private:
    void run();
    void lapse(const std::string& tenant, const Entry& e);
    void settle_import(const std::string& tenant);
    bool ask_home(const std::string& tenant, std::string_view from);

    Router& router_;
    mutable std::mutex mu_;
    std::condition_variable wake_;
    std::map<std::string, Entry> entries_;
    std::map<std::string, uint64_t> imports_;  // tenant → when imported (or first seen), now_ms
    std::set<std::string> installing_;
    std::optional<int64_t> settle_period_ms_;  // set by start_settling
    uint64_t settle_next_ms_ = 0;              // the next settling pass, now_ms
    size_t sweep_from_ = 0;  // where the next pass's asks for home statements start (its thread's)
    size_t moving_from_ = 0;  // settle_moving's pass starts this far along (its thread's own)
    bool stopping_ = false;
    std::thread thread_;
};

// Handoffs::installing for its scope: from before an import's row is written to the end of its
// install.
class InstallingMark {
  public:
    InstallingMark(Handoffs& handoffs, std::string tenant);
    ~InstallingMark();
    InstallingMark(const InstallingMark&) = delete;
    InstallingMark& operator=(const InstallingMark&) = delete;

  private:
    Handoffs& handoffs_;
    const std::string tenant_;
};

// §11.7 with issue 20: a write to `tenant` its node refused for its lease while the tenant's row is
// `importing` in `maps`: the refusal's body, naming the move (the status and the node's
// Retry-After and Fenec-Lease headers stay). nullopt when the row is not `importing`.
std::optional<std::string> importing_refusal(const DirectoryMaps& maps, const std::string& tenant);

// `/_shard/handoff/<tenant>/<step>` on a region's router (its method already matched against the
// route's row). On an API worker: it blocks on the node and the directory's fsync.
http::Response serve_handoff(Router& router, const server::Request& request,
                             const Router::Answering& a, const std::string& tenant,
                             HandoffStep step);

}  // namespace fenec::shard
