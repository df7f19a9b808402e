// shard/directory.h: the directory (router.md §4): which node holds which tenant, kept in a Fenec
// tenant file of its own, opened through the engine's public API and written with FenecQL.
//
// Invariant (§4.1): every change is one write block, synced to disk before the maps change and
// before anything acts on it, so a placement is never used or answered before it would survive a
// crash. Writes are serialised under one mutex; readers take an immutable snapshot of the maps
// (`maps()`), swapped whole after each change, so a lookup never waits on a write.
//
// In use: `directory`, `terms`, `nodes`, `tenants`, `pairs`, `replicas`, `regions` (the global
// directory's: §11.3), `leases` and `thaws` (OwedThaw). The `directory` row's `scope` (`global`, or
// the region a region's router keeps) is written at creation and checked at every open.
// Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/database.h"
#include "engine/status.h"
#include "shard/cow_map.h"
#include "shard/node_tokens.h"
namespace fenec::index {
class IndexSet;
}

namespace fenec::shard {

// The directory format this router writes and reads (§4.2); a higher one is refused at start.
inline constexpr int64_t directory_format = 1;

struct NodeRow {
    std::string name;
    std::string addr;  // host:port
    // The node's admin token, as this router read it (shard/node_tokens.h): held in memory and
    // never answered by any endpoint, nor written into the directory file.
    std::string token;
    std::string region;             // "" = the unnamed region
    std::string zone;               // "" = not recorded
    std::string lease = "unknown";  // "takes", "none" or "unknown"
    std::string token_env = {};     // the variable each router reads `token` from, or ""
    std::string token_file = {};    // the file each router reads `token` from, or ""
};

// A tenant's quota as the router keeps and sends it (the node's `PUT …/quota` object): each
// limit a non-negative integer, none where absent. The router enforces none of it (§6.4).
struct Quota {
    static constexpr std::array<std::string_view, 6> fields = {
        "bytes", "rows", "streams", "requests", "rows_per_s", "bytes_per_s"};
    std::array<std::optional<uint64_t>, fields.size()> limits;  // in the order of `fields`
    bool operator==(const Quota&) const = default;
};

struct TenantRow {
    std::string name;
    std::string node;
    std::string state = "active";  // active, moving, creating, deleting, importing
    std::string moving_to;         // "" when not moving
    // `importing` on the global router (a move into a region it keeps itself): the home the
    // tenant came from, `@<r>`, which its settling asks; "" otherwise, or for a row written before
    // the field was.
    std::string moving_from;
    std::string lineage;           // 16 hex, as the node answered it; "" when it did not say
    // The history its primary forked at its last failover (16 hex), "" before any (§9.2).
    std::string forked;
    // The node its last failover took it off, "" when none or a move since (§9.10, §9.12).
    std::string failed_from;
    std::optional<Quota> quota;  // none: no quota
    // The directory's term when its move marked it `moving`; -1 when not moving, or for a row
    // marked before the field was. A start tells its own stopped moves from inherited ones by it
    // (shard/move.h, MoveRows::by_row).
    int64_t moving_term = -1;
    // The `Fenec-Freeze-Id` of the move that marked it `moving`; "" when not moving, or for a row
    // marked before the field was. The thaw a start asks of a stopped move's source (or owes it)
    // names it, so it undoes that freeze only, and the node refuses it should it come late.
    std::string moving_freeze;
};

// The longest lease a router leasing from this directory may have granted (§9.7).
struct LeaseRecord {
    int64_t ms = 0;
    int64_t at_ms = 0;  // wall clock, when written
    std::string by;     // the writing router's listen address
};

// A thaw a move undone owes the source it froze (Move::roll_back, Copies::owe_thaw): the node
// did not answer it, and may yet run the freeze its kernel holds. Kept in the directory, in the
// block that put the tenant's row back, so a router restarted or promoted over asks it too.
struct OwedThaw {
    std::string node;
    std::string tenant;
    std::string freeze_id;  // the undone attempt's `Fenec-Freeze-Id`
};

// One immutable view of the directory. Each change copies the view and edits the copy; the two
// maps that grow with the tenants share their entries with the view they were copied from
// (CowMap), so a change costs about the chunk it touches, not the whole directory.
struct CopyCounts;

struct DirectoryMaps {
    std::string id;       // 16 hex, drawn at creation
    std::string scope;    // "global", or the region whose own directory this is (§11.3)
    int64_t starts = 0;   // leading starts (§9.5 numbers grants by it)
    int64_t term = 0;     // highest `terms` row
    std::string history;  // that row's history (16 hex): the one a grant names (§9.5)
    std::map<std::string, NodeRow, std::less<>> nodes;
    CowMap<TenantRow> tenants;  // shared with the snapshot it was copied from (cow_map.h)
    std::map<std::string, std::string, std::less<>> pairs;     // node → its standby node (§8.1)
    CowMap<std::string> replicas;                              // tenant → its own replica's node
    // The regions keeping a directory of their own (§11.3), global directory only: region → its
    // routers, the one keeping its directory first, its standbys after.
    std::map<std::string, std::vector<std::string>, std::less<>> regions;
    std::optional<LeaseRecord> lease_record;
    // node → tenant → the freeze ids of the thaws owed there (OwedThaw).
    std::map<std::string, std::map<std::string, std::set<std::string>>, std::less<>> thaws;
    // The copies each node keeps, as placement ranks by them (shard/copy_counts.h): brought up to
    // date as the directory publishes the maps; read through counts_of(), which answers null
    // for maps the counts no longer describe.
    std::shared_ptr<const CopyCounts> counted;

