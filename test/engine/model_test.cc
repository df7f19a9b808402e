// test/engine/model_test.cc: proves that the engine's state equals a simple in-memory model.
//
// Model.*  (engine.md §16 test 16): seeded random workloads (10 000 operations in one seed, a few
//          smaller ones) of inserts with and without ids, puts, sets, deletes, creates, alters
//          (add, drop, rename a field), drops, rollbacks, destructor rollbacks and savepoints, in
//          random blocks. After every block the visible rows (ReadView::scan + DocView::decode),
//          schemas, next ids and seq equal the model's; the file is reopened (with and without a
//          compaction) mid-run and at the end, and each reopen dumps exactly what was live.
// Ids.*    (tests 21-25): the id counter rules, duplicates, whole-row puts, writes that write
//          nothing, the id range, and collection ids never reused.
// Values.* (tests 26-29): every value type round-trips bit for bit through a reopen; nesting,
//          vector, json, name, field-count and document-size limits; alter add/drop/rename/re-add
//          and the null a compaction writes into a dropped slot.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/database.h"
#include "engine/limits.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::model_test {
namespace {

using namespace engine;

constexpr const char* kPath = "/d/t.fenec";

std::unique_ptr<Database> create_db(EngineEnv& env, const std::string& path = kPath) {
    auto db = Database::create(path, env.options());
    if (!db.is_ok()) {
        ADD_FAILURE() << "create: " << db.status().to_string();
        return nullptr;
    }
    return std::move(*db);
}

// Closes `db` and opens the file again.
std::unique_ptr<Database> reopen(EngineEnv& env, std::unique_ptr<Database> db,
                                 const std::string& path = kPath) {
    if (db) {
        Status st = db->close();
        if (!st.is_ok()) ADD_FAILURE() << "close: " << st.to_string();
        db.reset();
    }
    auto again = Database::open(path, env.options());
    if (!again.is_ok()) {
        ADD_FAILURE() << "open: " << again.status().to_string();
        return nullptr;
    }
    return std::move(*again);
}

// Runs `body` in one block and commits it.
template <class F>
Landed land(Database& db, F&& body, BlockOptions opts = {}) {
    auto b = db.begin(opts);
    if (!b.is_ok()) {
        ADD_FAILURE() << "begin: " << b.status().to_string();
        return {};
    }
    body(*b);
    auto l = b->commit();
    if (!l.is_ok()) {
        ADD_FAILURE() << "commit: " << l.status().to_string();
        return {};
    }
    return *l;
}

CollectionInfo info_of(const Database& db, CollectionId c) {
    for (const CollectionInfo& i : db.read().collections()) {
        if (i.id == c) return i;
    }
    ADD_FAILURE() << "no collection " << c.v;
    return {};
}

// =============================================================================================
// The model
// =============================================================================================

enum class FT : uint8_t { Int, Text, Float, Bool, Bytes, Ts, IntList, Json, kCount };

TypeDesc type_of(FT t) {
    switch (t) {
        case FT::Int: return make_type(BaseType::Int);
        case FT::Text: return make_type(BaseType::Text);
        case FT::Float: return make_type(BaseType::Float);
        case FT::Bool: return make_type(BaseType::Bool);
        case FT::Bytes: return make_type(BaseType::Bytes);
        case FT::Ts: return make_type(BaseType::Timestamp);
        case FT::IntList: return make_list(make_type(BaseType::Int));
        case FT::Json: return make_type(BaseType::Json);
        case FT::kCount: break;
    }
    return make_type(BaseType::Int);
}

using Row = std::map<uint16_t, Value>;  // non-null values of live slots

struct MField {
    std::string name;
    FT type = FT::Int;
    bool dropped = false;
};

struct MCol {
    uint32_t id = 0;
    std::string name;
    std::vector<MField> fields;  // position = slot
    uint64_t next_id = 1;
    std::map<uint64_t, Row> rows;
    bool live_named(const std::string& n) const {
        for (const MField& f : fields) {
            if (!f.dropped && f.name == n) return true;
        }
        return false;
    }
};

struct Model {
    std::map<std::string, MCol> cols;  // by name
    uint32_t next_collection = 1;
    uint64_t seq = 0;
};

// Live slots of a decoded document.
Row live_row(const Doc& doc, const MCol& c) {
    Row r;
    for (const auto& [slot, v] : doc) {
        if (slot < c.fields.size() && !c.fields[slot].dropped && !v.is_null()) r.emplace(slot, v);
    }
    return r;
}

::testing::AssertionResult matches(const Database& db, const Model& m) {
    if (db.seq().v != m.seq) {
        return ::testing::AssertionFailure() << "seq " << db.seq().v << ", model " << m.seq;
    }
    ReadView view = db.read();
    std::vector<CollectionInfo> infos = view.collections();
    std::vector<const MCol*> want;
    for (const auto& [n, c] : m.cols) want.push_back(&c);
    std::sort(want.begin(), want.end(), [](const MCol* a, const MCol* b) { return a->id < b->id; });
    if (infos.size() != want.size()) {
        return ::testing::AssertionFailure()
               << infos.size() << " collections, model " << want.size();
    }
    for (size_t i = 0; i < infos.size(); ++i) {
        const CollectionInfo& got = infos[i];
        const MCol& c = *want[i];
        if (got.id.v != c.id || got.name != c.name || got.next_id != c.next_id ||
            got.rows != c.rows.size()) {
            return ::testing::AssertionFailure()
                   << "collection " << got.id.v << " " << got.name << " next " << got.next_id
                   << " rows " << got.rows << ", model " << c.id << " " << c.name << " next "
                   << c.next_id << " rows " << c.rows.size();
        }
        if (view.count(got.id) != c.rows.size()) {
            return ::testing::AssertionFailure() << "count of " << c.name << " differs";
        }
        const Schema* s = view.schema(got.id);
        if (!s || s->fields.size() != c.fields.size()) {
            return ::testing::AssertionFailure() << "schema of " << c.name << " has another size";
        }
        for (size_t f = 0; f < c.fields.size(); ++f) {
            const FieldDesc& fd = s->fields[f];
            if (fd.dropped != c.fields[f].dropped ||
                (!fd.dropped && (fd.name != c.fields[f].name || !(fd.type == type_of(c.fields[f].type))))) {
                return ::testing::AssertionFailure()
                       << c.name << " slot " << f << ": " << fd.name << " " << fd.type.to_string()
                       << (fd.dropped ? " dropped" : "") << ", model " << c.fields[f].name;
            }
        }
        auto it = c.rows.begin();
        std::string bad;
        view.scan(got.id, [&](DocId id, DocView doc) {
            if (it == c.rows.end() || it->first != id.v) {
                bad = "unexpected row " + std::to_string(id.v) + " in " + c.name;
                return false;
            }
            if (live_row(doc.decode(), c) != it->second) {
                bad = "row " + std::to_string(id.v) + " of " + c.name + " differs";
                return false;
            }
            ++it;
            return true;
        });
        if (!bad.empty()) return ::testing::AssertionFailure() << bad;
        if (it != c.rows.end()) {
            return ::testing::AssertionFailure() << "row " << it->first << " of " << c.name << " missing";
        }
    }
    return ::testing::AssertionSuccess();
}

// =============================================================================================
// The workload
// =============================================================================================

class Workload {
public:
    Workload(EngineEnv& env, uint64_t seed, uint64_t total_ops)
        : env_(env), rng_(seed), total_(total_ops) {}

