// shard/global_copy.cc: a region's router's copy of the global directory (shard/global_copy.h).
#include "shard/global_copy.h"

#include "shard/standby.h"

namespace fenec::shard {

engine::Result<std::unique_ptr<GlobalCopy>> GlobalCopy::open(const RouterOptions& options,
                                                             const engine::Clock& clock) {
    std::unique_ptr<GlobalCopy> g(new GlobalCopy());
    g->path_ = options.directory + std::string(global_copy_suffix);
    DirectoryOpening how;
    how.role = DirectoryOpening::Role::follower;
    how.feed_bytes = options.replication_buffer_bytes;
    how.by = options.listen;
    how.scope = "global";
    auto d = Directory::open(g->path_, how);
    if (!d.is_ok()) return d.status();
    g->directory_ = std::move(d.value());
    DirectoryFollower::Options fo;
    fo.primaries = global_urls(options.global.value_or(""));
    fo.token = options.replication_token.value_or("");
    fo.timeout_ms = options.upstream_timeout_ms;
    fo.what = "following the global directory at";
    g->follower_ = std::make_unique<DirectoryFollower>(*g->directory_, std::move(fo), clock);
    return g;
}

GlobalCopy::~GlobalCopy() { stop(); }

void GlobalCopy::on_failover(std::function<void(const std::vector<FailedOver>&)> fn) {
    follower_->on_failover(std::move(fn));
}

void GlobalCopy::start() { follower_->start(); }

void GlobalCopy::stop() {
    if (follower_) follower_->stop();
    if (directory_) directory_->close();
}

std::shared_ptr<const DirectoryMaps> GlobalCopy::maps() const { return directory_->maps(); }

bool GlobalCopy::ready() const { return directory_->serving(); }

std::string GlobalCopy::refused() const { return follower_->refused(); }

void GlobalCopy::write_json(json::Writer& w) const {
    w.begin_object();
    w.key("file");
    w.string(path_);
    w.key("ready");
    w.boolean(ready());
    w.key("following");
    follower_->write_json(w);
    w.end_object();
}

}  // namespace fenec::shard
