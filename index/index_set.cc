// index/index_set.cc: building and maintaining the indexes of index/index_set.h.
#include "index/index_set.h"

#include <algorithm>

#include "index/key.h"
#include "index/memory.h"

namespace fenec::index {

using engine::Code;
using engine::IndexKind;
using engine::Status;

IndexSet::IndexSet()
    : text_(std::make_unique<TextIndexes>()), vectors_(std::make_unique<VectorIndexes>()) {
    add_extension(text_.get());
    add_extension(vectors_.get());
}

TextRule field_rule(const engine::FieldDesc& f) {
    return TextRule{f.collation, f.nocase, f.collation};
}

void FieldIndex::add(const std::string& key, uint64_t id) {
    if (ordered()) {
        if (sorted_.emplace(key, id).second) {
            bytes_ += memory::tree_node_bytes<std::pair<std::string, uint64_t>> +
                      memory::string_heap(key);
        }
    } else {
        auto [it, fresh] = hashed_.try_emplace(key);
        if (fresh) bytes_ += memory::hash_node_bytes<std::vector<uint64_t>> + memory::string_heap(key);
        std::vector<uint64_t>& ids = it->second;
        const size_t capacity = ids.capacity();
        ids.insert(std::lower_bound(ids.begin(), ids.end(), id), id);
        bytes_ += (ids.capacity() - capacity) * sizeof(uint64_t);
    }
    ++count_;
}

void FieldIndex::remove(const std::string& key, uint64_t id) {
    if (ordered()) {
        const size_t erased = sorted_.erase({key, id});
        count_ -= erased;
        if (erased) {
            bytes_ -= memory::tree_node_bytes<std::pair<std::string, uint64_t>> +
                      memory::string_heap(key);
        }
        return;
    }
    auto it = hashed_.find(key);
    if (it == hashed_.end()) return;
    auto pos = std::lower_bound(it->second.begin(), it->second.end(), id);
    if (pos != it->second.end() && *pos == id) {
        it->second.erase(pos);
        --count_;
    }
    if (it->second.empty()) {
        bytes_ -= memory::hash_node_bytes<std::vector<uint64_t>> + memory::string_heap(key) +
                  it->second.capacity() * sizeof(uint64_t);
        hashed_.erase(it);
    }
}

std::vector<uint64_t> FieldIndex::equal(const std::string& key) const {
    if (ordered()) {
        std::vector<uint64_t> out;
        for (auto it = sorted_.lower_bound({key, 0}); it != sorted_.end() && it->first == key; ++it) {
            out.push_back(it->second);
        }
        return out;
    }
    auto it = hashed_.find(key);
    return it == hashed_.end() ? std::vector<uint64_t>{} : it->second;
}

uint64_t FieldIndex::other_holder(const std::string& key, uint64_t id) const {
    for (uint64_t holder : equal(key)) {
        if (holder != id) return holder;
    }
    return 0;
}

std::string IndexSet::key_for(const engine::DocView& doc, uint16_t slot, const TextRule& rule) {
    return key_of(doc.get(slot), rule);
}

uint64_t IndexSet::memory_bytes() const {
    uint64_t bytes = 0;
    for (const auto& [c, coll] : colls_) {
        for (const auto& f : coll.indexes) bytes += sizeof(FieldIndex) + f->memory_bytes();
    }
    for (const engine::IndexHook* e : extensions_) bytes += e->memory_bytes();
    return bytes;
}

const FieldIndex* IndexSet::find(engine::CollectionId c, uint16_t slot) const {
    auto it = colls_.find(c.v);
    if (it == colls_.end()) return nullptr;
    for (const auto& ix : it->second.indexes) {
        if (ix->slot() == slot) return ix.get();
    }
    return nullptr;
}

Status IndexSet::write_own(const engine::WriteEvent& ev) {
    auto it = colls_.find(ev.collection.v);
    if (it == colls_.end()) return Status::ok();
    // Check every unique index first, so a refusal changes nothing.
    for (const auto& ix : it->second.indexes) {
        if (ix->kind() != IndexKind::unique || !ev.after || ev.after->is_null(ix->slot())) continue;
        const std::string key = key_for(*ev.after, ix->slot(), ix->rule());
        if (uint64_t holder = ix->other_holder(key, ev.id.v)) {
            return Status::error(Code::duplicate,
                                 "field `" + ix->field() + "` already holds that value (row " +
                                     std::to_string(holder) + ")",
                                 engine::Detail{.id = holder});
        }
    }
    for (const auto& ix : it->second.indexes) {
        if (ev.before) ix->remove(key_for(*ev.before, ix->slot(), ix->rule()), ev.id.v);
        if (ev.after) ix->add(key_for(*ev.after, ix->slot(), ix->rule()), ev.id.v);
    }
    return Status::ok();
}

void IndexSet::undo_own(const engine::WriteEvent& ev) {
    auto it = colls_.find(ev.collection.v);
    if (it == colls_.end()) return;
    for (const auto& ix : it->second.indexes) {
        if (ev.after) ix->remove(key_for(*ev.after, ix->slot(), ix->rule()), ev.id.v);
        if (ev.before) ix->add(key_for(*ev.before, ix->slot(), ix->rule()), ev.id.v);
    }
}

void IndexSet::schema_own(engine::CollectionId c, const engine::Schema* schema,
                          const engine::DocSource* docs) {
    colls_.erase(c.v);
    if (!schema) return;
    Coll coll;
    for (size_t slot = 0; slot < schema->fields.size(); ++slot) {
        const engine::FieldDesc& f = schema->fields[slot];
        if (f.dropped) continue;
        switch (f.index.kind) {
            case IndexKind::hash: case IndexKind::unique: case IndexKind::sorted:
            case IndexKind::ttl:
                coll.indexes.push_back(std::make_unique<FieldIndex>(
                    f.index.kind, static_cast<uint16_t>(slot), f.name, field_rule(f)));
                break;
            default: break;  // text and hnsw are search's (index/ search modules)
        }
    }
    if (coll.indexes.empty()) return;
    if (docs) {
        docs->each([&](engine::DocId id, engine::DocView doc) {
            for (const auto& ix : coll.indexes) ix->add(key_for(doc, ix->slot(), ix->rule()), id.v);
            return true;
        });
    }
    colls_[c.v] = std::move(coll);
}

Status IndexSet::on_write(const engine::WriteEvent& ev) {
    FENEC_RETURN_IF_ERROR(write_own(ev));
    for (engine::IndexHook* x : extensions_) {
        Status st = x->on_write(ev);
        if (!st.is_ok()) {
            // Extensions never refuse; should one, everything heard so far is taken back.
            for (engine::IndexHook* y : extensions_) {
                if (y == x) break;
                y->on_undo(ev);
            }
            undo_own(ev);
            return st;
        }
    }
    return Status::ok();
}

void IndexSet::on_undo(const engine::WriteEvent& ev) {
    for (auto it = extensions_.rbegin(); it != extensions_.rend(); ++it) (*it)->on_undo(ev);
    undo_own(ev);
}

void IndexSet::on_schema(engine::CollectionId c, const engine::Schema* schema,
                         const engine::DocSource* docs) {
    schema_own(c, schema, docs);
    for (engine::IndexHook* x : extensions_) x->on_schema(c, schema, docs);
}

void IndexSet::on_open(engine::OpenReport& report) {
    for (engine::IndexHook* x : extensions_) x->on_open(report);
}

void IndexSet::on_opened() {
    for (engine::IndexHook* x : extensions_) x->on_opened();
}

bool IndexSet::has_retired(engine::CollectionId c, uint16_t slot) const {
    for (engine::IndexHook* x : extensions_) {
        if (x->has_retired(c, slot)) return true;
    }
    return false;
}

Status IndexSet::rebuild_graph(engine::CollectionId c, uint16_t slot) {
    for (engine::IndexHook* x : extensions_) {
        if (x->has_retired(c, slot)) FENEC_RETURN_IF_ERROR(x->rebuild_graph(c, slot));
    }
    return Status::ok();
}

engine::Result<std::vector<std::byte>> IndexSet::encode_graph(engine::CollectionId c,
                                                              uint16_t slot, engine::Seq at,
                                                              uint64_t durable_end) {
    for (engine::IndexHook* x : extensions_) {
        engine::Result<std::vector<std::byte>> g = x->encode_graph(c, slot, at, durable_end);
        if (g.is_ok() || g.status().code() != Code::not_found) return g;
    }
    return Status::error(Code::not_found, "no graph is kept for that field");
}

}  // namespace fenec::index
