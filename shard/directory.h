// shard/directory.h: the directory (router.md §4): which node holds which tenant, kept in a Fenec
// tenant file of its own, opened through the engine's public API and written with FenecQL.
//
// Invariant (§4.1): every change is one write block, synced to disk before the maps change and
// before anything acts on it, so a placement is never used or answered before it would survive a
// crash. Writes are serialised under one mutex; readers take an immutable snapshot of the maps
// (`maps()`), swapped whole after each change, so a lookup never waits on a write.
//
// This first part keeps `directory`, `terms`, `nodes` and `tenants` in use; the collections of
// later work (`pairs`, `replicas`, `regions`, `leases`) are created with the file so a later
// router opens it without an alter. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/status.h"

namespace fenec::engine {
class Database;
}
namespace fenec::index {
class IndexSet;
}

namespace fenec::shard {

// The directory format this router writes and reads (§4.2); a higher one is refused at start.
inline constexpr int64_t directory_format = 1;

struct NodeRow {
    std::string name;
    std::string addr;   // host:port
    std::string token;  // the node's admin token: never answered by any endpoint
    std::string region; // "" = the unnamed region
    std::string zone;   // "" = not recorded
    std::string lease = "unknown";  // "takes", "none" or "unknown"
};

struct TenantRow {
    std::string name;
    std::string node;
    std::string state = "active";  // active, moving, creating, deleting
    std::string moving_to;         // "" when not moving
    std::string lineage;           // 16 hex, as the node answered it; "" when it did not say
};

// One immutable view of the directory.
struct DirectoryMaps {
    std::string id;       // 16 hex, drawn at creation
    std::string scope;    // "global"
    int64_t starts = 0;   // leading starts (§9.5 numbers grants by it)
    int64_t term = 0;     // highest `terms` row
    std::map<std::string, NodeRow, std::less<>> nodes;
    std::map<std::string, TenantRow, std::less<>> tenants;
};

class Directory {
  public:
    // Opens the file at `path`, creating it with its collections, its `directory` row and term 0
    // when missing; loads the maps and bumps `starts` (§2.3 step 4). A file of a higher format, a
    // scope other than `global`, or one the engine refuses is an error naming the path.
    static engine::Result<std::unique_ptr<Directory>> open(const std::string& path);
    ~Directory();
    Directory(const Directory&) = delete;
    Directory& operator=(const Directory&) = delete;

    // The current snapshot; cheap, never waits on a write.
    std::shared_ptr<const DirectoryMaps> maps() const;

    // Each is one synced write block, then the maps change. An error leaves the maps unchanged.
    [[nodiscard]] engine::Status put_node(const NodeRow& node);
    [[nodiscard]] engine::Status remove_node(std::string_view name);
    [[nodiscard]] engine::Status put_tenant(const TenantRow& tenant);
    [[nodiscard]] engine::Status remove_tenant(std::string_view name);
    // A move's flip (§7.2 step 6): `node: to`, `state: "active"`, `moving_to` and `failed_from`
    // cleared, in one statement, so the tenant is on one node or the other, never both or neither.
    [[nodiscard]] engine::Status flip_tenant(std::string_view name, const std::string& to);

    // Closes the file (a sync first). Later writes fail. Idempotent.
    void close();

  private:
    Directory() = default;
    struct Statement;
    // Runs `texts` with their parameters as one block, synced; caller holds write_mu_.
    engine::Status write_locked(const std::vector<Statement>& statements);
    engine::Status load();
    void publish(std::shared_ptr<const DirectoryMaps> maps);

    std::string path_;
    std::unique_ptr<index::IndexSet> indexes_;
    std::unique_ptr<engine::Database> db_;
    std::mutex write_mu_;  // serialises changes; taken before maps_mu_
    mutable std::mutex maps_mu_;  // guards the pointer swap only
    std::shared_ptr<const DirectoryMaps> maps_;
};

// `[a-z0-9_-]{1,64}`: the names of tenants, nodes, regions and zones (§4.2).
bool valid_name(std::string_view name);

}  // namespace fenec::shard