    void run() {
        db_ = create_db(env_);
        ASSERT_NE(db_, nullptr);
        // Reopen three times mid-run, compacting before every other reopen, so later blocks
        // replay after an image as well as after plain blocks.
        const uint64_t every = total_ / 4;
        uint64_t next_reopen = every;
        bool compact_next = false;
        while (ops_ < total_) {
            run_block();
            if (::testing::Test::HasFatalFailure()) return;
            if (ops_ >= next_reopen && ops_ < total_) {
                next_reopen += every;
                reopen_and_compare(compact_next);
                if (::testing::Test::HasFatalFailure()) return;
                compact_next = !compact_next;
            }
        }
        ASSERT_GT(m_.seq, total_ / 2) << "most operations should be writes that land";
        ASSERT_GT(commits_, total_ / 20) << "the workload landed too few blocks to mean much";
        ASSERT_GT(rollbacks_, 0u);
        ASSERT_GT(failed_ops_, 0u);
        // The end: close and reopen, then compact and reopen.
        reopen_and_compare(false);
        if (::testing::Test::HasFatalFailure()) return;
        reopen_and_compare(true);
    }

private:
    size_t pick(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }
    bool chance(int pct) { return static_cast<int>(rng_() % 100) < pct; }

    static std::string meta(const Database& db) {
        const std::string d = dump(db);
        return d.substr(0, d.find("collection"));
    }

    void reopen_and_compare(bool compact) {
        if (compact) {
            const uint64_t before = env_.fs.contents(kPath).size();
            const std::string meta_before = meta(*db_);
            ASSERT_OK(db_->compact());
            EXPECT_LE(env_.fs.contents(kPath).size(), before);
            EXPECT_EQ(meta(*db_), meta_before) << "lineage, created, seq and forks";
            ASSERT_TRUE(matches(*db_, m_)) << "after compaction";
        }
        const std::string before = dump(*db_);
        db_ = reopen(env_, std::move(db_));
        ASSERT_NE(db_, nullptr);
        ASSERT_EQ(dump(*db_), before) << (compact ? "after compaction" : "plain reopen");
        ASSERT_TRUE(matches(*db_, m_));
    }

    Value random_scalar_json() {
        switch (pick(4)) {
            case 0: {
                const int64_t x = static_cast<int64_t>(rng());
                return Value(x >> pick(64));
            }
            case 1: {
                const size_t n = pick(6);
                return Value(std::string(n, static_cast<char>('a' + pick(26))));
            }
            case 2: return Value(chance(50));
            default: return Value(static_cast<double>(static_cast<int64_t>(rng() % 100000)) / 8.0);
        }
    }
    uint64_t rng() { return rng_(); }

    Value random_json(int depth) {
        const size_t k = depth >= 3 ? 0 : pick(4);
        if (k == 0 || k == 1) return random_scalar_json();
        if (k == 2) {
            List l;
            for (size_t i = pick(4); i > 0; --i) l.items.push_back(random_json(depth + 1));
            return l;
        }
        // Keys sorted and unique: that is how an object reads back.
        std::vector<std::string> keys;
        for (int i = 0; i < 6; ++i) {
            if (chance(40)) keys.push_back("k" + std::to_string(i));
        }
        Object o;
        for (const std::string& key : keys) {
            o.keys.push_back(key);
            o.values.push_back(random_json(depth + 1));
        }
        return o;
    }

    Value random_value(FT t) {
        switch (t) {
            case FT::Int: {
                const int64_t x = static_cast<int64_t>(rng());
                return Value(x >> pick(64));
            }
            case FT::Text: {
                std::string s;
                for (size_t i = pick(24); i > 0; --i) s += static_cast<char>('a' + pick(26));
                if (chance(20)) s += "\xc3\xa9\xe2\x82\xac";  // é€
                return Value(s);
            }
            case FT::Float:
                if (chance(30)) return Value(std::bit_cast<double>(rng()));  // any bits, NaNs too
                return Value(static_cast<double>(static_cast<int64_t>(rng() % 2000001) - 1000000) / 7.0);
            case FT::Bool: return Value(chance(50));
            case FT::Bytes: {
                Bytes b;
                for (size_t i = pick(16); i > 0; --i) b.data += static_cast<char>(rng() & 0xFF);
                return Value(b);
            }
            case FT::Ts: return Value(Timestamp{static_cast<int64_t>(rng() % 4'000'000'000'000ull) - 1'000'000'000'000});
            case FT::IntList: {
                List l;
                for (size_t i = pick(5); i > 0; --i) l.items.push_back(Value(static_cast<int64_t>(rng() % 1000)));
                return l;
            }
            case FT::Json: return random_json(0);
            case FT::kCount: break;
        }
        return Value();
    }

    // A document for `c` and the row the model keeps for it.
    std::pair<Doc, Row> random_doc(const MCol& c) {
        Doc doc;
        Row row;
        for (size_t s = 0; s < c.fields.size(); ++s) {
            if (c.fields[s].dropped) continue;
            const size_t r = pick(10);
            if (r < 2) continue;  // not given: null
            if (r < 3) {
                doc.emplace_back(static_cast<uint16_t>(s), Value());  // an explicit null
                continue;
            }
            Value v = random_value(c.fields[s].type);
            doc.emplace_back(static_cast<uint16_t>(s), v);
            row.emplace(static_cast<uint16_t>(s), std::move(v));
        }
        std::shuffle(doc.begin(), doc.end(), rng_);
        return {std::move(doc), std::move(row)};
    }

