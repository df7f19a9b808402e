// test/support/lease_check_main.cc: fenec-lease-check, the lease-safety checker
// (test/support/lease_check.h) run over a recording a drill wrote (`make drill`,
// bench/drill_client.py), so a run of real processes is judged by the same code as the tests.
//
// The recording is text, one fact a line, fields separated by single spaces; times are the
// recording process's CLOCK_MONOTONIC in nanoseconds:
//
//   write <tenant> <node> <id> <key> <sent_ns> <acked_ns>      a write a node acknowledged
//   lease <node> <asked_ns> <answered_ns> <left_ms> <tenants>   a GET /_admin/lease answer
//                                                               (tenants: a,b,c; `-` for none)
//   row <tenant> <key> <id>                                     a row of the final primary's
//
// Blank lines and lines starting with `#` are skipped. Prints each violation on a line of its own
// and a last line counting what was read; exits 0 when the run was safe, 1 when a violation was
// found, 2 when the file cannot be read or a line does not parse (naming the line).
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test/support/lease_check.h"

namespace {

using fenec::test::AckedWrite;
using fenec::test::FinalRows;
using fenec::test::LeaseLedger;
using fenec::test::LeaseReport;

std::vector<std::string> split_commas(const std::string& s) {
    std::vector<std::string> out;
    if (s == "-") return out;
    std::stringstream in(s);
    std::string part;
    while (std::getline(in, part, ',')) {
        if (!part.empty()) out.push_back(part);
    }
    return out;
}

// One line into the ledger or the final rows; false when it does not parse.
bool read_line(const std::string& line, LeaseLedger& ledger, FinalRows& rows, size_t& row_count) {
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "write") {
        AckedWrite w;
        if (!(in >> w.tenant >> w.node >> w.id >> w.key >> w.sent_ns >> w.acked_ns)) return false;
        ledger.write(std::move(w));
    } else if (kind == "lease") {
        LeaseReport r;
        std::string tenants;
        if (!(in >> r.node >> r.asked_ns >> r.answered_ns >> r.left_ms >> tenants)) return false;
        r.tenants = split_commas(tenants);
        ledger.lease(std::move(r));
    } else if (kind == "row") {
        std::string tenant, key;
        int64_t id = 0;
        if (!(in >> tenant >> key >> id)) return false;
        rows[tenant][key] = id;
        ++row_count;
    } else {
        return false;
    }
    std::string extra;
    return !(in >> extra);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: fenec-lease-check <recording>\n");
        return 2;
    }
    std::ifstream file(argv[1]);
    if (!file) {
        std::fprintf(stderr, "fenec-lease-check: cannot read %s\n", argv[1]);
        return 2;
    }
    LeaseLedger ledger;
    FinalRows rows;
    size_t row_count = 0;
    std::string line;
    for (size_t number = 1; std::getline(file, line); ++number) {
        if (line.empty() || line[0] == '#') continue;
        if (!read_line(line, ledger, rows, row_count)) {
            std::fprintf(stderr, "fenec-lease-check: %s:%zu does not parse: %s\n", argv[1], number,
                         line.c_str());
            return 2;
        }
    }
    const std::vector<std::string> violations = ledger.check(rows);
    for (const std::string& v : violations) std::printf("%s\n", v.c_str());
    std::printf(
        "fenec-lease-check: %zu writes, %zu lease reports, %zu final rows: %zu violations\n",
        ledger.writes(), ledger.leases(), row_count, violations.size());
    return violations.empty() ? 0 : 1;
}
