// ql/budget.h: what one run of statements may spend (issue 17): rows visited and time. A row is
// visited each time it is read from a collection, by a scan, an index's candidates, an ordered
// index walk, a lookup or a ranked search, whether or not the filter keeps it: a `count(*)` over
// a million rows visits a million, and so does a filter that keeps none. The clock is read once
// per `clock_visits` visits, so a budget costs no system call per row.
//
// A passed budget stops the loop that passed it and fails the run with an Error naming the
// budget (Error::budget): the executor checks it after every statement, before its answer is
// used, so a write block that passes it rolls back and lands nothing. The server turns it into
// 400 (rows) or 503 with Retry-After (time) in its one error function.
//
// Not thread-safe: one Budget serves one run on one thread.
#pragma once

#include <cstdint>

#include "engine/clock.h"
#include "ql/error.h"

namespace fenec::ql {

struct BudgetLimits {
    uint64_t rows_max = 0;                 // rows visited; 0: no bound
    int64_t time_ms_max = 0;               // from the run's start; 0: no bound
    const engine::Clock* clock = nullptr;  // steady_ns; required when time_ms_max > 0
    bool any() const { return rows_max > 0 || (time_ms_max > 0 && clock); }
};

class Budget {
  public:
    // Visits between two readings of the clock: a few microseconds of work at most.
    static constexpr uint64_t clock_visits = 1024;

    // The run starts now: the time bound is measured from here.
    explicit Budget(const BudgetLimits& limits);

    // Counts `n` visits; false once the budget is passed (and from then on), when the caller
    // stops its loop.
    bool visit(uint64_t n = 1) {
        if (passed_ != BudgetKind::none) return false;
        const uint64_t before = visits_;
        visits_ += n;
        if (limits_.rows_max > 0 && visits_ > limits_.rows_max) {
            passed_ = BudgetKind::rows;
            return false;
        }
        if (deadline_ns_ != 0 && (before / clock_visits != visits_ / clock_visits)) check_clock();
        return passed_ == BudgetKind::none;
    }
    // Reads the clock now: a step that does much work per visit (a sort, a ranked search) asks
    // at its end.
    bool check_clock();

    BudgetKind passed() const { return passed_; }
    uint64_t visits() const { return visits_; }
    // The refusal for a passed budget (fenecql.md §14): rows 400, time 503, naming the flag.
    Error error() const;

  private:
    BudgetLimits limits_;
    int64_t deadline_ns_ = 0;  // 0: no time bound
    uint64_t visits_ = 0;
    BudgetKind passed_ = BudgetKind::none;
};

}  // namespace fenec::ql
