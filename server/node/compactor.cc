// server/node/compactor.cc: see compactor.h.
#include "server/node/compactor.h"

#include <chrono>
#include <utility>

#include "server/node/registry.h"
#include "server/node/tenant.h"
#include "server/obs/audit.h"

namespace fenec::node {

Compactor::Compactor(Registry& registry, obs::Registry& metrics, obs::LineLog* audit,
                     std::function<int64_t()> now_ms, CompactorOptions options)
    : registry_(registry), audit_(audit), now_ms_(std::move(now_ms)), options_(options) {
    compactions_ =
        &metrics.counter("fenec_compactions_total",
                         "tenant files compacted, by trigger and outcome", {"trigger", "outcome"});
    // At 0 from the start, so an alert on increase() sees the first (a series born at 1 does not).
    for (const char* trigger : {"auto", "statement"}) {
        for (const char* outcome : {"ok", "failed", "cancelled"})
            compactions_->with({trigger, outcome});
    }
    reclaimed_bytes_ = &metrics
                            .counter("fenec_compaction_reclaimed_bytes_total",
                                     "bytes compactions took off tenant files")
                            .with({});
    metrics.counter_fn("fenec_compaction_checks_total",
                       "times the compactor looked over the open tenants",
                       [this] { return static_cast<double>(checks_.load()); });
}

Compactor::~Compactor() { stop(); }

void Compactor::start() {
    if (options_.dead_share_min <= 0 || thread_.joinable()) return;
    thread_ = std::thread([this] { run(); });
}

void Compactor::stop() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Compactor::run() {
    for (;;) {
        {
            std::unique_lock lock(mu_);
            cv_.wait_for(lock, std::chrono::milliseconds(options_.check_ms),
                         [this] { return stopping_; });
            if (stopping_) return;
        }
        // One at a time (compactor.h); the reference keeps the tenant open until it is done.
        const int64_t now = now_ms_();
        std::erase_if(failed_until_ms_, [now](const auto& f) { return f.second <= now; });
        std::shared_ptr<Tenant> t = registry_.compaction_candidate(
            options_.dead_share_min, options_.file_bytes_min,
            [this](const std::string& name) { return failed_until_ms_.contains(name); });
        if (t && compact(*t) == Outcome::failed)
            failed_until_ms_[t->name()] = now + options_.retry_after_failure_ms;
        checks_.fetch_add(1, std::memory_order_relaxed);
    }
}

Compactor::Outcome Compactor::outcome_of(std::optional<engine::Code> error) {
    if (!error) return Outcome::ok;
    return *error == engine::Code::cancelled ? Outcome::cancelled : Outcome::failed;
}

Compactor::Outcome Compactor::compact(Tenant& t) {
    const uint64_t before = t.db().usage().file_bytes;
    const engine::Status st = t.db().compact();
    const uint64_t after = st.is_ok() ? t.db().usage().file_bytes : before;
    const Outcome outcome =
        outcome_of(st.is_ok() ? std::nullopt : std::optional<engine::Code>(st.code()));
    count("auto", outcome, before, after);
    if (st.is_ok()) t.refresh_memory();
    if (audit_) {
        obs::AuditLine line;
        line.at_ms = now_ms_();
        line.event = obs::AuditEvent::compact;
        line.fields = {{"tenant", t.name()},
                       {"trigger", "auto"},
                       {"before", before},
                       {"after", after},
                       {"status", st.is_ok() ? "ok" : st.to_string()}};
        audit_->write(obs::audit_line(line));
    }
    return outcome;
}

void Compactor::count_statement(std::optional<engine::Code> error, uint64_t before_bytes,
                                uint64_t after_bytes) {
    count("statement", outcome_of(error), before_bytes, after_bytes);
}

void Compactor::count(const char* trigger, Outcome outcome, uint64_t before_bytes,
                      uint64_t after_bytes) {
    const char* name = outcome == Outcome::ok          ? "ok"
                       : outcome == Outcome::cancelled ? "cancelled"
                                                       : "failed";
    compactions_->with({trigger, name}).inc();
    if (outcome == Outcome::ok && after_bytes < before_bytes)
        reclaimed_bytes_->inc(before_bytes - after_bytes);
}

}  // namespace fenec::node
