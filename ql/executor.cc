// ql/executor.cc: dispatch, and the schema statements (fenecql.md §4.1).
#include "ql/executor.h"

#include "index/key.h"
#include "ql/exec_read.h"

namespace fenec::ql {

QlResult<Answer> run_insert(engine::Database&, const index::IndexSet&, const Insert&, const Context&);
QlResult<Answer> run_set(engine::Database&, const index::IndexSet&, const Set&, const Context&);
QlResult<Answer> run_del(engine::Database&, const index::IndexSet&, const Del&, const Context&);

namespace {

using engine::Code;

Answer ok_answer() { return Answer{}; }

Error status_error(int status, std::string message, const std::string& collection) {
    Error e;
    e.message = std::move(message);
    e.status_code = status;
    e.collection = collection;
    return e;
}

QlResult<Answer> run_create(engine::Database& db, const Create& c, const Context& ctx) {
    const std::string& name = c.collection.text;
    engine::Result<engine::Block> block = db.begin(engine::BlockOptions{.internal = false, .now_ms = ctx.now_ms});
    if (!block.is_ok()) return engine_error(block.status(), name);
    if (block->find(name).is_ok()) {
        if (c.if_not_exists) return ok_answer();
        return status_error(409, "collection `" + name + "` already exists", name);
    }
    engine::Schema schema;
    for (const FieldDef& f : c.fields) schema.fields.push_back(f.to_field_desc());
    engine::Result<engine::CollectionId> id = block->create_collection(name, schema);
    if (!id.is_ok()) return engine_error(id.status(), name);
    engine::Result<engine::Landed> landed = block->commit();
    if (!landed.is_ok()) return engine_error(landed.status(), name);
    return ok_answer();
}

// A @unique over rows holding equal values is refused, naming the field (§4.1).
Failure check_unique(engine::Block& block, engine::CollectionId c, uint16_t slot,
                     const engine::FieldDesc& f, const std::string& collection) {
    const index::TextRule rule = index::field_rule(f);
    std::set<std::string> seen;
    bool clash = false;
    block.scan(c, [&](engine::DocId, engine::DocView doc) {
        if (doc.is_null(slot)) return true;
        clash = !seen.insert(index::key_of(doc.get(slot), rule)).second;
        return !clash;
    });
    if (!clash) return std::nullopt;
    Error e = status_error(409, "field `" + f.name + "` holds equal values in two rows", collection);
    e.field = f.name;
    return e;
}

QlResult<Answer> run_alter(engine::Database& db, const Alter& a, const Context& ctx) {
    const std::string& name = a.collection.text;
    engine::Result<engine::Block> block = db.begin(engine::BlockOptions{.internal = false, .now_ms = ctx.now_ms});
    if (!block.is_ok()) return engine_error(block.status(), name);
    engine::Result<engine::CollectionId> c = block->find(name);
    if (!c.is_ok() || name.starts_with("_")) return not_found_collection(a.collection);
    const engine::Schema schema = *block->schema(*c);
    engine::AlterSpec spec;
    auto field_of = [&](const Name& n) -> QlResult<uint16_t> {
        std::optional<uint16_t> slot = schema.slot_of(n.text);
        if (!slot) return error_at(n.pos, "collection `" + name + "` has no field `" + n.text + "`");
        return *slot;
    };
    switch (a.action) {
        case AlterAction::add_field: {
            if (schema.slot_of(a.field->name.text)) {
                Error e = status_error(409, "field `" + a.field->name.text + "` already exists", name);
                e.field = a.field->name.text;
                return e;
            }
            spec.kind = engine::AlterKind::add_field;
            spec.field_desc = a.field->to_field_desc();
            break;
        }
        case AlterAction::drop_field: {
            QlResult<uint16_t> slot = field_of(a.target);
            if (!slot) return slot.take_error();
            size_t live = 0;
            for (const engine::FieldDesc& f : schema.fields) live += !f.dropped;
            if (live == 1) return error_at(a.target.pos, "cannot drop the last field of `" + name + "`");
            spec.kind = engine::AlterKind::drop_field;
            spec.field = a.target.text;
            break;
        }
        case AlterAction::rename_field: {
            QlResult<uint16_t> slot = field_of(a.target);
            if (!slot) return slot.take_error();
            if (schema.slot_of(a.new_name.text)) {
                Error e = status_error(409, "field `" + a.new_name.text + "` already exists", name);
                e.field = a.new_name.text;
                return e;
            }
            spec.kind = engine::AlterKind::rename_field;
            spec.field = a.target.text;
            spec.new_name = a.new_name.text;
            break;
        }
        case AlterAction::add_index:
        case AlterAction::drop_index: {
            QlResult<uint16_t> slot = field_of(a.target);
            if (!slot) return slot.take_error();
            const engine::FieldDesc& f = schema.fields[slot.value()];
            spec.kind = engine::AlterKind::set_index;
            spec.field = a.target.text;
            if (a.action == AlterAction::drop_index) {
                if (f.index.kind == engine::IndexKind::none) {
                    return error_at(a.target.pos, "field `" + f.name + "` has no index");
                }
                break;
            }
            if (f.index.kind != engine::IndexKind::none) {
                Error e = status_error(409, "field `" + f.name + "` already has an index", name);
                e.field = f.name;
                return e;
            }
            spec.index = a.index->index;
            if (spec.index.kind == engine::IndexKind::unique) {
                if (auto fail = check_unique(*block, *c, slot.value(), f, name)) return *fail;
            }
            break;
        }
    }
    engine::Status st = block->alter_collection(*c, spec);
    if (!st.is_ok()) return engine_error(st, name);
    engine::Result<engine::Landed> landed = block->commit();
    if (!landed.is_ok()) return engine_error(landed.status(), name);
    return ok_answer();
}

QlResult<Answer> run_drop(engine::Database& db, const Drop& d, const Context& ctx) {
    const std::string& name = d.collection.text;
    engine::Result<engine::Block> block = db.begin(engine::BlockOptions{.internal = false, .now_ms = ctx.now_ms});
    if (!block.is_ok()) return engine_error(block.status(), name);
    engine::Result<engine::CollectionId> c = block->find(name);
    if (!c.is_ok() || name.starts_with("_")) {
        if (d.if_exists) return ok_answer();
        return not_found_collection(d.collection);
    }
    engine::Status st = block->drop_collection(*c);
    if (!st.is_ok()) return engine_error(st, name);
    engine::Result<engine::Landed> landed = block->commit();
    if (!landed.is_ok()) return engine_error(landed.status(), name);
    return ok_answer();
}

}  // namespace

QlResult<Answer> Executor::run(const ParsedStatement& parsed, std::span<const engine::Value> params,
                               const RunOptions& options) {
    const Statement& st = parsed.statement;
    if (options.read_only && st.writes()) {
        Error e;
        e.message = "`" + std::string(st.first_word()) + "` writes, and this endpoint only reads";
        e.status_code = 403;
        e.statement = std::string(st.first_word());
        return e;
    }
    if (params.size() > parsed.params_max) {
        Error e;
        e.message = std::to_string(params.size()) + " parameters given, the statement uses " +
                    std::to_string(parsed.params_max);
        return e;
    }
    Context ctx{params, options.now_ms};
    if (ctx.now_ms == 0) ctx.now_ms = db_.read().now_ms();
    if (const auto* g = std::get_if<Get>(&st.node)) {
        engine::ReadView view = db_.read(ctx.now_ms);
        return run_get(*g, view, indexes_, ctx);
    }
    if (const auto* i = std::get_if<Insert>(&st.node)) return run_insert(db_, indexes_, *i, ctx);
    if (const auto* s = std::get_if<Set>(&st.node)) return run_set(db_, indexes_, *s, ctx);
    if (const auto* d = std::get_if<Del>(&st.node)) return run_del(db_, indexes_, *d, ctx);
    if (const auto* c = std::get_if<Create>(&st.node)) return run_create(db_, *c, ctx);
    if (const auto* a = std::get_if<Alter>(&st.node)) return run_alter(db_, *a, ctx);
    if (const auto* d = std::get_if<Drop>(&st.node)) return run_drop(db_, *d, ctx);
    engine::Status s = db_.compact();
    if (!s.is_ok()) return engine_error(s, "");
    return ok_answer();
}

}  // namespace fenec::ql
