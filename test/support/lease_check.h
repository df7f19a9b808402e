// test/support/lease_check.h: the lease-safety checker. A test or drill that fails nodes over
// records each write a node acknowledged (tenant, node, id, a key of the writer's own, when it
// was sent and when its 200 came back) and each lease as the nodes report it (`GET
// /_admin/lease`, polled: when asked, when answered, the lease left and the tenants it names);
// afterwards it hands the rows each tenant holds on its final primary. `check` then asserts:
//
// 1. Every acknowledged write was acknowledged inside a lease its node reported naming its tenant
//    (a node that ignores its lease fails here).
// 2. No two nodes held a lease naming one tenant at the same time, as they reported them: the
//    spans each report makes certain ([answered, asked + left]) never overlap between nodes.
//    A lease ends by running out, or — in a move, where the node stays up — by a grant that drops
//    the tenant. A test declares such a move (`moved`: tenant, source node, when it was asked), and
//    from then on a report of the source makes its lease certain only as far as the source was
//    seen still holding it: through the last of the reports after it that name the tenant under
//    the same list number (a list's number changes whenever its tenants do, so two reports of one
//    list saw no grant drop the tenant between them), and never past the move's asking unless a
//    report saw it held. A target granted while the source still held the tenant is named; a
//    target granted once the source's grant dropped it is not.
// 3. No acknowledged write is missing afterwards: its key is among its tenant's final rows, with
//    the id it was acknowledged with.
//
// The bounds are taken so that polling cannot fake a violation: a lease reported at a poll may
// have begun right after the poll before it was asked (that poll's view was taken at some moment
// before its answer), and ends no later than the poll's answer plus the time left it named. A lease
// shorter than the polling interval could hide from check 1; the leases tested here are hundreds of
// times longer than the polls.
//
// Times are one monotonic clock of the recording process (CLOCK_MONOTONIC), in nanoseconds.
// `LeaseLedger` is thread-safe: writers and pollers record from their own threads.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace fenec::test {

struct AckedWrite {
    std::string tenant;
    std::string node;  // the node that answered it (through the router: the tenant's node then)
    int64_t id = 0;    // the `_id` it was answered with
    std::string key;   // unique to this write, stored in the row
    int64_t sent_ns = 0;
    int64_t acked_ns = 0;
};

struct LeaseReport {
    std::string node;
    int64_t asked_ns = 0;
    int64_t answered_ns = 0;
    int64_t left_ms = 0;               // 0: none runs
    std::vector<std::string> tenants;  // the list the lease names
    std::optional<uint64_t> list;      // that list's number, none when the node holds none
};

// A tenant's rows afterwards: key → id.
using FinalRows = std::map<std::string, std::map<std::string, int64_t>>;

class LeaseLedger {
  public:
    // `leased`: the nodes take leases. Over nodes that take none (a failover by hand) there is no
    // lease to report, and only rule 3 is checked.
    explicit LeaseLedger(bool leased = true) : leased_(leased) {}
    bool leased() const { return leased_; }
    void write(AckedWrite w);
    void lease(LeaseReport r);
    // A move of `tenant` off `node` was asked at `asked_ns`: from then on a grant may drop the
    // tenant from that node's lease before the lease runs out (rule 2 above).
    void moved(std::string tenant, std::string node, int64_t asked_ns);
    // Every violation found, each a sentence naming the tenant, the nodes and the instants; empty
    // when the run was safe. `final` holds every tenant written.
    std::vector<std::string> check(const FinalRows& final) const;
    size_t writes() const;
    size_t leases() const;
    // Whether `node` reported a lease naming `tenant` in a report asked after `after_ns`.
    bool reported(const std::string& node, const std::string& tenant, int64_t after_ns) const;

  private:
    const bool leased_;
    mutable std::mutex mu_;
    std::vector<AckedWrite> writes_;
    std::vector<LeaseReport> leases_;
    std::map<std::pair<std::string, std::string>, int64_t> moved_;  // (tenant, node) → first asked
};

}  // namespace fenec::test