    MCol* random_col() {
        if (m_.cols.empty()) return nullptr;
        return &std::next(m_.cols.begin(), static_cast<long>(pick(m_.cols.size())))->second;
    }

    uint64_t random_existing(const MCol& c) {
        return std::next(c.rows.begin(), static_cast<long>(pick(c.rows.size())))->first;
    }

    uint64_t random_target(const MCol& c) {
        const size_t r = pick(10);
        if (r < 4 && !c.rows.empty()) return random_existing(c);
        if (r < 8) return 1 + pick(c.next_id + 4);  // existing, deleted, never used or just past
        return c.next_id + pick(50);                // a jump
    }

    void check_in_block(Block& b, const MCol& c, uint64_t id) {
        std::optional<DocView> got = b.get(CollectionId{c.id}, DocId{id});
        auto it = c.rows.find(id);
        ASSERT_EQ(got.has_value(), it != c.rows.end()) << c.name << " row " << id << " in the block";
        if (got) {
            ASSERT_TRUE(live_row(got->decode(), c) == it->second) << c.name << " row " << id;
        }
    }

    void op_create(Block& b) {
        const std::string name = "c" + std::to_string(pick(6));
        Schema schema;
        std::vector<MField> fields;
        std::vector<int> names = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
        std::shuffle(names.begin(), names.end(), rng_);
        for (size_t i = 0, n = 1 + pick(4); i < n; ++i) {
            MField f{"f" + std::to_string(names[i]), static_cast<FT>(pick(size_t(FT::kCount))), false};
            FieldDesc fd;
            fd.name = f.name;
            fd.type = type_of(f.type);
            schema.fields.push_back(fd);
            fields.push_back(f);
        }
        Result<CollectionId> r = b.create_collection(name, schema);
        if (m_.cols.count(name)) {
            ASSERT_FALSE(r.is_ok());
            ASSERT_EQ(r.status().code(), Code::already_exists) << why(r);
            ++failed_ops_;
            return;
        }
        ASSERT_OK(r);
        ASSERT_EQ(r->v, m_.next_collection) << "collection ids are handed out in order, never reused";
        MCol c;
        c.id = m_.next_collection++;
        c.name = name;
        c.fields = std::move(fields);
        m_.cols[name] = std::move(c);
        ++m_.seq;
    }

    void op_alter(Block& b, MCol& c) {
        std::vector<size_t> live;
        for (size_t s = 0; s < c.fields.size(); ++s) {
            if (!c.fields[s].dropped) live.push_back(s);
        }
        const size_t kind = pick(3);
        AlterSpec spec;
        if (kind == 0 || live.empty()) {
            if (c.fields.size() >= 40) return;  // keep slots few
            std::string name;
            for (int tries = 0; tries < 10 && name.empty(); ++tries) {
                std::string n = "f" + std::to_string(pick(10));
                if (!c.live_named(n)) name = n;
            }
            if (name.empty()) return;
            spec.kind = AlterKind::add_field;
            spec.field_desc.name = name;
            const FT t = static_cast<FT>(pick(size_t(FT::kCount)));
            spec.field_desc.type = type_of(t);
            ASSERT_OK(b.alter_collection(CollectionId{c.id}, spec));
            c.fields.push_back(MField{name, t, false});
        } else if (kind == 1) {
            const size_t s = live[pick(live.size())];
            spec.kind = AlterKind::drop_field;
            spec.field = c.fields[s].name;
            ASSERT_OK(b.alter_collection(CollectionId{c.id}, spec));
            c.fields[s].dropped = true;
            c.fields[s].name.clear();
            for (auto& [id, row] : c.rows) row.erase(static_cast<uint16_t>(s));
        } else {
            const size_t s = live[pick(live.size())];
            std::string to = "f" + std::to_string(pick(10));
            spec.kind = AlterKind::rename_field;
            spec.field = c.fields[s].name;
            spec.new_name = to;
            Status st = b.alter_collection(CollectionId{c.id}, spec);
            if (c.live_named(to)) {  // the same name, or another live field's
                ASSERT_FALSE(st.is_ok());
                ASSERT_EQ(st.code(), Code::invalid_argument) << why(st);
                ++failed_ops_;
                return;
            }
            ASSERT_OK(st);
            c.fields[s].name = to;
        }
        ++m_.seq;
    }

    void op_doc(Block& b, MCol& c) {
        const CollectionId cid{c.id};
        size_t r = pick(100);
        if (r >= 85 && r < 97) r = 0;               // more inserts
        if (c.rows.size() > 300 && r < 50) r = 70;  // keep collections bounded: delete instead
        if (r < 25) {  // insert, next id
            auto [doc, row] = random_doc(c);
            Result<DocId> id = b.insert(cid, std::nullopt, doc);
            ASSERT_OK(id);
            ASSERT_EQ(id->v, c.next_id);
            c.rows[id->v] = std::move(row);
            c.next_id = id->v + 1;
            ++m_.seq;
            check_in_block(b, c, id->v);
        } else if (r < 35) {  // insert with an id
            const uint64_t target = random_target(c);
            auto [doc, row] = random_doc(c);
            Result<DocId> id = b.insert(cid, DocId{target}, doc);
            if (c.rows.count(target)) {
                ASSERT_FALSE(id.is_ok());
                ASSERT_EQ(id.status().code(), Code::duplicate) << why(id);
                ASSERT_EQ(id.status().detail().id, target);
                ++failed_ops_;
                return;
            }
            ASSERT_OK(id);
            ASSERT_EQ(id->v, target);
            c.rows[target] = std::move(row);
            c.next_id = std::max(c.next_id, target + 1);
            ++m_.seq;
            check_in_block(b, c, target);
        } else if (r < 50) {  // put, with or without an id
            std::optional<DocId> target;
            if (chance(60)) target = DocId{random_target(c)};
            const uint64_t expect = target ? target->v : c.next_id;
            auto [doc, row] = random_doc(c);
            Result<DocId> id = b.put(cid, target, doc);
            ASSERT_OK(id);
            ASSERT_EQ(id->v, expect);
            c.rows[expect] = std::move(row);
            c.next_id = std::max(c.next_id, expect + 1);
            ++m_.seq;
            check_in_block(b, c, expect);
        } else if (r < 65) {  // set
            const uint64_t target = (!c.rows.empty() && chance(75)) ? random_existing(c) : random_target(c);
            auto [doc, row] = random_doc(c);
            Status st = b.set(cid, DocId{target}, doc);
            if (!c.rows.count(target)) {
                ASSERT_EQ(st.code(), Code::not_found) << why(st);
                ++failed_ops_;
                return;
            }
            ASSERT_OK(st);
            c.rows[target] = std::move(row);
            ++m_.seq;
            check_in_block(b, c, target);
        } else if (r < 85) {  // delete
            const uint64_t target = (!c.rows.empty() && chance(80)) ? random_existing(c) : random_target(c);
            Result<bool> gone = b.del(cid, DocId{target});
            ASSERT_OK(gone);
            ASSERT_EQ(*gone, c.rows.count(target) == 1) << c.name << " del " << target;
            if (*gone) {
                c.rows.erase(target);
                ++m_.seq;
            } else {
                ++failed_ops_;
            }
            check_in_block(b, c, target);
        } else {  // a wrong value: fails alone
            for (size_t s = 0; s < c.fields.size(); ++s) {
                if (c.fields[s].dropped || c.fields[s].type == FT::Json) continue;
                const Value wrong = c.fields[s].type == FT::Bool ? Value(int64_t{1}) : Value(true);
                Result<DocId> id = b.insert(cid, std::nullopt, Doc{{static_cast<uint16_t>(s), wrong}});
                ASSERT_FALSE(id.is_ok());
                ASSERT_EQ(id.status().code(), Code::invalid_argument) << why(id);
                ++failed_ops_;
                return;
            }
        }
    }

