// index/index_set.h: a tenant's hash, unique and sorted indexes (and the ttl field's order),
// kept current by every write through the engine's IndexHook. Keys are index/key.h's, so an
// index answers exactly what a scan would (fenecql.md §4.1: "indexes change speed, never
// answers"). Thread-safety: the engine calls the hook under its writer lock; readers use the
// query methods under a ReadView (the shared lock), so no lock of its own is needed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/hooks.h"
#include "index/collation.h"
#include "index/hnsw_index.h"
#include "index/text_index.h"

namespace fenec::index {

// The text rule a field compares by (fenecql.md §6.3-§6.4).
TextRule field_rule(const engine::FieldDesc& f);

class FieldIndex {
public:
    FieldIndex(engine::IndexKind kind, uint16_t slot, std::string field, TextRule rule)
        : kind_(kind), slot_(slot), field_(std::move(field)), rule_(rule) {}

    engine::IndexKind kind() const { return kind_; }
    uint16_t slot() const { return slot_; }
    const std::string& field() const { return field_; }
    const TextRule& rule() const { return rule_; }
    bool ordered() const {
        return kind_ == engine::IndexKind::sorted || kind_ == engine::IndexKind::ttl;
    }

    void add(const std::string& key, uint64_t id);
    void remove(const std::string& key, uint64_t id);
    // Ids holding exactly `key`, ascending.
    std::vector<uint64_t> equal(const std::string& key) const;
    // A holder of `key` other than `id`, or 0.
    uint64_t other_holder(const std::string& key, uint64_t id) const;
    // Ordered indexes: (key, id) pairs in key order, ties by id.
    const std::set<std::pair<std::string, uint64_t>>& entries() const { return sorted_; }
    size_t size() const { return count_; }
    // The heap its entries hold (index/memory.h), kept as they are added and removed.
    uint64_t memory_bytes() const { return bytes_; }

private:
    engine::IndexKind kind_;
    uint16_t slot_;
    std::string field_;
    TextRule rule_;
    std::unordered_map<std::string, std::vector<uint64_t>> hashed_;  // hash, unique
    std::set<std::pair<std::string, uint64_t>> sorted_;              // sorted, ttl
    size_t count_ = 0;
    uint64_t bytes_ = 0;
};

class IndexSet final : public engine::IndexHook {
public:
    // Text search (@text) and vector graphs (@hnsw) are kept beside the hash and sorted indexes.
    IndexSet();
    IndexSet(const IndexSet&) = delete;
    IndexSet& operator=(const IndexSet&) = delete;

    // engine::IndexHook
    engine::Status on_write(const engine::WriteEvent& ev) override;
    void on_undo(const engine::WriteEvent& ev) override;
    void on_schema(engine::CollectionId c, const engine::Schema* schema,
                   const engine::DocSource* docs) override;
    void on_open(engine::OpenReport& report) override;
    void on_opened() override;
    bool has_retired(engine::CollectionId c, uint16_t slot) const override;
    engine::Status rebuild_graph(engine::CollectionId c, uint16_t slot) override;
    engine::Result<std::vector<std::byte>> encode_graph(engine::CollectionId c, uint16_t slot,
                                                        engine::Seq at,
                                                        uint64_t durable_end) override;
    // Every index's entries, text postings and vector graphs included.
    uint64_t memory_bytes() const override;

    // The index on (collection, slot), or null.
    const FieldIndex* find(engine::CollectionId c, uint16_t slot) const;

    // Other indexes kept through the same hook (text search, vector graphs): each hears every
    // call after this set's own indexes. They never refuse a write. Not owned.
    void add_extension(engine::IndexHook* extension) { extensions_.push_back(extension); }

    const TextIndexes& text() const { return *text_; }
    const VectorIndexes& vectors() const { return *vectors_; }

    // The key a document's slot is indexed under.
    static std::string key_for(const engine::DocView& doc, uint16_t slot, const TextRule& rule);

private:
    engine::Status write_own(const engine::WriteEvent& ev);
    void undo_own(const engine::WriteEvent& ev);
    void schema_own(engine::CollectionId c, const engine::Schema* schema,
                    const engine::DocSource* docs);

    struct Coll {
        std::vector<std::unique_ptr<FieldIndex>> indexes;
    };
    std::map<uint32_t, Coll> colls_;
    std::vector<engine::IndexHook*> extensions_;
    std::unique_ptr<TextIndexes> text_;
    std::unique_ptr<VectorIndexes> vectors_;
};

}  // namespace fenec::index
