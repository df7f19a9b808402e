// ql/exec_schema.cc: the schema statements (fenecql.md §4.1), create, alter and drop, each
// written into a block its caller began (ql/exec_write.h). `_` collections are the server's:
// alter and drop answer them as absent.
#include <set>

#include "index/key.h"
#include "ql/exec_read.h"
#include "ql/exec_write.h"
#include "ql/executor.h"

namespace fenec::ql {

namespace {

Answer ok_answer() { return Answer{}; }

Error status_error(int status, std::string message, const std::string& collection) {
    Error e;
    e.message = std::move(message);
    e.status_code = status;
    e.collection = collection;
    return e;
}

}  // namespace

QlResult<Answer> run_create(engine::Block& block, const Create& c) {
    const std::string& name = c.collection.text;
    if (block.find(name).is_ok()) {
        if (c.if_not_exists) return ok_answer();
        return status_error(409, "collection `" + name + "` already exists", name);
    }
    engine::Schema schema;
    for (const FieldDef& f : c.fields) schema.fields.push_back(f.to_field_desc());
    engine::Result<engine::CollectionId> id = block.create_collection(name, schema);
    if (!id.is_ok()) return engine_error(id.status(), name);
    return ok_answer();
}

namespace {

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
    Error e =
        status_error(409, "field `" + f.name + "` holds equal values in two rows", collection);
    e.field = f.name;
    return e;
}

}  // namespace

QlResult<Answer> run_alter(engine::Block& block, const Alter& a) {
    const std::string& name = a.collection.text;
    engine::Result<engine::CollectionId> c = block.find(name);
    if (!c.is_ok() || name.starts_with("_")) return not_found_collection(a.collection);
    const engine::Schema schema = *block.schema(*c);
    engine::AlterSpec spec;
    auto field_of = [&](const Name& n) -> QlResult<uint16_t> {
        std::optional<uint16_t> slot = schema.slot_of(n.text);
        if (!slot)
            return error_at(n.pos, "collection `" + name + "` has no field `" + n.text + "`");
        return *slot;
    };
    switch (a.action) {
        case AlterAction::add_field: {
            if (schema.slot_of(a.field->name.text)) {
                Error e =
                    status_error(409, "field `" + a.field->name.text + "` already exists", name);
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
            if (live == 1)
                return error_at(a.target.pos, "cannot drop the last field of `" + name + "`");
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
                if (auto fail = check_unique(block, *c, slot.value(), f, name)) return *fail;
            }
            break;
        }
    }
    engine::Status st = block.alter_collection(*c, spec);
    if (!st.is_ok()) return engine_error(st, name);
    return ok_answer();
}

QlResult<Answer> run_drop(engine::Block& block, const Drop& d) {
    const std::string& name = d.collection.text;
    engine::Result<engine::CollectionId> c = block.find(name);
    if (!c.is_ok() || name.starts_with("_")) {
        if (d.if_exists) return ok_answer();
        return not_found_collection(d.collection);
    }
    engine::Status st = block.drop_collection(*c);
    if (!st.is_ok()) return engine_error(st, name);
    return ok_answer();
}

}  // namespace fenec::ql
