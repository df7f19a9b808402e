// ql/budget.cc: the run budget of ql/budget.h.
#include "ql/budget.h"

namespace fenec::ql {

Budget::Budget(const BudgetLimits& limits) : limits_(limits) {
    if (limits_.time_ms_max > 0 && limits_.clock) {
        deadline_ns_ = limits_.clock->steady_ns() + limits_.time_ms_max * 1'000'000;
    }
}

bool Budget::check_clock() {
    if (passed_ != BudgetKind::none) return false;
    if (deadline_ns_ != 0 && limits_.clock->steady_ns() >= deadline_ns_) {
        passed_ = BudgetKind::time;
    }
    return passed_ == BudgetKind::none;
}

Error Budget::error() const {
    Error e;
    e.budget = passed_;
    if (passed_ == BudgetKind::rows) {
        e.status_code = 400;
        e.max = limits_.rows_max;
        e.message = "the statement visited more than --statement-rows (" +
                    std::to_string(limits_.rows_max) +
                    ") rows: narrow it with an index or a tighter `where`";
    } else {
        e.status_code = 503;
        e.max = static_cast<uint64_t>(limits_.time_ms_max);
        e.message = "the statement ran longer than --statement-ms (" +
                    std::to_string(limits_.time_ms_max) + " ms)";
    }
    return e;
}

}  // namespace fenec::ql
