// test/server/runtime/service_test.cc: main()'s one shape (server/runtime/service.h), in process:
// --help prints and exits 0 without making the server; a refusal exits 2 with "<program>: why"
// and makes nothing; a failed prepare or serve exits 2 and goes no further; a served server prints
// its ready line, waits for a signal and drains before exiting 0, its steps in that order. The
// signal case runs in a child process (gtest's death-test fork), since run() blocks SIGTERM and
// SIGINT for good and leaves a thread waiting for a second one.
#include "server/runtime/service.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

namespace fenec::server::service_test {
namespace {

// A server whose steps are recorded; `fail` names the step that fails.
struct Recorder {
    std::vector<std::string> steps;
    std::string fail;

    Service service() {
        return Service{[this] { return step("prepare"); }, [this] { return step("serve"); },
                       [this] {
                           steps.push_back("ready");
                           return std::string("test-server ready");
                       },
                       [this] { steps.push_back("drain"); }};
    }
    std::string step(const std::string& name) {
        steps.push_back(name);
        return name == fail ? name + " failed" : "";
    }
};

TEST(Service, HelpPrintsAndMakesNothing) {
    bool made = false;
    testing::internal::CaptureStdout();
    const int rc = run("test-server", Start{true, "usage: test-server\n", ""}, [&] {
        made = true;
        return Service{};
    });
    EXPECT_EQ(testing::internal::GetCapturedStdout(), "usage: test-server\n");
    EXPECT_EQ(rc, 0);
    EXPECT_FALSE(made);
}

TEST(Service, RefusalExits2AndMakesNothing) {
    bool made = false;
    testing::internal::CaptureStderr();
    const int rc = run("test-server", Start{false, "", "unknown flag --x (see --help)"}, [&] {
        made = true;
        return Service{};
    });
    EXPECT_EQ(testing::internal::GetCapturedStderr(),
              "test-server: unknown flag --x (see --help)\n");
    EXPECT_EQ(rc, 2);
    EXPECT_FALSE(made);
}

TEST(Service, FailedStepsExit2AndGoNoFurther) {
    // run() blocks SIGTERM and SIGINT before it makes the server: given back after, so the rest
    // of this binary can still be stopped.
    sigset_t before;
    pthread_sigmask(SIG_SETMASK, nullptr, &before);
    for (const std::string failing : {"prepare", "serve"}) {
        Recorder r;
        r.fail = failing;
        testing::internal::CaptureStderr();
        const int rc = run("test-server", Start{}, [&] { return r.service(); });
        EXPECT_EQ(testing::internal::GetCapturedStderr(), "test-server: " + failing + " failed\n");
        EXPECT_EQ(rc, 2);
        EXPECT_EQ(r.steps.back(), failing) << "nothing after the failed step";
    }
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

// Runs a server that is sent SIGTERM while it serves: 0 when run() returned 0 after the steps
// prepare, serve, ready, drain in that order.
int serve_until_signalled() {
    Recorder r;
    Service s = r.service();
    // The signal arrives while serving: it waits, pending, for main's sigwait.
    s.serve = [&r] {
        r.steps.push_back("serve");
        pthread_kill(pthread_self(), SIGTERM);
        return std::string();
    };
    const int rc = run("test-server", Start{}, [&] { return s; });
    const std::vector<std::string> want = {"prepare", "serve", "ready", "drain"};
    return rc == 0 && r.steps == want ? 0 : 1;
}

TEST(ServiceDeathTest, ServesUntilASignalThenDrains) {
    EXPECT_EXIT(std::exit(serve_until_signalled()), testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace fenec::server::service_test
