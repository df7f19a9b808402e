// engine/feed.cc: the replication feed (engine.md §11): entries held by landing order, evicted
// oldest first past bytes_max, shown to cursors only once durable_seq covers them.
#include "engine/feed.h"

#include <algorithm>

#include "engine/database.h"

namespace fenec::engine {

const char* need_image_name(NeedImage::Why why) {
    switch (why) {
        case NeedImage::Why::forked: return "forked";
        case NeedImage::Why::ahead: return "ahead";
        case NeedImage::Why::behind: return "behind";
    }
    return "behind";
}

namespace {
std::vector<std::pair<HistoryId, Seq>> pairs_of(const std::vector<Fork>& forks) {
    std::vector<std::pair<HistoryId, Seq>> out;
    out.reserve(forks.size());
    for (const Fork& f : forks) out.emplace_back(f.history, f.seq);
    return out;
}
}  // namespace

Feed::Feed(uint64_t bytes_max) : state_(std::make_shared<FeedState>()) {
    state_->bytes_max = bytes_max;
}

Feed::~Feed() { close(); }

void Feed::reset(Seq seq, Seq durable_seq, const std::vector<Fork>& forks) {
    std::lock_guard<std::mutex> g(state_->mu);
    state_->entries.clear();
    state_->bytes = 0;
    state_->seq = seq.v;
    state_->durable = durable_seq.v;
    state_->forks = pairs_of(forks);
    ++state_->forks_version;
    state_->cv.notify_all();
}

void Feed::push(Seq first, Seq last, int64_t landed_ms, std::vector<std::byte> records) {
    FeedState& s = *state_;
    std::lock_guard<std::mutex> g(s.mu);
    s.bytes += records.size();
    s.entries.push_back(FeedState::Held{
        first.v, last.v, landed_ms,
        std::make_shared<const std::vector<std::byte>>(std::move(records))});
    s.seq = last.v;
    // Oldest first; the newest stays even alone past the bound, so a follower at the seq
    // before it is never sent to an image for one large block.
    while (s.entries.size() > 1 && s.bytes > s.bytes_max) {
        s.bytes -= s.entries.front().records->size();
        s.entries.pop_front();
    }
    // Readers wake on durable(), not here: nothing new is readable yet.
}

void Feed::set_forks(const std::vector<Fork>& forks) {
    std::lock_guard<std::mutex> g(state_->mu);
    state_->forks = pairs_of(forks);
    ++state_->forks_version;
    state_->cv.notify_all();
}

void Feed::durable(Seq seq) {
    std::lock_guard<std::mutex> g(state_->mu);
    if (seq.v <= state_->durable) return;
    state_->durable = seq.v;
    state_->cv.notify_all();
}

void Feed::close() {
    std::lock_guard<std::mutex> g(state_->mu);
    state_->closed = true;
    state_->cv.notify_all();
}

Seq Feed::oldest() const {
    std::lock_guard<std::mutex> g(state_->mu);
    return Seq{state_->entries.empty() ? 0 : state_->entries.front().first};
}

uint64_t Feed::bytes() const {
    std::lock_guard<std::mutex> g(state_->mu);
    return state_->bytes;
}

uint64_t Feed::bytes_max() const { return state_->bytes_max; }

std::variant<FeedCursor, NeedImage> Feed::since(Position pos) const {
    const FeedState& s = *state_;
    std::lock_guard<std::mutex> g(s.mu);
    using Why = NeedImage::Why;
    size_t i = 0;
    while (i < s.forks.size() && s.forks[i].first.v != pos.history.v) ++i;
    if (i == s.forks.size()) return NeedImage{Why::forked};  // another history
    const bool last_fork = i + 1 == s.forks.size();
    if (pos.seq.v < s.forks[i].second.v) return NeedImage{Why::forked};
    if (!last_fork && pos.seq.v > s.forks[i + 1].second.v) {
        return NeedImage{Why::forked};  // wrote past the fork this primary took
    }
    if (pos.seq.v > s.seq) return NeedImage{Why::ahead};
    if (s.entries.empty()) {
        if (pos.seq.v != s.seq) return NeedImage{Why::behind};
    } else if (pos.seq.v + 1 < s.entries.front().first) {
        return NeedImage{Why::behind};
    }
    // A follower on an older history first gets the whole fork list (version 0: not yet sent).
    return FeedCursor(state_, pos.seq.v, last_fork ? s.forks_version : 0);
}

FeedNext FeedCursor::next(std::chrono::milliseconds wait) {
    FeedState& s = *state_;
    const auto deadline = std::chrono::steady_clock::now() + wait;
    std::unique_lock<std::mutex> l(s.mu);
    for (;;) {
        if (s.closed) return FeedNext{FeedNext::Kind::closed, {}};
        if (forks_version_ != s.forks_version) {
            forks_version_ = s.forks_version;
            FeedNext out{FeedNext::Kind::entry, {}};
            out.entry.type = FeedEntry::Type::forks;
            out.entry.forks = s.forks;
            return out;
        }
        if (!s.entries.empty() && s.entries.front().first > next_after_ + 1) {
            return FeedNext{FeedNext::Kind::behind, {}};
        }
        auto it = std::lower_bound(
            s.entries.begin(), s.entries.end(), next_after_ + 1,
            [](const FeedState::Held& h, uint64_t seq) { return h.last < seq; });
        if (it != s.entries.end() && it->first == next_after_ + 1 && it->last <= s.durable) {
            FeedNext out{FeedNext::Kind::entry, {}};
            out.entry.type = FeedEntry::Type::block;
            out.entry.first = Seq{it->first};
            out.entry.last = Seq{it->last};
            out.entry.landed_ms = it->landed_ms;
            out.entry.records = it->records;
            next_after_ = it->last;
            return out;
        }
        if (s.cv.wait_until(l, deadline) == std::cv_status::timeout) {
            if (s.closed) return FeedNext{FeedNext::Kind::closed, {}};
            return FeedNext{FeedNext::Kind::idle, {}};
        }
    }
}

}  // namespace fenec::engine