    void do_op(Block& b) {
        MCol* c = random_col();
        const size_t r = pick(100);
        if (!c || r < 3) return op_create(b);
        if (r < 9) return op_alter(b, *c);
        if (r < 10 && (m_.cols.size() > 3 || chance(20))) {
            const std::string name = c->name;
            ASSERT_OK(b.drop_collection(CollectionId{c->id}));
            EXPECT_FALSE(b.find(name).is_ok());
            m_.cols.erase(name);
            ++m_.seq;
            return;
        }
        op_doc(b, *c);
    }

    void run_block() {
        const Model before = m_;
        ASSERT_EQ(db_->seq().v, m_.seq);
        Result<Block> b = db_->begin();
        ASSERT_OK(b);
        std::optional<std::pair<Block::Mark, Model>> sp;
        const size_t n = 1 + pick(12);
        for (size_t i = 0; i < n && ops_ < total_; ++i) {
            if (!sp && chance(8)) {
                sp.emplace(b->savepoint(), m_);
            } else if (sp && chance(15)) {
                b->rollback_to(sp->first);
                m_ = sp->second;
                sp.reset();
            }
            do_op(*b);
            ++ops_;
            if (::testing::Test::HasFatalFailure()) return;
        }
        ASSERT_EQ(b->writes(), m_.seq - before.seq);
        const size_t end = pick(100);
        if (end < 6) {
            b->rollback();
            m_ = before;
            ++rollbacks_;
        } else if (end < 9) {
            { Block dropped = std::move(*b); }  // the destructor rolls back
            m_ = before;
            ++rollbacks_;
        } else {
            const uint64_t size_before = env_.fs.contents(kPath).size();
            Result<Landed> landed = b->commit();
            ASSERT_OK(landed);
            if (m_.seq == before.seq) {
                EXPECT_EQ(landed->first.v, before.seq);
                EXPECT_EQ(landed->last.v, before.seq);
                EXPECT_EQ(env_.fs.contents(kPath).size(), size_before) << "an empty block appends nothing";
            } else {
                EXPECT_EQ(landed->first.v, before.seq + 1);
                EXPECT_EQ(landed->last.v, m_.seq);
                EXPECT_EQ(env_.fs.contents(kPath).size(), size_before + landed->bytes);
                ++commits_;
            }
        }
        ASSERT_TRUE(matches(*db_, m_)) << "after block ending at op " << ops_;
    }

