// ql/exec_write.cc: the row-writing statements (fenecql.md §4), insert, put, set and del, each
// written into a block its caller began (ql/exec_write.h), and engine_error, the one mapping of an
// engine refusal to a FenecQL error; refusals name the collection, the id or the field.
#include <set>

#include "index/key.h"
#include "ql/exec_read.h"
#include "ql/exec_write.h"
#include "ql/executor.h"

namespace fenec::ql {

using engine::Block;
using engine::Code;
using engine::DocId;
using engine::Value;

Error engine_error(const engine::Status& st, const std::string& collection) {
    Error e;
    e.message = std::string(st.message());
    e.collection = collection;
    switch (st.code()) {
        case Code::not_found:
            e.status_code = 404;
            break;
        case Code::already_exists:
            e.status_code = 409;
            break;
        case Code::duplicate:
            e.status_code = 409;
            break;
        case Code::invalid_argument:
            e.status_code = 400;
            break;
        case Code::limit_exceeded:
            e.status_code = 413;
            break;
        case Code::quota_exceeded:
            e.status_code = 507;
            break;
        case Code::rate_limited:
            e.status_code = 429;
            break;
        case Code::not_leased:
        case Code::frozen:
        case Code::read_only:
        case Code::latched:
            e.status_code = 503;
            break;
        case Code::busy:
        case Code::cancelled:
            e.status_code = 409;
            break;
        case Code::corruption:
        case Code::io_error:
        case Code::ok:
            e.status_code = 500;
            break;
    }
    e.engine_code = st.code();
    e.engine_detail = st.detail();  // which quota, a rate's retry-after: the server's headers
    return e;
}

namespace {

Error conflict(std::string message, const std::string& collection) {
    Error e;
    e.message = std::move(message);
    e.status_code = 409;
    e.collection = collection;
    return e;
}

struct Writer {
    Block& block;
    const index::IndexSet& indexes;
    const Context& ctx;

