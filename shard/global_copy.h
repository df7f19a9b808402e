// shard/global_copy.h: a region's router's copy of the global directory (router.md §11.3, §4.2):
// the file `<directory>.global`, beside the region's own, followed from the global router's
// `/_replication` feed (then its standbys', in --global's order) by the follower a standby router
// uses (shard/standby.h), with the replication token; its maps offered to the rest of the router,
// read-only.
//
// Invariant: the copy is written only with what the global router's feed sent (it is a follower's
// file, scope `global`, refused otherwise as it lands): this router never changes the global
// directory through it, and never grants, fails over or repairs from it.
//
// Threads: the follower's one thread (a blocking connection); `maps()` from any thread, never
// waiting on it. stop() before the router closes its own directory.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/clock.h"
#include "engine/status.h"
#include "json/writer.h"
#include "shard/directory.h"
#include "shard/options.h"

namespace fenec::shard {

class DirectoryFollower;
struct FailedOver;

// The copy's file: `<directory>.global` (§11.3 [ours]).
inline constexpr std::string_view global_copy_suffix = ".global";

class GlobalCopy {
  public:
    // Opens (or, on a first start, waits for) `<options.directory>.global`, a follower's file of
    // scope `global`. Needs --region, --global and --replication-token (check_options). An error
    // names the file.
    static engine::Result<std::unique_ptr<GlobalCopy>> open(const RouterOptions& options,
                                                            const engine::Clock& clock);
    ~GlobalCopy();
    GlobalCopy(const GlobalCopy&) = delete;
    GlobalCopy& operator=(const GlobalCopy&) = delete;

    // Set before start(): run with the failovers each change of the copy shows (§9.12), so a
    // region's router cuts what it has out to a node the global router failed over.
    void on_failover(std::function<void(const std::vector<FailedOver>&)> fn);
    // Starts following; stops (the follower joined) and closes the file. stop() is idempotent.
    void start();
    void stop();

    // The copy as it stands: empty maps until its first image came.
    std::shared_ptr<const DirectoryMaps> maps() const;
    // Whether requests may be placed by it: its image came and, on a first start, the global
    // router's token sidecar with it (Directory::serving), so no node it keeps is called without
    // the credential the global router would send.
    bool ready() const;
    // Why the global router's last image was refused (a --global URL serving a directory of
    // another scope), "" when none was (DirectoryFollower::refused).
    std::string refused() const;
    // For GET /_replication/status: {"file","ready","following":{the follower's}}.
    void write_json(json::Writer& w) const;

  private:
    GlobalCopy() = default;
    std::string path_;
    std::unique_ptr<Directory> directory_;
    std::unique_ptr<DirectoryFollower> follower_;
};

}  // namespace fenec::shard