    EngineEnv& env_;
    std::mt19937_64 rng_;
    uint64_t total_;
    uint64_t ops_ = 0;
    uint64_t commits_ = 0;
    uint64_t rollbacks_ = 0;
    uint64_t failed_ops_ = 0;
    Model m_;
    std::unique_ptr<Database> db_;
};

TEST(Model, TenThousandOpsMatchTheModel) {
    EngineEnv env;
    Workload w(env, 0x5eed0001, 10'000);
    w.run();
}

TEST(Model, SmallerSeedsMatchTheModel) {
    for (uint64_t seed : {2ull, 3ull, 5ull, 8ull}) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        EngineEnv env;
        Workload w(env, seed, 1'500);
        w.run();
        if (HasFatalFailure()) return;
    }
}

// =============================================================================================
// Ids (tests 21-25)
// =============================================================================================

Doc row_of(int64_t a, const std::string& b = "x") { return Doc{{0, Value(a)}, {1, Value(b)}}; }

TEST(Ids, CounterFollowsExplicitIds) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    CollectionId c;
    land(*db, [&](Block& b) {
        auto r = b.create_collection("a", schema_of("n:int, s:text"));
        ASSERT_OK(r);
        c = *r;
        for (uint64_t want : {1u, 2u, 3u}) {
            auto id = b.insert(c, std::nullopt, row_of(0));
            ASSERT_OK(id);
            EXPECT_EQ(id->v, want);
        }
    });
    land(*db, [&](Block& b) {
        auto five = b.insert(c, DocId{5}, row_of(5));
        ASSERT_OK(five);
        EXPECT_EQ(five->v, 5u);
        auto six = b.insert(c, std::nullopt, row_of(6));
        ASSERT_OK(six);
        EXPECT_EQ(six->v, 6u);
    });
    land(*db, [&](Block& b) {
        // Row 3 is there: duplicate; the counter does not move back.
        auto three = b.insert(c, DocId{3}, row_of(3));
        ASSERT_EQ(three.status().code(), Code::duplicate) << why(three);
        auto seven = b.insert(c, std::nullopt, row_of(7));
        ASSERT_OK(seven);
        EXPECT_EQ(seven->v, 7u);
    });
    // An explicit id below the counter (a hole, 4) lands and leaves the counter where it is.
    land(*db, [&](Block& b) {
        auto four = b.insert(c, DocId{4}, row_of(4));
        ASSERT_OK(four);
        auto eight = b.insert(c, std::nullopt, row_of(8));
        ASSERT_OK(eight);
        EXPECT_EQ(eight->v, 8u);
    });
    EXPECT_EQ(info_of(*db, c).next_id, 9u);
    EXPECT_EQ(db->read().count(c), 8u);
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(info_of(*db, c).next_id, 9u);
}

TEST(Ids, DeletedIdsAreNeverHandedOutAgain) {
    for (bool compact : {false, true}) {
        SCOPED_TRACE(compact ? "compacted before reopen" : "plain reopen");
        EngineEnv env;
        auto db = create_db(env);
        ASSERT_NE(db, nullptr);
        CollectionId c;
        land(*db, [&](Block& b) {
            c = *b.create_collection("a", schema_of("n:int, s:text"));
            for (int i = 1; i <= 10; ++i) ASSERT_OK(b.insert(c, std::nullopt, row_of(i)));
        });
        land(*db, [&](Block& b) {
            auto gone = b.del(c, DocId{10});
            ASSERT_OK(gone);
            EXPECT_TRUE(*gone);
        });
        EXPECT_EQ(info_of(*db, c).next_id, 11u);
        if (compact) {
            ASSERT_OK(db->compact());
        }
        db = reopen(env, std::move(db));
        ASSERT_NE(db, nullptr);
        EXPECT_EQ(info_of(*db, c).next_id, 11u);
        EXPECT_EQ(info_of(*db, c).rows, 9u);
        land(*db, [&](Block& b) {
            auto id = b.insert(c, std::nullopt, row_of(11));
            ASSERT_OK(id);
            EXPECT_EQ(id->v, 11u);
        });
    }
}

TEST(Ids, DuplicateInsertAndWholeRowPut) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    CollectionId c;
    land(*db, [&](Block& b) {
        c = *b.create_collection("a", schema_of("n:int, s:text, t:text"));
        ASSERT_OK(b.insert(c, DocId{4}, Doc{{0, Value(int64_t{4})}, {1, Value("s4")}, {2, Value("t4")}}));
    });
    const uint64_t seq = db->seq().v;
    {
        auto b = db->begin();
        ASSERT_OK(b);
        auto dup = b->insert(c, DocId{4}, Doc{{0, Value(int64_t{9})}});
        ASSERT_FALSE(dup.is_ok());
        EXPECT_EQ(dup.status().code(), Code::duplicate);
        EXPECT_EQ(dup.status().detail().id, 4u);
        auto l = b->commit();  // the failed write wrote nothing
        ASSERT_OK(l);
        EXPECT_EQ(l->last.v, seq);
    }
    EXPECT_EQ(db->seq().v, seq);
    land(*db, [&](Block& b) {
        auto id = b.put(c, DocId{4}, Doc{{1, Value("only s")}});
        ASSERT_OK(id);
        EXPECT_EQ(id->v, 4u);
    });
    auto check = [&](const Database& d) {
        ReadView v = d.read();
        auto row = v.get(c, DocId{4});
        ASSERT_TRUE(row.has_value());
        EXPECT_TRUE(row->get(0).is_null());
        EXPECT_EQ(row->get(1), Value("only s"));
        EXPECT_TRUE(row->get(2).is_null());
        EXPECT_EQ(row->decode().size(), 1u);
    };
    check(*db);
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    check(*db);
}

TEST(Ids, WritesThatWriteNothingLandNothing) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    CollectionId c;
    land(*db, [&](Block& b) {
        c = *b.create_collection("a", schema_of("n:int, s:text"));
        ASSERT_OK(b.insert(c, std::nullopt, row_of(1)));
    });
    const uint64_t seq = db->seq().v;
    const size_t size = env.fs.contents(kPath).size();
    const uint64_t syncs = env.fs.syncs();
    auto b = db->begin();
    ASSERT_OK(b);
    Status st = b->set(c, DocId{9}, row_of(9));
    EXPECT_EQ(st.code(), Code::not_found) << why(st);
    EXPECT_EQ(st.detail().id, 9u);
    auto gone = b->del(c, DocId{9});
    ASSERT_OK(gone);
    EXPECT_FALSE(*gone);
    EXPECT_EQ(b->writes(), 0u);
    auto l = b->commit();
    ASSERT_OK(l);
    EXPECT_EQ(l->first.v, seq);
    EXPECT_EQ(l->last.v, seq);
    EXPECT_EQ(l->bytes, 0u);
    EXPECT_EQ(db->seq().v, seq);
    EXPECT_EQ(env.fs.contents(kPath).size(), size);
    EXPECT_EQ(env.fs.syncs(), syncs);
    EXPECT_FALSE(db->read().get(c, DocId{9}).has_value());
    EXPECT_EQ(info_of(*db, c).next_id, 2u);
}