    // `authority` of a grant: `<id>/<scope>` (§4.1).
    std::string authority() const { return id + "/" + scope; }
    // A tenant's region (§11.1): its node's, or `r` for a row at home in region `r` (`@r`).
    std::string region_of(const TenantRow& tenant) const;
    // The standby of `node`'s pair, or nullptr.
    const std::string* standby_of(std::string_view node) const;
    // Whether `node` is some node's standby.
    bool is_standby(std::string_view node) const;
    // Whether this directory keeps the nodes of `region`: a region's router's own region, or one
    // a node here is in. A node of that region not here is in no region's directory.
    bool keeps_nodes_of(std::string_view region) const;
    // The node keeping `tenant`'s copy: its own replica while it has one (on a paired node, one the
    // standby has not taken over), else its node's standby; "" for none.
    std::string copy_of(const TenantRow& tenant) const;
};

// A region's rows as the global directory hands them to the region's own router when the region
// moves out (§11.9): its nodes (their tokens with them), pairs, replicas and tenants.
struct RegionRows {
    std::string region;
    std::vector<NodeRow> nodes;
    std::vector<std::pair<std::string, std::string>> pairs;     // node, its standby
    std::vector<std::pair<std::string, std::string>> replicas;  // tenant, its replica's node
    std::vector<TenantRow> tenants;
};

// How a router opens its directory file (§2.3 step 2, §10).
struct DirectoryOpening {
    enum class Role : uint8_t {
        primary,   // created when missing; `starts` bumped; a following file is refused
        follower,  // a standby's: opened as it stands (none yet: waiting for its first image),
                   // written only by what the primary's feed sends (apply, adopt_image)
        promote,   // a standby's file opened as a primary: promote() run as it opens
    };
    Role role = Role::primary;
    uint64_t feed_bytes = 8ull << 20;  // --replication-buffer: changes kept for followers
    std::string by;                    // this router's listen address, for a `terms` row
    // The scope it keeps (§4.1, §2.3 step 2): "global", or its --region. Written into a file it
    // creates; a file of another scope is refused as it opens (or as a follower's image lands).
    std::string scope = "global";
};

// What a promotion wrote (§4.2): the term it raised to and the history the file forked into.
struct Promoted {
    int64_t term = 0;
    std::string history;  // 16 hex
};

class Directory {
  public:
    // Opens the file at `path` as `how` says. A primary's is created when missing, with its
    // collections, its `directory` row and term 0; a primary counts its start in `starts` (§2.3
    // step 4). A file of a higher format, a scope other than `how.scope`, or one the engine refuses
    // (a following file opened as a primary among them) is an error naming the path.
    static engine::Result<std::unique_ptr<Directory>> open(const std::string& path,
                                                           const DirectoryOpening& how = {});
    ~Directory();
    Directory(const Directory&) = delete;
    Directory& operator=(const Directory&) = delete;

    // The current snapshot; cheap, never waits on a write.
    std::shared_ptr<const DirectoryMaps> maps() const;

