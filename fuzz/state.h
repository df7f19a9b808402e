// fuzz/state.h: the state of an open database as plain values, for the fuzz target's oracles:
// lineage, created_ms, seq, forks, and per collection its id, name, schema, next id, row count and
// every visible document decoded (DocView::decode), values in dropped slots left out, since a
// rewrite writes null there (engine.md §4 "Slots"). Two databases that must hold the same data
// (a read-only and a read-write open of one file; a file and its image; a file before and after a
// checkpoint) must give equal States. Reading a State decodes every document, so it is also the
// "read scan over every collection" the target runs on whatever opens.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/database.h"

namespace fenec::fuzz {

struct State {
    struct Coll {
        uint32_t id = 0;
        std::string name;
        engine::Schema schema;
        uint64_t next_id = 0;
        uint64_t rows = 0;
        std::vector<std::pair<uint64_t, engine::Doc>> docs;  // visible rows, id order
        bool operator==(const Coll&) const = default;
    };
    uint64_t lineage = 0;
    int64_t created_ms = 0;
    uint64_t seq = 0;
    std::vector<engine::Fork> forks;
    std::vector<Coll> collections;
    bool operator==(const State&) const = default;
};

inline State state_of(const engine::Database& db) {
    State s;
    s.lineage = db.lineage().v;
    s.created_ms = db.created_ms();
    s.seq = db.seq().v;
    s.forks = db.history().forks;
    engine::ReadView view = db.read();
    for (const engine::CollectionInfo& info : view.collections()) {
        State::Coll c;
        c.id = info.id.v;
        c.name = info.name;
        c.next_id = info.next_id;
        c.rows = info.rows;
        const engine::Schema* schema = view.schema(info.id);
        if (schema) c.schema = *schema;
        view.scan(info.id, [&](engine::DocId id, engine::DocView doc) {
            engine::Doc values = doc.decode();
            std::erase_if(values, [&](const std::pair<uint16_t, engine::Value>& v) {
                return v.first < c.schema.fields.size() && c.schema.fields[v.first].dropped;
            });
            c.docs.emplace_back(id.v, std::move(values));
            return true;
        });
        s.collections.push_back(std::move(c));
    }
    return s;
}

}  // namespace fenec::fuzz
