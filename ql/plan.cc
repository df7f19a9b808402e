// ql/plan.cc: the index walk of ql/plan.h.
#include "ql/plan.h"

namespace fenec::ql {

namespace {

// The field an order key sorts by, aliases resolved; nullopt for `_id`, paths and aggregates.
std::optional<uint16_t> order_slot(const OrderKey& k, const engine::Schema& schema,
                                   const std::vector<SelectItem>* aliases) {
    const Column* col = std::get_if<Column>(&k.what);
    if (!col || col->is_path()) return std::nullopt;
    std::string field = col->field;
    if (aliases) {
        for (const SelectItem& item : *aliases) {
            if (!item.alias || item.alias->text != col->field) continue;
            const Column* real = std::get_if<Column>(&item.what);
            if (!real || real->is_path()) return std::nullopt;
            field = real->field;
        }
    }
    return schema.slot_of(field);
}

}  // namespace

std::optional<Rows> ordered_by_index(const engine::ReadView& view, const index::IndexSet& indexes,
                                     engine::CollectionId c, const engine::Schema& schema,
                                     const CNode* where, const OrderBy& order,
                                     const std::vector<SelectItem>* aliases, uint64_t want,
                                     const Context& ctx) {
    if (order.keys.size() != 1) return std::nullopt;
    const OrderKey& key = order.keys[0];
    const std::optional<uint16_t> slot = order_slot(key, schema, aliases);
    if (!slot) return std::nullopt;
    const index::FieldIndex* ix = indexes.find(c, *slot);
    if (!ix || !ix->ordered()) return std::nullopt;
    index::TextRule rule = index::field_rule(schema.fields[*slot]);
    if (key.collate) rule.collation = *key.collate;
    if (!(rule == ix->rule())) return std::nullopt;  // another collation: sort instead

    Rows out;
    auto take = [&](uint64_t id) {
        if (!ctx.visit()) return false;  // the run's budget is passed: the executor refuses it
        std::optional<engine::DocView> doc = view.get(c, engine::DocId{id});
        if (doc && (!where || matches(*where, engine::DocId{id}, *doc, ctx))) {
            out.rows.emplace_back(engine::DocId{id}, *doc);
        }
        return out.rows.size() < want;
    };
    const auto& entries = ix->entries();
    if (want == 0) return out;
    if (!key.desc) {
        for (const auto& [k, id] : entries) {
            if (!take(id)) break;
        }
        return out;
    }
    // Descending keys, but equal keys still in ascending id: walk back one run of a key at a
    // time and take the run forwards.
    auto end = entries.end();
    while (end != entries.begin()) {
        auto begin = std::prev(end);
        while (begin != entries.begin() && std::prev(begin)->first == begin->first) --begin;
        for (auto it = begin; it != end; ++it) {
            if (!take(it->second)) return out;
        }
        end = begin;
    }
    return out;
}

}  // namespace fenec::ql
