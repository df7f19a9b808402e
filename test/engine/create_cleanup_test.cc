// test/engine/create_cleanup_test.cc: a create that fails at any step (the new file's append,
// its fsync, the rename into place, the folder's fsync, the open after it) leaves neither the
// file nor its `.new` behind, so the name can be created again at once (issue 17 item 9: a
// failed create used to leave `<t>.fenec`, which then answered every open with its failure).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "engine/database.h"
#include "test/support/engine_fixture.h"
#include "test/support/fault_fs.h"

namespace fenec::test::create_cleanup_test {
namespace {

using engine::Database;

const std::string path = "/d/t.fenec";

struct Step {
    const char* name;
    std::function<void(FaultFs&)> arm;
};

TEST(CreateCleanup, EveryStepThatFailsLeavesNoFile) {
    const std::vector<Step> steps = {
        {"append", [](FaultFs& fs) { fs.fail_append(1, ENOSPC); }},
        {"fsync", [](FaultFs& fs) { fs.fail_sync(1); }},
        {"rename", [](FaultFs& fs) { fs.fail_rename(1); }},
        {"folder fsync", [](FaultFs& fs) { fs.fail_sync_dir(1); }},
        {"the open's fsync", [](FaultFs& fs) { fs.fail_sync(2); }},
    };
    for (const Step& step : steps) {
        SCOPED_TRACE(step.name);
        EngineEnv env;
        step.arm(env.fs);
        auto db = Database::create(path, env.options());
        ASSERT_FALSE(db.is_ok()) << "the armed step did not fail the create";
        EXPECT_FALSE(env.fs.has(path));
        EXPECT_FALSE(env.fs.has(path + ".new"));
        env.fs.clear_faults();
        auto again = Database::create(path, env.options());
        EXPECT_TRUE(again.is_ok()) << again.status().to_string();
    }
}

// A create refused because the file exists leaves that file alone.
TEST(CreateCleanup, AnExistingFileIsNotRemoved) {
    EngineEnv env;
    auto first = Database::create(path, env.options());
    ASSERT_TRUE(first.is_ok()) << first.status().to_string();
    first.value().reset();
    auto second = Database::create(path, env.options());
    ASSERT_FALSE(second.is_ok());
    EXPECT_EQ(second.status().code(), engine::Code::already_exists);
    EXPECT_TRUE(env.fs.has(path));
}

}  // namespace
}  // namespace fenec::test::create_cleanup_test
