// ql/exec_order.cc: `order` by sorting (fenecql.md §7.3): each row's keys encoded once as one
// memcmp-ordered string (index/key.h), the id last, so ties fall to ascending id and one sort of
// strings orders the rows. The walk of an ordered index for `order … limit` is ql/plan.cc's.
#include <algorithm>

#include "index/key.h"
#include "ql/exec_read_internal.h"

namespace fenec::ql {

using engine::Value;

namespace {

// One order key resolved against a collection: the column it reads and the rule it compares by.
struct SortKey {
    FieldRef ref;
    index::TextRule rule;
    bool desc = false;
};

QlResult<SortKey> resolve_order_key(const OrderKey& k, const engine::Schema& schema,
                                    const std::string& collection,
                                    const std::vector<SelectItem>* aliases) {
    const Column* col = std::get_if<Column>(&k.what);
    if (!col) return error_at(k.pos, "an aggregate orders only a grouped read");
    Column target = *col;
    if (aliases && col->keys.empty()) {
        for (const SelectItem& item : *aliases) {
            if (item.alias && item.alias->text == col->field) {
                if (const Column* real = std::get_if<Column>(&item.what)) target = *real;
            }
        }
    }
    QlResult<FieldRef> ref = resolve_column(schema, target, k.pos, collection);
    if (!ref) return ref.take_error();
    SortKey key{ref.value(), ref.value().rule, k.desc};
    if (k.collate) {
        if (!ref.value().is_text()) {
            return error_at(k.collate_pos,
                            "`collate` needs a text column, and `" + col->text() + "` is not one");
        }
        key.rule.collation = *k.collate;
    }
    return key;
}

}  // namespace

void append_id(std::string& out, uint64_t id) {
    for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>(id >> (8 * i)));
}

void append_sort_key(std::string& out, const Value& v, const index::TextRule& rule, bool desc) {
    const size_t at = out.size();
    index::append_key(v, rule, out);
    if (desc) {
        for (size_t i = at; i < out.size(); ++i) out[i] = static_cast<char>(~out[i]);
    }
}

Failure order_rows(Rows& rows, const OrderBy& order, const engine::Schema& schema,
                   const std::string& collection, const std::vector<SelectItem>* aliases) {
    std::vector<SortKey> keys;
    for (const OrderKey& k : order.keys) {
        QlResult<SortKey> key = resolve_order_key(k, schema, collection, aliases);
        if (!key) return key.take_error();
        keys.push_back(std::move(key.value()));
    }
    std::vector<std::pair<std::string, size_t>> sorted;
    sorted.reserve(rows.rows.size());
    for (size_t i = 0; i < rows.rows.size(); ++i) {
        std::string s;
        for (const SortKey& k : keys) {
            append_sort_key(s, read_column(k.ref, rows.rows[i].first, rows.rows[i].second), k.rule,
                            k.desc);
        }
        append_id(s, rows.rows[i].first.v);
        sorted.emplace_back(std::move(s), i);
    }
    std::sort(sorted.begin(), sorted.end());
    Rows out;
    out.rows.reserve(rows.rows.size());
    for (const auto& [s, i] : sorted) out.rows.push_back(rows.rows[i]);
    rows = std::move(out);
    return std::nullopt;
}

}  // namespace fenec::ql