    // Each is one synced write block, then the maps change. An error leaves the maps unchanged.
    // put_node writes `token_env` and `token_file` into the row and never `token`: a node named
    // by neither has its token put in the sidecar `<path>.tokens` first (shard/node_tokens.h).
    [[nodiscard]] engine::Status put_node(const NodeRow& node);
    [[nodiscard]] engine::Status remove_node(std::string_view name);
    // With `owed`, the thaw it owes recorded in the same block (a move undone whose source did
    // not answer its thaw): the row is never back without it.
    [[nodiscard]] engine::Status put_tenant(const TenantRow& tenant,
                                            const std::optional<OwedThaw>& owed = std::nullopt);
    // The thaws a node or a tenant is owed go with it (remove_node, remove_tenant, and the nodes
    // move_region_out hands over); paid_thaw forgets one asked and answered, or no longer owed.
    [[nodiscard]] engine::Status remove_tenant(std::string_view name);
    [[nodiscard]] engine::Status paid_thaw(const OwedThaw& thaw);
    // A move's flip (§7.2 step 6): `node: to`, `state: "active"`, `moving_to` and `failed_from`
    // cleared, in one statement, so the tenant is on one node or the other, never both or neither.
    [[nodiscard]] engine::Status flip_tenant(std::string_view name, const std::string& to);
    // A failover's promotion (§9.1 step 2), one block: `node: to`, `state: "active"` (an
    // `importing` row stays `importing`: shard/handoff.h),
    // `failed_from: from`, `forked: history` (the promote answer's), and the tenant's replica
    // row removed (the replica is the primary now).
    [[nodiscard]] engine::Status fail_over_tenant(std::string_view name, const std::string& to,
                                                  const std::string& from,
                                                  const std::string& history);
    // The recorded lineage of a tenant a repair's survey learnt anew (§8.3 step 4).
    [[nodiscard]] engine::Status set_lineage(std::string_view name, const std::string& lineage);
    // A tenant's quota (§6.4); none removes it.
    [[nodiscard]] engine::Status set_quota(std::string_view name, const std::optional<Quota>& q);

    // Pairs (§8.1): `node`'s standby is `standby`; remove_pair forgets `node`'s. With
    // `kept_on`, each of `kept` is recorded in the same write as having its own replica there: a
    // pair's old standby, whose copies stay each tenant's copy until a new standby has caught up
    // (Copies::paired), or for good once the pair is gone under --replicas (Copies::unpaired).
    [[nodiscard]] engine::Status put_pair(std::string_view node, const std::string& standby,
                                          const std::vector<std::string>& kept = {},
                                          const std::string& kept_on = {});
    [[nodiscard]] engine::Status remove_pair(std::string_view node,
                                             const std::vector<std::string>& kept = {},
                                             const std::string& kept_on = {});
    // A tenant's own replica (§8.2): on `node`; remove_replica forgets it.
    [[nodiscard]] engine::Status put_replica(std::string_view tenant, const std::string& node);
    [[nodiscard]] engine::Status remove_replica(std::string_view tenant);

    // A region keeping its own directory (§11.3): its row, `routers` replaced whole; and its row
    // removed.
    [[nodiscard]] engine::Status put_region(std::string_view name,
                                            const std::vector<std::string>& routers);
    [[nodiscard]] engine::Status remove_region(std::string_view name);

    // §11.9, a region moving out of the global directory, one synced block on each side:
    // - adopt_rows (the region's router): `rows` recorded, each row replacing one of its name; a
    //   token given in the clear goes to the sidecar first, as put_node's.
    // - move_region_out (the global router): region `rows.region`'s row put with `routers`, each
    //   of `rows.tenants` rewritten to `@<region>` (active, nothing else kept), its nodes removed
    //   with their pairs and replicas, and those nodes' tokens dropped from the sidecar.
    [[nodiscard]] engine::Status adopt_rows(const RegionRows& rows);
    [[nodiscard]] engine::Status move_region_out(const RegionRows& rows,
                                                 const std::vector<std::string>& routers);

    // The longest-lease record (§9.7), replaced whole.
    [[nodiscard]] engine::Status put_lease_record(const LeaseRecord& record);

    // ---- the tokens given in the clear (shard/node_tokens.h)

    // The sidecar's tokens, node → token: what a primary answers `GET /_replication/tokens`.
    TokenSidecar::Tokens clear_tokens();
    // A standby's: its sidecar replaced by its primary's `tokens`, durably, then the maps
    // rebuilt so each node's token is the one taken.
    [[nodiscard]] engine::Status take_tokens(const TokenSidecar::Tokens& tokens);

    // ---- following a primary's directory (§10; shard/standby.h runs the feed)