TEST(Ids, RangeAndRecreatedCollections) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    CollectionId c;
    const uint64_t max_id = (1ull << 63) - 1;
    land(*db, [&](Block& b) {
        c = *b.create_collection("a", schema_of("n:int, s:text"));
        for (uint64_t bad : {uint64_t{0}, uint64_t{1} << 63, ~uint64_t{0}}) {
            SCOPED_TRACE(bad);
            EXPECT_EQ(b.insert(c, DocId{bad}, row_of(1)).status().code(), Code::invalid_argument);
            EXPECT_EQ(b.put(c, DocId{bad}, row_of(1)).status().code(), Code::invalid_argument);
            EXPECT_EQ(b.set(c, DocId{bad}, row_of(1)).code(), Code::invalid_argument);
            EXPECT_EQ(b.del(c, DocId{bad}).status().code(), Code::invalid_argument);
        }
        EXPECT_EQ(b.writes(), 1u);  // only the create
        auto top = b.insert(c, DocId{max_id}, row_of(1));
        ASSERT_OK(top);
        EXPECT_EQ(top->v, max_id);
        // The counter is past the last id: a next id would be 2^63, which is refused.
        EXPECT_EQ(b.insert(c, std::nullopt, row_of(2)).status().code(), Code::invalid_argument);
    });
    EXPECT_EQ(info_of(*db, c).next_id, 1ull << 63);
    ASSERT_TRUE(db->read().get(c, DocId{max_id}).has_value());

    // Dropped and created again: a new collection id, ids from 1.
    CollectionId c2, c3;
    land(*db, [&](Block& b) {
        ASSERT_OK(b.drop_collection(c));
        auto r = b.create_collection("a", schema_of("n:int, s:text"));
        ASSERT_OK(r);
        c2 = *r;
        auto id = b.insert(c2, std::nullopt, row_of(1));
        ASSERT_OK(id);
        EXPECT_EQ(id->v, 1u);
    });
    EXPECT_NE(c2, c);
    EXPECT_EQ(c2.v, c.v + 1);
    EXPECT_FALSE(db->read().get(c, DocId{max_id}).has_value());
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    land(*db, [&](Block& b) {
        ASSERT_OK(b.drop_collection(c2));
        auto r = b.create_collection("a", schema_of("n:int"));
        ASSERT_OK(r);
        c3 = *r;
        auto id = b.insert(c3, std::nullopt, Doc{{0, Value(int64_t{1})}});
        ASSERT_OK(id);
        EXPECT_EQ(id->v, 1u);
    });
    EXPECT_EQ(c3.v, c2.v + 1) << "the collection counter survives a reopen";
    ASSERT_OK(db->compact());
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    land(*db, [&](Block& b) {
        ASSERT_OK(b.drop_collection(c3));
        auto r = b.create_collection("a", schema_of("n:int"));
        ASSERT_OK(r);
        EXPECT_EQ(r->v, c3.v + 1) << "and a compaction";
    });
    // A drop and create rolled back hands the collection id out again.
    CollectionId c4 = *db->read().find("a");
    {
        auto b = db->begin();
        ASSERT_OK(b);
        auto r = b->create_collection("b", schema_of("n:int"));
        ASSERT_OK(r);
        EXPECT_EQ(r->v, c4.v + 1);
        b->rollback();
    }
    land(*db, [&](Block& b) {
        auto r = b.create_collection("b", schema_of("n:int"));
        ASSERT_OK(r);
        EXPECT_EQ(r->v, c4.v + 1);
    });
}

// =============================================================================================
// Values (tests 26-29)
// =============================================================================================

Schema every_type_schema() {
    Schema s = schema_of(
        "b:bool, i:int, f:float, t:text, y:bytes, ts:timestamp, v:vector<3>, h:vector16<4>, "
        "li:[int], j:json");
    FieldDesc nested;
    nested.name = "ll";
    nested.type = make_list(make_list(make_type(BaseType::Text)));
    s.fields.push_back(nested);
    return s;
}

Doc every_type_doc() {
    Object inner;
    inner.keys = {"a", "b"};
    inner.values = {Value(List{{Value(int64_t{1}), Value("two"), Value(3.5)}}), Value(Null{})};
    Object j;
    j.keys = {"", "k\xc3\xa9", "nested", "z"};
    j.values = {Value(false), Value(std::bit_cast<double>(0x7ff4000000000001ull)), Value(inner),
                Value(List{{Value(inner), Value(List{})}})};
    return Doc{
        {0, Value(true)},
        {1, Value(std::numeric_limits<int64_t>::min())},
        {2, Value(std::bit_cast<double>(0xfff8000000000123ull))},  // a NaN with a payload
        {3, Value("h\xc3\xa9llo \xf0\x9f\x98\x80")},
        {4, Value(Bytes{std::string("\0\xff\x01\x80", 4)})},
        {5, Value(Timestamp{-62135596800000})},
        {6, Value(VectorF32{{-0.0f, std::bit_cast<float>(0x7fc00001u), std::numeric_limits<float>::denorm_min()}})},
        {7, Value(VectorF16{{0x7c01, 0x8000, 0x0001, f32_to_f16(1.5f)}})},
        {8, Value(List{{Value(std::numeric_limits<int64_t>::max()), Value(int64_t{-1})}})},
        {9, Value(j)},
        {10, Value(List{{Value(List{{Value("a"), Value("")}}), Value(List{})}})},
    };
}

TEST(Values, EveryTypeRoundTripsBitForBit) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    const Doc doc = every_type_doc();
    CollectionId c;
    land(*db, [&](Block& b) {
        auto r = b.create_collection("all", every_type_schema());
        ASSERT_OK(r);
        c = *r;
        ASSERT_OK(b.insert(c, std::nullopt, doc));
        ASSERT_OK(b.insert(c, std::nullopt, Doc{}));  // every slot null
    });
    std::vector<std::byte> body;
    auto check = [&](const Database& d, const char* when) {
        SCOPED_TRACE(when);
        ReadView v = d.read();
        auto row = v.get(c, DocId{1});
        ASSERT_TRUE(row.has_value());
        for (const auto& [slot, value] : doc) {
            EXPECT_TRUE(row->get(slot) == value) << "slot " << slot << " (" << value.kind_name() << ")";
        }
        EXPECT_TRUE(row->decode() == doc);
        if (body.empty()) body.assign(row->body().begin(), row->body().end());
        EXPECT_TRUE(std::equal(body.begin(), body.end(), row->body().begin(), row->body().end()));
        auto empty = v.get(c, DocId{2});
        ASSERT_TRUE(empty.has_value());
        EXPECT_TRUE(empty->decode().empty());
        for (uint16_t s = 0; s < 11; ++s) EXPECT_TRUE(empty->is_null(s));
    };
    check(*db, "live");
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    check(*db, "reopened");
    ASSERT_OK(db->compact());
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    check(*db, "compacted and reopened");
}

// A json value nested `depth` containers deep (objects and lists alternating).
Value nested_json(int depth) {
    Value v = Value(int64_t{7});
    for (int d = 0; d < depth; ++d) {
        if (d % 2 == 0) {
            v = Value(List{{v}});
        } else {
            Object o;
            o.keys = {"k"};
            o.values = {v};
            v = Value(o);
        }
    }
    return v;
}

