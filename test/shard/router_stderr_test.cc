// test/shard/router_stderr_test.cc: the router's own lines (moves, copies, repairs, standbys) on a
// stderr nobody reads. A pipe whose reader has stopped (a log shipper that stalled) fills, and a
// write(2) to it blocks the thread that writes; the router's lines go through a queue instead, so
// every request that logs is still answered, and the router still stops when told.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "test/shard/cluster_fixture.h"
#include "test/support/child.h"

namespace fenec::test::router_stderr_test {
namespace {

class RouterStderr : public ClusterTest<2> {
  protected:
    void SetUp() override {
        const std::string fifo = dir_.path() + "/router.err";  // where start_router sends stderr
        ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
        reader_ = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // read only at the end
        ASSERT_GE(reader_, 0) << std::strerror(errno);
        // The smallest pipe the kernel makes (a page): a few dozen lines fill it.
        ASSERT_GT(::fcntl(reader_, F_SETPIPE_SZ, 4096), 0) << std::strerror(errno);
        start_router({"--replicas"});
    }
    void TearDown() override {
        ClusterTest<2>::TearDown();
        if (reader_ >= 0) ::close(reader_);
    }
    // What the pipe holds now.
    std::string drain() {
        std::string out;
        char buf[4096];
        ssize_t n;
        while ((n = ::read(reader_, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
        return out;
    }
    int reader_ = -1;
};

// Each create places its replica in the primary's own zone, which the router says in a line of
// ~250 bytes: 120 of them are about seven times what the pipe takes.
TEST_F(RouterStderr, ALogNobodyReadsHoldsNoRequestAndNoStop) {
    const std::string zone(60, 'z');
    ASSERT_EQ(add(0, "n1", "eu", zone).status, 201);
    ASSERT_EQ(add(1, "n2", "eu", zone).status, 201);
    for (int i = 0; i < 120; ++i) {
        const std::string t = "log-" + std::to_string(i) + "-" + std::string(50, 'x');
        Reply r = create(t, "n1");
        ASSERT_EQ(r.status, 201) << "create " << i << ": " << r.body;
        ASSERT_TRUE(Json(r.body).boolean("same_zone")) << r.body;
    }
    const std::string m = metrics();
    EXPECT_EQ(sample(m, "fenec_router_log_lines_dropped_total"), "0") << m;

    // Nor does it hold a stop: the lines stderr will not take are given up once the router closes.
    const int status = stop_within(router_->pid(), std::chrono::seconds(10),
                                   [&] { return router_->kill(SIGTERM); });
    EXPECT_NE(status, 128 + SIGKILL) << "no exit within 10 s of SIGTERM";

    // What did reach the pipe came in whole lines, none cut into by another.
    const std::string text = drain();
    EXPECT_NE(text.find("in the zone `" + zone + "`"), std::string::npos) << text;
    size_t from = 0;
    while (from < text.size()) {
        const size_t end = text.find('\n', from);
        ASSERT_NE(end, std::string::npos) << "a line cut short: " << text.substr(from);
        EXPECT_EQ(text.compare(from, 13, "fenec-shard: "), 0) << text.substr(from, end - from);
        from = end + 1;
    }
}

}  // namespace
}  // namespace fenec::test::router_stderr_test
