// test/support/engine_fixture.h: shared helpers for engine tests: a FaultFs-backed database with
// fake clocks and a fixed random seed, and the canonical "dump" of a database (engine.md §16).
#pragma once

#include <memory>
#include <string>

#include "engine/database.h"
#include "test/support/fault_fs.h"

namespace fenec::test {

// A Status or a Result's status as text, for failure messages.
inline std::string why(const engine::Status& s) { return s.to_string(); }
template <class T>
std::string why(const engine::Result<T>& r) {
    return r.status().to_string();
}

// Fails the test (fatally) unless `expr`, a Status or a Result, is ok; says why.
#define ASSERT_OK(expr)                                                    \
    do {                                                                   \
        auto&& ok_result_ = (expr);                                        \
        ASSERT_TRUE(ok_result_.is_ok()) << ::fenec::test::why(ok_result_); \
    } while (0)

// Lineage, created_ms, seq, forks, replica flag, and per collection id, name, schema (as text),
// next id, rows and each document's id and bytes (hex) in id order.
std::string dump(const engine::Database& db);

// A schema from a compact description: "name:text, n:int!, v:vector<3>, t:timestamp@ttl(1000)".
engine::Schema schema_of(const std::string& spec);

struct EngineEnv;

// The files of an install test: the source's file, the target's, and the image being installed
// beside it (`.incoming`).
inline const std::string kInstallSource = "/d/src.fenec";
inline const std::string kInstallTarget = "/d/t.fenec";
inline const std::string kInstallIncoming = "/d/t.fenec.incoming";

// A new database at `path` with one collection `items` (n:int, s:text) of `rows` rows landed in
// one block, row i holding n = i and `text_bytes` copies of a letter; null (the test failed) when
// it cannot be created.
std::unique_ptr<engine::Database> database_with_rows(EngineEnv& env, const std::string& path,
                                                     int rows, size_t text_bytes);

struct EngineEnv {
    FaultFs fs;
    engine::FakeClock clock;
    engine::SeededRandom random{42};
    engine::OpenOptions options(engine::SyncPolicy sync = engine::SyncPolicy::every_block()) {
        engine::OpenOptions o;
        o.fs = &fs;
        o.clock = &clock;
        o.random = &random;
        o.tenant = "t";
        o.sync = sync;
        return o;
    }
};

}  // namespace fenec::test