    QlResult<Answer> insert(const Insert& ins);
    // `set` (changes given) or `del` (none) of the rows the filter picks (§4.2).
    QlResult<Answer> set_or_del(const std::string& coll_name, const Name& coll,
                                const WriteFilter& f, const Expr* changes);
    // The rows a set or del writes: those `where` keeps, in `order`, at most `limit`, and a 412
    // unless exactly `require` when it is given.
    QlResult<Rows> rows_to_write(engine::CollectionId c, const engine::Schema& schema,
                                 const std::string& name, const WriteFilter& f);
    // The fields a `set` assigns (`changes` is an object), each value converted to its field's
    // type; evaluated once, before any row is written.
    using Assignments = std::vector<std::pair<uint16_t, Value>>;
    QlResult<Assignments> assignments(const Expr& changes, const engine::Schema& schema,
                                      const std::string& name);
    // Each row rewritten with the assignments, dropped fields left out; a refusal names the
    // collection (or, for @unique, the field).
    Failure set_rows(engine::CollectionId c, const engine::Schema& schema, const std::string& name,
                     const Rows& rows, const Assignments& values);
    QlResult<engine::Doc> document(const Expr& object, const engine::Schema& schema,
                                   const std::string& collection, std::optional<DocId>& id);
    QlResult<engine::Doc> document_value(const Value& object, uint32_t pos,
                                         const engine::Schema& schema,
                                         const std::string& collection, std::optional<DocId>& id);
};

QlResult<engine::Doc> Writer::document_value(const Value& v, uint32_t pos,
                                             const engine::Schema& schema,
                                             const std::string& collection,
                                             std::optional<DocId>& id) {
    const auto* o = std::get_if<engine::Object>(&v.rep);
    if (!o) return error_at(pos, "a document is an object, found " + kind_of(v));
    engine::Doc doc;
    std::set<std::string> seen;
    for (size_t i = 0; i < o->keys.size(); ++i) {
        const std::string& key = o->keys[i];
        if (!seen.insert(key).second) return error_at(pos, "`" + key + "` is given twice");
        if (key == "_id") {
            const Value& idv = o->values[i];
            const int64_t* n = std::get_if<int64_t>(&idv.rep);
            if (!n || *n < 1) {
                Error e = error_at(pos, "`_id` must be an int from 1 to 2^63-1");
                e.site = ValueSite{0, std::nullopt, key};
                return e;
            }
            id = DocId{static_cast<uint64_t>(*n)};
            continue;
        }
        const std::optional<uint16_t> slot = schema.slot_of(key);
        if (!slot) {
            Error e = error_at(pos, "collection `" + collection + "` has no field `" + key + "`");
            e.site = ValueSite{0, std::nullopt, key};
            return e;
        }
        QlResult<Value> c = convert_for_write(o->values[i], schema.fields[*slot], pos);
        if (!c) {
            Error e = c.take_error();
            e.site = ValueSite{0, std::nullopt, key};
            return e;
        }
        doc.emplace_back(*slot, std::move(c.value()));
    }
    return doc;
}

QlResult<engine::Doc> Writer::document(const Expr& object, const engine::Schema& schema,
                                       const std::string& collection, std::optional<DocId>& id) {
    const auto* o = std::get_if<ObjectExpr>(&object.node);
    if (!o) {
        QlResult<Value> v = eval_constant(object, ctx);
        if (!v) return v.take_error();
        QlResult<engine::Doc> doc = document_value(v.value(), object.pos, schema, collection, id);
        if (doc) return doc;
        Error e = doc.take_error();
        const auto* p = std::get_if<Param>(&object.node);
        if (p) e.site.param = p->index;
        if (!p) e.site = ValueSite{};  // a value the statement wrote: `position` says where
        return e;
    }
    engine::Doc doc;
    std::set<std::string> seen;
    for (const Member& m : o->members) {
        if (!seen.insert(m.key.text).second)
            return error_at(m.key.pos, "`" + m.key.text + "` is given twice");
        QlResult<Value> v = eval_constant(m.value, ctx);
        if (!v) return v.take_error();
        if (m.key.text == "_id") {
            const int64_t* n = std::get_if<int64_t>(&v.value().rep);
            if (!n || *n < 1) return error_at(m.value.pos, "`_id` must be an int from 1 to 2^63-1");
            id = DocId{static_cast<uint64_t>(*n)};
            continue;
        }
        const std::optional<uint16_t> slot = schema.slot_of(m.key.text);
        if (!slot) {
            return error_at(m.key.pos,
                            "collection `" + collection + "` has no field `" + m.key.text + "`");
        }
        QlResult<Value> c = convert_for_write(v.value(), schema.fields[*slot], m.value.pos);
        if (!c) return c.take_error();
        doc.emplace_back(*slot, std::move(c.value()));
    }
    return doc;
}

// A write the @unique indexes refused (§4.2): a 409 naming the field whose value `doc` shares
// with another live row. A refused write leaves the indexes as they were, so the holder is found
// again here; `id` is the row written (its own value is no clash), none for a new row.
Error unique_clash(const engine::Status& st, const index::IndexSet& indexes, engine::CollectionId c,
                   const engine::Schema& schema, const engine::Doc& doc, std::optional<DocId> id,
                   const std::string& collection) {
    Error e = engine_error(st, collection);
    for (const auto& [slot, value] : doc) {
        if (schema.fields[slot].index.kind != engine::IndexKind::unique || value.is_null()) {
            continue;
        }
        const index::FieldIndex* ix = indexes.find(c, slot);
        if (ix && ix->other_holder(index::key_of(value, ix->rule()), id ? id->v : 0) != 0) {
            e.field = schema.fields[slot].name;
            break;
        }
    }
    return e;
}

QlResult<Answer> Writer::insert(const Insert& ins) {
    const std::string& name = ins.collection.text;
    engine::Result<engine::CollectionId> c = block.find(name);
    if (!c.is_ok() || name.starts_with("_")) return not_found_collection(ins.collection);
    const engine::Schema schema = *block.schema(*c);
    std::vector<const Expr*> objects;
    std::vector<Value> bound;
    if (ins.documents.param) {
        const uint32_t n = ins.documents.param->index;
        if (n > ctx.params.size())
            return error_at(ins.documents.pos, "$" + std::to_string(n) + " is not bound");
        const Value& v = ctx.params[n - 1];
        if (const auto* l = std::get_if<engine::List>(&v.rep))
            bound = l->items;
        else
            bound.push_back(v);
    } else {
        for (const Expr& e : ins.documents.objects) objects.push_back(&e);
    }
    Answer answer;
    answer.kind = Answer::Kind::ids;
    std::set<uint64_t> given;
    const size_t count = ins.documents.param ? bound.size() : objects.size();
    const bool bound_list =
        ins.documents.param &&
        std::holds_alternative<engine::List>(ctx.params[ins.documents.param->index - 1].rep);
    for (size_t i = 0; i < count; ++i) {
        std::optional<DocId> id;
        QlResult<engine::Doc> doc =
            ins.documents.param ? document_value(bound[i], ins.documents.pos, schema, name, id)
                                : document(*objects[i], schema, name, id);
        if (!doc) {
            Error e = doc.take_error();
            if (ins.documents.param && e.site.known()) {
                e.site.param = ins.documents.param->index;
                if (bound_list) e.site.item = i;
            }
            return e;
        }
        if (id && !given.insert(id->v).second) {
            Error e = conflict("two documents give `_id` " + std::to_string(id->v), name);
            e.id = id->v;
            return e;
        }
        if (!ins.replace && id && block.get(*c, *id)) {  // a live row holds it (expired: free)
            Error e = conflict("`" + name + "` already holds _id " + std::to_string(id->v), name);
            e.id = id->v;
            return e;
        }
        engine::Result<DocId> r =
            ins.replace ? block.put(*c, id, doc.value()) : block.insert(*c, id, doc.value());
        if (!r.is_ok()) {
            if (r.status().code() != Code::duplicate) return engine_error(r.status(), name);
            return unique_clash(r.status(), indexes, *c, schema, doc.value(), id, name);
        }
        answer.ids.push_back(r->v);
    }
    answer.affected = answer.ids.size();
    return answer;
}

QlResult<Answer> Writer::set_or_del(const std::string& name, const Name& coll, const WriteFilter& f,
                                    const Expr* changes) {
    engine::Result<engine::CollectionId> c = block.find(name);
    if (!c.is_ok() || name.starts_with("_")) return not_found_collection(coll);
    const engine::Schema schema = *block.schema(*c);
    QlResult<Rows> rows = rows_to_write(*c, schema, name, f);
    if (!rows) return rows.take_error();
    Answer answer;
    answer.kind = Answer::Kind::affected;
    answer.affected = rows.value().rows.size();
    if (!changes) {
        if (f.returning) {  // del returns rows as they were, before it
            QlResult<Table> t = project(rows.value(), f.returning, schema, name);
            if (!t) return t.take_error();
            answer.returning = true;
            answer.table = std::move(t.value());
        }
        for (const auto& [id, doc] : rows.value().rows) {
            engine::Result<bool> r = block.del(*c, id);
            if (!r.is_ok()) return engine_error(r.status(), name);
        }
        return answer;
    }
    QlResult<Assignments> values = assignments(*changes, schema, name);
    if (!values) return values.take_error();
    if (auto fail = set_rows(*c, schema, name, rows.value(), values.value())) return *fail;
    if (f.returning) {  // set returns rows as they are after it
        Rows after;
        for (const auto& [id, before] : rows.value().rows) {
            std::optional<engine::DocView> d = block.get(*c, id);
            if (d) after.rows.emplace_back(id, *d);
        }
        QlResult<Table> t = project(after, f.returning, schema, name);
        if (!t) return t.take_error();
        answer.returning = true;
        answer.table = std::move(t.value());
    }
    return answer;
}

QlResult<Rows> Writer::rows_to_write(engine::CollectionId c, const engine::Schema& schema,
                                     const std::string& name, const WriteFilter& f) {
    QlResult<CNode> where = compile_where(f.where.expr, schema, name, ctx);
    if (!where) return where.take_error();
    // Read through the open block, as a read of the same filter would be (narrowed by an index
    // where one applies): the block's view and the indexes both hold its earlier writes, so it
    // sees the state it will change. A passed budget stops the read, and the block rolls back.
    Rows rows = select_rows(block.view(), indexes, c, &where.value(), ctx);
    if (f.order) {
        if (auto fail = order_rows(rows, *f.order, schema, name, nullptr)) return *fail;
    }
    if (f.limit) {
        QlResult<uint64_t> l = int_arg(*f.limit, ctx);
        if (!l) return l.take_error();
        if (rows.rows.size() > l.value()) rows.rows.resize(l.value());
    }
    if (f.require) {
        QlResult<uint64_t> r = int_arg(*f.require, ctx);
        if (!r) return r.take_error();
        if (rows.rows.size() != r.value()) {
            Error e;
            e.message = "the statement would write " + std::to_string(rows.rows.size()) +
                        " rows, not the " + std::to_string(r.value()) + " required";
            e.status_code = 412;
            return e;
        }
    }
    return rows;
}

QlResult<Writer::Assignments> Writer::assignments(const Expr& changes, const engine::Schema& schema,
                                                  const std::string& name) {
    const auto* o = std::get_if<ObjectExpr>(&changes.node);
    Assignments values;
    for (const Member& m : o->members) {
        if (m.key.text == "_id") return error_at(m.key.pos, "`_id` cannot be set");
        const std::optional<uint16_t> slot = schema.slot_of(m.key.text);
        if (!slot) {
            return error_at(m.key.pos,
                            "collection `" + name + "` has no field `" + m.key.text + "`");
        }
        QlResult<Value> v = eval_constant(m.value, ctx);
        if (!v) return v.take_error();
        QlResult<Value> cv = convert_for_write(v.value(), schema.fields[*slot], m.value.pos);
        if (!cv) {
            Error e = cv.take_error();
            if (const auto* p = std::get_if<Param>(&m.value.node)) {
                e.site = ValueSite{p->index, std::nullopt, m.key.text};
            }
            return e;
        }
        values.emplace_back(*slot, std::move(cv.value()));
    }
    return values;
}

Failure Writer::set_rows(engine::CollectionId c, const engine::Schema& schema,
                         const std::string& name, const Rows& rows, const Assignments& values) {
    for (const auto& [id, old] : rows.rows) {
        engine::Doc doc = old.decode();
        for (const auto& [slot, value] : values) {
            bool replaced = false;
            for (auto& [s2, v2] : doc) {
                if (s2 == slot) {
                    v2 = value;
                    replaced = true;
                }
            }
            if (!replaced) doc.emplace_back(slot, value);
        }
        std::erase_if(doc, [&](const auto& sv) {
            return sv.first >= schema.fields.size() || schema.fields[sv.first].dropped;
        });
        engine::Status st = block.set(c, id, doc);
        if (!st.is_ok()) {
            if (st.code() != Code::duplicate) return engine_error(st, name);
            return unique_clash(st, indexes, c, schema, doc, id, name);
        }
    }
    return std::nullopt;
}

}  // namespace

QlResult<Answer> run_insert(Block& block, const index::IndexSet& indexes, const Insert& ins,
                            const Context& ctx) {
    return Writer{block, indexes, ctx}.insert(ins);
}

QlResult<Answer> run_set(Block& block, const index::IndexSet& indexes, const Set& s,
                         const Context& ctx) {
    return Writer{block, indexes, ctx}.set_or_del(s.collection.text, s.collection, s.filter,
                                                  &s.changes);
}

QlResult<Answer> run_del(Block& block, const index::IndexSet& indexes, const Del& d,
                         const Context& ctx) {
    return Writer{block, indexes, ctx}.set_or_del(d.collection.text, d.collection, d.filter,
                                                  nullptr);
}

}  // namespace fenec::ql
