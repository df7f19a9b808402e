// test/index/hnsw_recall_slow_test.cc: recall@10 against exact search on 100,000 clustered
// 128-dimension rows, unfiltered (>= 0.99) and filtered to 1% and 25% of rows (>= 0.98). Slow
// (minutes under ASan), so it runs in index_slow_tests under the `slow` label (make test-slow);
// hnsw_index_test.cc checks the same on 10,000 rows in the unit suite.
#include <gtest/gtest.h>

#include "test/index/hnsw_fixture.h"

namespace fenec::index::hnsw_recall_slow_test {
namespace {

using namespace hnsw_test;

TEST(HnswSlowRecall, HundredThousandClustered128) {
    recall_check(100000, 200, {1.0, 0.01, 0.25}, 200);
}

}  // namespace
}  // namespace fenec::index::hnsw_recall_slow_test
