// ql/exec_candidates.cc: the rows a read starts from (fenecql.md §4.1, §7.1 step 1): the ids an
// indexed term narrows the read to, or a scan of the collection, each row kept only where the
// filter passes it. Invariant: an index only narrows, never decides: every candidate is read
// through the view (gone or expired: skipped) and filtered, so the rows are what a scan gives.
#include <algorithm>

#include "index/key.h"
#include "ql/exec_read.h"

namespace fenec::ql {

using engine::DocId;
using engine::DocView;
using engine::Value;

namespace {

// Ids an indexed equality, `in` or range term narrows to; nullopt when it does not apply.
std::optional<std::vector<uint64_t>> index_term(const CNode& n, const index::IndexSet& indexes,
                                                engine::CollectionId c) {
    if (n.kind == CNode::Kind::in && !n.negated && n.kids[0].kind == CNode::Kind::column) {
        const FieldRef& ref = n.kids[0].column;
        if (!ref.keys.empty()) return std::nullopt;
        if (ref.is_id) {  // `_id in [...]`: the ids it names, when every value is an int
            std::vector<uint64_t> ids;
            for (const Value& v : n.set) {
                const int64_t* i = std::get_if<int64_t>(&v.rep);
                if (!i) return std::nullopt;  // a float or another kind: the filter decides
                if (*i > 0) ids.push_back(static_cast<uint64_t>(*i));
            }
            std::sort(ids.begin(), ids.end());
            ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
            return ids;
        }
        const index::FieldIndex* ix = indexes.find(c, ref.slot);
        if (!ix) return std::nullopt;
        std::vector<uint64_t> ids;
        for (const Value& v : n.set) {
            std::vector<uint64_t> part = ix->equal(index::key_of(v, ix->rule()));
            ids.insert(ids.end(), part.begin(), part.end());
        }
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        return ids;
    }
    if (n.kind != CNode::Kind::compare) return std::nullopt;
    const CNode* col = &n.kids[0];
    const CNode* val = &n.kids[1];
    CompareOp op = n.op;
    if (col->kind != CNode::Kind::column) {
        std::swap(col, val);
        switch (op) {  // c < x is x > c
            case CompareOp::lt:
                op = CompareOp::gt;
                break;
            case CompareOp::le:
                op = CompareOp::ge;
                break;
            case CompareOp::gt:
                op = CompareOp::lt;
                break;
            case CompareOp::ge:
                op = CompareOp::le;
                break;
            default:
                break;
        }
    }
    if (col->kind != CNode::Kind::column || val->kind != CNode::Kind::constant) return std::nullopt;
    const FieldRef& ref = col->column;
    if (!ref.keys.empty()) return std::nullopt;
    if (ref.is_id) {
        if (op != CompareOp::eq) return std::nullopt;
        const int64_t* i = std::get_if<int64_t>(&val->constant.rep);
        if (i && *i > 0) return std::vector<uint64_t>{static_cast<uint64_t>(*i)};
        return std::nullopt;  // a float id or another kind: the filter decides
    }
    const index::FieldIndex* ix = indexes.find(c, ref.slot);
    if (!ix || !(ix->rule() == n.rule || !ref.is_text())) return std::nullopt;
    const std::string key = index::key_of(val->constant, ix->rule());
    if (op == CompareOp::eq) return ix->equal(key);
    if (!ix->ordered() || val->constant.is_null()) return std::nullopt;
    if (op != CompareOp::lt && op != CompareOp::le && op != CompareOp::gt && op != CompareOp::ge) {
        return std::nullopt;
    }
    // Ranges stay within the constant's kind: across kinds `<` is false (§6.2).
    const std::string kind_lo(1, key[0]);
    const std::string kind_hi(1, static_cast<char>(key[0] + 1));
    const auto& entries = ix->entries();
    auto lo = entries.lower_bound({kind_lo, 0});
    auto hi = entries.lower_bound({kind_hi, 0});
    if (op == CompareOp::gt) lo = entries.upper_bound({key, UINT64_MAX});
    if (op == CompareOp::ge) lo = entries.lower_bound({key, 0});
    if (op == CompareOp::lt) hi = entries.lower_bound({key, 0});
    if (op == CompareOp::le) hi = entries.upper_bound({key, UINT64_MAX});
    std::vector<uint64_t> ids;
    for (auto it = lo; it != hi && it != entries.end(); ++it) {
        if (it->first >= kind_hi) break;
        ids.push_back(it->second);
    }
    std::sort(ids.begin(), ids.end());
    return ids;
}

// The ids a filter narrows to, ascending: an `and` the narrowest of its terms', an `or` the union
// of its terms' when every term narrows (one that does not leaves the whole `or` to a scan).
std::optional<std::vector<uint64_t>> candidates(const CNode* where, const index::IndexSet& indexes,
                                                engine::CollectionId c) {
    if (!where) return std::nullopt;
    if (where->kind == CNode::Kind::and_) {
        std::optional<std::vector<uint64_t>> best;
        for (const CNode& term : where->kids) {
            std::optional<std::vector<uint64_t>> ids = candidates(&term, indexes, c);
            if (ids && (!best || ids->size() < best->size())) best = std::move(ids);
        }
        return best;
    }
    if (where->kind == CNode::Kind::or_) {
        std::vector<uint64_t> all;
        for (const CNode& term : where->kids) {
            std::optional<std::vector<uint64_t>> ids = candidates(&term, indexes, c);
            if (!ids) return std::nullopt;
            all.insert(all.end(), ids->begin(), ids->end());
        }
        std::sort(all.begin(), all.end());
        all.erase(std::unique(all.begin(), all.end()), all.end());
        return all;
    }
    return index_term(*where, indexes, c);
}

}  // namespace

Rows select_rows(const engine::ReadView& view, const index::IndexSet& indexes,
                 engine::CollectionId c, const CNode* where, const Context& ctx) {
    Rows out;
    std::optional<std::vector<uint64_t>> ids = candidates(where, indexes, c);
    if (ids) {
        for (uint64_t id : *ids) {
            if (!ctx.visit()) break;  // the run's budget is passed: the executor refuses it
            std::optional<DocView> doc = view.get(c, DocId{id});
            if (!doc) continue;
            if (!where || matches(*where, DocId{id}, *doc, ctx))
                out.rows.emplace_back(DocId{id}, *doc);
        }
        return out;
    }
    view.scan(c, [&](DocId id, DocView doc) {
        if (!where || matches(*where, id, doc, ctx)) out.rows.emplace_back(id, doc);
        return ctx.visit();
    });
    return out;
}

}  // namespace fenec::ql
