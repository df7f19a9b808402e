// test/support/engine_fixture.cc: the dump, schema and database helpers of engine_fixture.h.
#include "test/support/engine_fixture.h"

#include <gtest/gtest.h>

#include <sstream>

#include "engine/format.h"

namespace fenec::test {

using namespace engine;

std::string dump(const Database& db) {
    std::ostringstream out;
    const History h = db.history();
    out << "lineage " << format::hex16(db.lineage().v) << " created " << db.created_ms() << " seq "
        << db.seq().v << " replica " << h.replica << "\nforks";
    for (const Fork& f : h.forks) out << " (" << format::hex16(f.history.v) << "," << f.seq.v << ")";
    out << "\n";
    ReadView view = db.read();
    for (const CollectionInfo& c : view.collections()) {
        out << "collection " << c.id.v << " " << c.name << " next " << c.next_id << " rows " << c.rows
            << "\n";
        const Schema* s = view.schema(c.id);
        for (size_t i = 0; i < s->fields.size(); ++i) {
            const FieldDesc& f = s->fields[i];
            out << "  slot " << i << " " << (f.dropped ? "(dropped)" : f.name) << " "
                << f.type.to_string() << (f.required ? " required" : "") << " index "
                << int(f.index.kind) << " collation " << int(f.collation) << (f.nocase ? " nocase" : "")
                << "\n";
        }
        std::string hexed;  // a body's hex, built apart: a stream's put per character is slow
        view.scan(c.id, [&](DocId id, DocView doc) {
            static const char* hex = "0123456789abcdef";
            hexed.clear();
            for (std::byte b : doc.body()) {
                hexed.push_back(hex[std::to_integer<int>(b) >> 4]);
                hexed.push_back(hex[std::to_integer<int>(b) & 15]);
            }
            out << "  " << id.v << " " << hexed << "\n";
            return true;
        });
    }
    return out.str();
}

Schema schema_of(const std::string& spec) {
    Schema s;
    std::stringstream ss(spec);
    std::string item;
    while (std::getline(ss, item, ',')) {
        while (!item.empty() && item.front() == ' ') item.erase(item.begin());
        const size_t colon = item.find(':');
        FieldDesc f;
        f.name = item.substr(0, colon);
        std::string type = item.substr(colon + 1);
        if (const size_t at = type.find("@ttl("); at != std::string::npos) {
            f.index.kind = IndexKind::ttl;
            f.index.ttl_ms = std::stoll(type.substr(at + 5));
            type = type.substr(0, at);
        } else if (const size_t at2 = type.find("@unique"); at2 != std::string::npos) {
            f.index.kind = IndexKind::unique;
            type = type.substr(0, at2);
        }
        if (!type.empty() && type.back() == '!') {
            f.required = true;
            type.pop_back();
        }
        auto base = [](const std::string& t) -> TypeDesc {
            if (t == "bool") return make_type(BaseType::Bool);
            if (t == "int") return make_type(BaseType::Int);
            if (t == "float") return make_type(BaseType::Float);
            if (t == "text") return make_type(BaseType::Text);
            if (t == "bytes") return make_type(BaseType::Bytes);
            if (t == "timestamp") return make_type(BaseType::Timestamp);
            if (t == "json") return make_type(BaseType::Json);
            if (t.rfind("vector16<", 0) == 0) return make_vector(std::stoul(t.substr(9)), VectorElem::f16);
            if (t.rfind("vector<", 0) == 0) return make_vector(std::stoul(t.substr(7)));
            return make_type(BaseType::Text);
        };
        if (type.size() > 2 && type.front() == '[' && type.back() == ']') {
            f.type = make_list(base(type.substr(1, type.size() - 2)));
        } else {
            f.type = base(type);
        }
        s.fields.push_back(std::move(f));
    }
    return s;
}

std::unique_ptr<engine::Database> database_with_rows(EngineEnv& env, const std::string& path,
                                                     int rows, size_t text_bytes) {
    using namespace engine;
    auto db = Database::create(path, env.options());
    if (!db.is_ok()) {
        ADD_FAILURE() << "create: " << why(db.status());
        return nullptr;
    }
    auto b = (*db)->begin();
    EXPECT_TRUE(b.is_ok());
    auto c = b->create_collection("items", schema_of("n:int, s:text"));
    EXPECT_TRUE(c.is_ok());
    for (int i = 0; i < rows; ++i) {
        Doc d{{0, Value(int64_t{i})}, {1, Value(std::string(text_bytes, char('a' + i % 26)))}};
        EXPECT_TRUE(b->insert(*c, std::nullopt, d).is_ok());
    }
    EXPECT_TRUE(b->commit().is_ok());
    return std::move(*db);
}

}  // namespace fenec::test