TEST(Values, NestingSixtyFourPassesSixtyFiveIsRefused) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    CollectionId c;
    land(*db, [&](Block& b) {
        c = *b.create_collection("deep", schema_of("j:json"));
        ASSERT_OK(b.insert(c, DocId{1}, Doc{{0, nested_json(64)}}));
        auto too_deep = b.insert(c, DocId{2}, Doc{{0, nested_json(65)}});
        EXPECT_EQ(too_deep.status().code(), Code::limit_exceeded) << why(too_deep);
        EXPECT_NE(too_deep.status().message().find("`j`"), std::string_view::npos) << why(too_deep);
        Value v = Value(int64_t{1});
        for (int d = 0; d < 65; ++d) v = Value(List{{v}});
        EXPECT_EQ(b.insert(c, DocId{3}, Doc{{0, v}}).status().code(), Code::limit_exceeded);
        EXPECT_EQ(b.writes(), 2u);
    });
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    auto row = db->read().get(c, DocId{1});
    ASSERT_TRUE(row.has_value());
    EXPECT_TRUE(row->get(0) == nested_json(64));
    EXPECT_FALSE(db->read().get(c, DocId{2}).has_value());
}

TEST(Values, VectorDimensionsAndLengths) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    land(*db, [&](Block& b) {
        auto ok = b.create_collection("wide", schema_of("embedding:vector<4096>"));
        ASSERT_OK(ok);
        std::vector<float> v(4096);
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) / 3.0f;
        ASSERT_OK(b.insert(*ok, std::nullopt, Doc{{0, Value(VectorF32{v})}}));
        auto too_wide = b.create_collection("wider", schema_of("embedding:vector<4097>"));
        EXPECT_EQ(too_wide.status().code(), Code::limit_exceeded) << why(too_wide);
        auto f16_wide = b.create_collection("wider16", schema_of("embedding:vector16<4097>"));
        EXPECT_EQ(f16_wide.status().code(), Code::limit_exceeded) << why(f16_wide);

        auto small = b.create_collection("small", schema_of("embedding:vector<4>, half:vector16<2>"));
        ASSERT_OK(small);
        auto wrong = b.insert(*small, std::nullopt, Doc{{0, Value(VectorF32{{1, 2, 3}})}});
        ASSERT_EQ(wrong.status().code(), Code::invalid_argument) << why(wrong);
        const std::string msg(wrong.status().message());
        EXPECT_NE(msg.find("`small`"), std::string::npos) << msg;
        EXPECT_NE(msg.find("`embedding`"), std::string::npos) << msg;
        EXPECT_NE(msg.find("vector<4>"), std::string::npos) << msg;
        EXPECT_NE(msg.find("vector<3>"), std::string::npos) << msg;
        auto wrong16 = b.insert(*small, std::nullopt, Doc{{1, Value(VectorF16{{1, 2, 3}})}});
        ASSERT_EQ(wrong16.status().code(), Code::invalid_argument) << why(wrong16);
        EXPECT_NE(wrong16.status().message().find("`half`"), std::string_view::npos) << why(wrong16);
        auto elem = b.insert(*small, std::nullopt, Doc{{1, Value(VectorF32{{1, 2}})}});
        EXPECT_EQ(elem.status().code(), Code::invalid_argument) << "an f32 vector in an f16 field";
    });
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    ReadView view = db->read();
    auto row = view.get(*view.find("wide"), DocId{1});
    ASSERT_TRUE(row.has_value());
    const Value got_value = row->get(0);
    const auto& got = std::get<VectorF32>(got_value.rep).v;
    ASSERT_EQ(got.size(), 4096u);
    EXPECT_EQ(got[4095], 4095.0f / 3.0f);
}

TEST(Values, JsonKeysSortedAndDuplicatesRefused) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    CollectionId c;
    land(*db, [&](Block& b) {
        c = *b.create_collection("docs", schema_of("payload:json"));
        Object dup;
        dup.keys = {"x", "y", "x"};
        dup.values = {Value(int64_t{1}), Value(int64_t{2}), Value(int64_t{3})};
        auto r = b.insert(c, std::nullopt, Doc{{0, Value(dup)}});
        ASSERT_EQ(r.status().code(), Code::invalid_argument) << why(r);
        EXPECT_NE(r.status().message().find("`payload`"), std::string_view::npos) << why(r);
        EXPECT_NE(r.status().message().find("`x`"), std::string_view::npos) << why(r);
        Object nested_dup;  // a duplicate one level down
        nested_dup.keys = {"outer"};
        nested_dup.values = {Value(dup)};
        EXPECT_EQ(b.insert(c, std::nullopt, Doc{{0, Value(nested_dup)}}).status().code(),
                  Code::invalid_argument);

        Object inner;
        inner.keys = {"b", "a"};
        inner.values = {Value("B"), Value("A")};
        Object o;
        o.keys = {"zeta", "alpha", "mid", "Zeta"};
        o.values = {Value(int64_t{1}), Value(inner), Value(int64_t{3}), Value(int64_t{4})};
        auto id = b.insert(c, std::nullopt, Doc{{0, Value(o)}});
        ASSERT_OK(id);
        EXPECT_EQ(id->v, 1u) << "the refused inserts took no id";
    });
    auto check = [&](const Database& d) {
        auto row = d.read().get(c, DocId{1});
        ASSERT_TRUE(row.has_value());
        const Value value = row->get(0);
        const Object& got = std::get<Object>(value.rep);
        EXPECT_EQ(got.keys, (std::vector<std::string>{"Zeta", "alpha", "mid", "zeta"}));
        ASSERT_EQ(got.values.size(), 4u);
        EXPECT_EQ(got.values[0], Value(int64_t{4}));
        EXPECT_EQ(got.values[2], Value(int64_t{3}));
        EXPECT_EQ(got.values[3], Value(int64_t{1}));
        const Object& in = std::get<Object>(got.values[1].rep);
        EXPECT_EQ(in.keys, (std::vector<std::string>{"a", "b"}));
        EXPECT_EQ(in.values, (std::vector<Value>{Value("A"), Value("B")}));
    };
    check(*db);
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    check(*db);
}