    // Whether there is a directory to read: false only on a standby whose first image has not
    // come (§5.1: unknown is not absent).
    bool ready() const;
    // Whether requests may be placed by it: ready, and on a standby's first start its nodes'
    // tokens taken from the primary (or found to live in its rows), so nothing is sent to a node
    // without the credential the primary would send (http-router.md, standby routers).
    bool serving() const;
    // A standby's primary keeps its tokens in its rows (no tokens route): nothing to wait for.
    void settle_tokens();
    // Whether the file follows a primary's (a standby's, not promoted since).
    bool following() const;
    // Where the file stands (its seq and current history): what a standby asks its primary's
    // feed from. None while not ready.
    std::optional<engine::Position> position();
    // A change of the primary's feed (a block or its forks) applied to the file, then the maps
    // rebuilt from it. Follower only.
    [[nodiscard]] engine::Status apply(const engine::FeedEntry& entry);
    // The primary's whole image put in the file's place (a first start, a diverged history, a
    // feed outrun), checked against the seq its end frame named, followed from its history on,
    // and the maps rebuilt from it. Follower only.
    [[nodiscard]] engine::Status adopt_image(std::span<const std::byte> image, uint64_t seq);
    // §4.2, §10: the file's history forked in the engine, then, as the first change as primary,
    // a `terms` row of the term plus one with the new history (`at`, `by`), and `starts` bumped;
    // from then on the file is a primary's.
    [[nodiscard]] engine::Result<Promoted> promote(const std::string& by, int64_t at_ms);
    // The file itself, for its feed to be served from (shard/standby.h): null while not ready.
    // Valid until close(); a primary's never changes while it is open.
    engine::Database* database() { return db_.get(); }

    // Closes the file (a sync first). Later writes fail. Idempotent.
    void close();

  private:
    Directory() = default;
    struct Statement;
    // put_pair's and remove_pair's `kept`: a replica row naming `kept_on` for each tenant of
    // `kept` still on `node`, with no row of its own, while `node`'s pair is still `kept_on`;
    // those tenants. Caller holds write_mu_.
    std::vector<std::string> keep_replicas(std::vector<Statement>& statements,
                                           std::string_view node,
                                           const std::vector<std::string>& kept,
                                           const std::string& kept_on);
    // Runs `texts` with their parameters as one block, synced; caller holds write_mu_.
    engine::Status write_locked(const std::vector<Statement>& statements);
    engine::Status load();
    // A row's token: from its token_env or token_file, else the sidecar, else `in_row` (a
    // directory written before the sidecar). "" when it cannot be read, said once on stderr.
    std::string token_of(const NodeRow& row, const std::string& in_row,
                         const DirectoryMaps* before) const;
    // A primary's, as it opens: fields a file written by an earlier version lacks added (the
    // `nodes` fields of item 8, `tenants.moving_from`), and tokens still in rows moved into the
    // sidecar and cleared from the rows.
    engine::Status upgrade_locked();
    engine::Result<Promoted> promote_locked(const std::string& by, int64_t at_ms);
    void publish(std::shared_ptr<DirectoryMaps> maps);
    // After a synced write: the maps copied, edited and published; caller holds write_mu_.
    engine::Status change(const std::function<void(DirectoryMaps&)>& edit);

    std::string path_;
    DirectoryOpening how_;
    std::unique_ptr<index::IndexSet> indexes_;
    std::unique_ptr<engine::Database> db_;
    std::mutex write_mu_;         // serialises changes; taken before maps_mu_
    mutable std::mutex maps_mu_;  // guards the pointer swap only
    std::shared_ptr<const DirectoryMaps> maps_;
    std::unique_ptr<TokenSidecar> tokens_;  // `<path>.tokens`; under write_mu_
    // Rows whose `token` field still holds a secret, seen by the last load(); under write_mu_.
    std::vector<std::string> tokens_in_rows_;
    // Read on every forwarded request: atomics, not maps_mu_.
    std::atomic<bool> ready_{false};      // a file is open (db_), so the maps are its
    std::atomic<bool> following_{false};  // a follower's file, not promoted
    // False from a standby's first start until its primary's tokens are taken (take_tokens) or
    // found not to be kept apart (settle_tokens).
    std::atomic<bool> tokens_settled_{true};
    bool promoted_ = false;               // under write_mu_
};

// `[a-z0-9_-]{1,64}`: the names of tenants, nodes, regions and zones (§4.2).
bool valid_name(std::string_view name);

// §4.1: a tenant row's `node` of a tenant at home in a region keeping its own directory is
// `@<region>`, which no node can be named. The region, or nullopt for a node's name.
std::optional<std::string_view> home_region(std::string_view node);

}  // namespace fenec::shard