TEST(Values, AlterAddDropRenameReAdd) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    CollectionId c;
    land(*db, [&](Block& b) {
        c = *b.create_collection("p", schema_of("a:int, b:text"));
        for (int i = 1; i <= 3; ++i) {
            ASSERT_OK(b.insert(c, std::nullopt, Doc{{0, Value(int64_t{i})}, {1, Value("b" + std::to_string(i))}}));
        }
    });
    const uint64_t seq0 = db->seq().v;
    auto alter = [&](AlterSpec spec) { land(*db, [&](Block& b) { ASSERT_OK(b.alter_collection(c, spec)); }); };

    // Add c (slot 2): old rows read null there.
    AlterSpec add;
    add.kind = AlterKind::add_field;
    add.field_desc.name = "c";
    add.field_desc.type = make_type(BaseType::Int);
    alter(add);
    {
        ReadView v = db->read();
        EXPECT_EQ(v.schema(c)->slot_of("c"), std::optional<uint16_t>(2));
        v.scan(c, [&](DocId, DocView d) {
            EXPECT_TRUE(d.is_null(2));
            return true;
        });
    }
    land(*db, [&](Block& b) { ASSERT_OK(b.insert(c, std::nullopt, Doc{{0, Value(int64_t{4})}, {2, Value(int64_t{40})}})); });

    // A required field cannot be added.
    {
        auto b = db->begin();
        ASSERT_OK(b);
        AlterSpec req = add;
        req.field_desc.name = "r";
        req.field_desc.required = true;
        EXPECT_EQ(b->alter_collection(c, req).code(), Code::invalid_argument);
    }

    // Drop b (slot 1): gone from the schema; a write naming slot 1 is refused.
    AlterSpec drop;
    drop.kind = AlterKind::drop_field;
    drop.field = "b";
    alter(drop);
    {
        auto b = db->begin();
        ASSERT_OK(b);
        EXPECT_EQ(b->insert(c, std::nullopt, Doc{{1, Value("x")}}).status().code(), Code::invalid_argument);
        EXPECT_EQ(b->alter_collection(c, drop).code(), Code::not_found) << "b is gone";
    }
    {
        ReadView v = db->read();
        const Schema* s = v.schema(c);
        ASSERT_EQ(s->fields.size(), 3u);
        EXPECT_TRUE(s->fields[1].dropped);
        EXPECT_TRUE(s->fields[1].name.empty());
        EXPECT_FALSE(s->slot_of("b").has_value());
    }

    // Rename a -> a2: name only.
    AlterSpec rename;
    rename.kind = AlterKind::rename_field;
    rename.field = "a";
    rename.new_name = "a2";
    alter(rename);

    // Re-add b: a new slot (3), old rows null there, not their old b.
    AlterSpec readd = add;
    readd.field_desc.name = "b";
    readd.field_desc.type = make_type(BaseType::Text);
    alter(readd);
    land(*db, [&](Block& b) { ASSERT_OK(b.insert(c, std::nullopt, Doc{{0, Value(int64_t{5})}, {3, Value("new b")}})); });
    EXPECT_EQ(db->seq().v, seq0 + 6);

    auto check = [&](const Database& d, bool compacted) {
        ReadView v = d.read();
        const Schema* s = v.schema(c);
        ASSERT_EQ(s->fields.size(), 4u);
        EXPECT_EQ(s->slot_of("a2"), std::optional<uint16_t>(0));
        EXPECT_FALSE(s->slot_of("a").has_value());
        EXPECT_EQ(s->slot_of("c"), std::optional<uint16_t>(2));
        EXPECT_EQ(s->slot_of("b"), std::optional<uint16_t>(3));
        EXPECT_TRUE(s->fields[1].dropped);
        EXPECT_EQ(v.count(c), 5u);
        v.scan(c, [&](DocId id, DocView doc) {
            EXPECT_EQ(doc.get(0), Value(static_cast<int64_t>(id.v))) << "renamed, value kept";
            const uint16_t b_slot = *s->slot_of("b");
            if (id.v <= 3) {
                EXPECT_TRUE(doc.is_null(b_slot)) << "row " << id.v << ": the old b does not read as the new b";
                // The old value stays in the body until a rewrite; after it, null.
                EXPECT_EQ(doc.is_null(1), compacted) << "row " << id.v;
            } else {
                EXPECT_TRUE(doc.is_null(1));
            }
            if (id.v == 4) {
                EXPECT_EQ(doc.get(2), Value(int64_t{40}));
            }
            if (id.v == 5) {
                EXPECT_EQ(doc.get(b_slot), Value("new b"));
            }
            return true;
        });
    };
    check(*db, false);
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    check(*db, false);
    ASSERT_OK(db->compact());
    check(*db, true);
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    check(*db, true);
}

TEST(Values, NameFieldCountAndDocumentSizeLimits) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    land(*db, [&](Block& b) {
        auto long_name = b.create_collection(std::string(65, 'n'), schema_of("a:int"));
        EXPECT_EQ(long_name.status().code(), Code::invalid_argument) << why(long_name);
        ASSERT_OK(b.create_collection(std::string(64, 'n'), schema_of("a:int")));

        Schema wide;
        for (int i = 0; i < 1025; ++i) {
            FieldDesc f;
            f.name = "f" + std::to_string(i);
            f.type = make_type(BaseType::Int);
            wide.fields.push_back(f);
        }
        auto too_many = b.create_collection("wide", wide);
        EXPECT_EQ(too_many.status().code(), Code::limit_exceeded) << why(too_many);
        wide.fields.pop_back();
        auto ok = b.create_collection("wide", wide);
        ASSERT_OK(ok);
        // The 1025th by alter, even after a drop: dropped slots still count.
        AlterSpec drop;
        drop.kind = AlterKind::drop_field;
        drop.field = "f0";
        ASSERT_OK(b.alter_collection(*ok, drop));
        AlterSpec add;
        add.kind = AlterKind::add_field;
        add.field_desc.name = "f0";
        add.field_desc.type = make_type(BaseType::Int);
        EXPECT_EQ(b.alter_collection(*ok, add).code(), Code::limit_exceeded);
    });

    CollectionId big;
    land(*db, [&](Block& b) { big = *b.create_collection("big", schema_of("t:text")); });
    // Encoded: slot count (1) + tag (1) + length varint (4) + text = 16 MiB + 1.
    const size_t over = limits::doc_bytes_max + 1 - 6;
    std::string text(over, 'x');
    {
        auto b = db->begin();
        ASSERT_OK(b);
        auto r = b->insert(big, std::nullopt, Doc{{0, Value(text)}});
        EXPECT_EQ(r.status().code(), Code::limit_exceeded) << why(r);
        EXPECT_EQ(b->writes(), 0u);
        text.pop_back();  // exactly 16 MiB
        auto fits = b->insert(big, std::nullopt, Doc{{0, Value(text)}});
        ASSERT_OK(fits);
        EXPECT_EQ(fits->v, 1u);
        ASSERT_OK(b->commit());
    }
    auto row = db->read().get(big, DocId{1});
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(row->body().size(), limits::doc_bytes_max);
}

}  // namespace
}  // namespace fenec::test::model_test
