// engine/schema.cc: the schema rules of engine.md §4 and alterations. Every refusal names the
// collection and the field.
#include "engine/schema.h"

#include <algorithm>
#include <unordered_set>

#include "engine/limits.h"

namespace fenec::engine {

bool TypeDesc::operator==(const TypeDesc& o) const {
    if (base != o.base || dim != o.dim || elem != o.elem) return false;
    if (!item || !o.item) return !item && !o.item;
    return *item == *o.item;
}

std::string TypeDesc::to_string() const {
    switch (base) {
        case BaseType::Bool: return "bool";
        case BaseType::Int: return "int";
        case BaseType::Float: return "float";
        case BaseType::Text: return "text";
        case BaseType::Bytes: return "bytes";
        case BaseType::Timestamp: return "timestamp";
        case BaseType::Vector:
            return (elem == VectorElem::f16 ? "vector16<" : "vector<") + std::to_string(dim) + ">";
        case BaseType::List: return "[" + (item ? item->to_string() : std::string("?")) + "]";
        case BaseType::Json: return "json";
    }
    return "unknown";
}

std::optional<uint16_t> Schema::slot_of(std::string_view name) const {
    for (size_t i = 0; i < fields.size(); ++i) {
        if (!fields[i].dropped && fields[i].name == name) return static_cast<uint16_t>(i);
    }
    return std::nullopt;
}

std::optional<uint16_t> Schema::ttl_slot() const {
    for (size_t i = 0; i < fields.size(); ++i) {
        if (!fields[i].dropped && fields[i].index.kind == IndexKind::ttl) {
            return static_cast<uint16_t>(i);
        }
    }
    return std::nullopt;
}

TypeDesc make_type(BaseType base) { return TypeDesc{base, 0, VectorElem::f32, nullptr}; }
TypeDesc make_vector(uint32_t dim, VectorElem elem) {
    return TypeDesc{BaseType::Vector, dim, elem, nullptr};
}
TypeDesc make_list(TypeDesc item) {
    return TypeDesc{BaseType::List, 0, VectorElem::f32,
                    std::make_shared<const TypeDesc>(std::move(item))};
}

bool is_identifier(std::string_view name) {
    if (name.empty() || name.size() > limits::name_bytes_max) return false;
    auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
    if (!alpha(name[0])) return false;
    for (char c : name) {
        if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
    }
    return true;
}

namespace {

Status bad(std::string_view collection, std::string_view field, std::string_view what) {
    std::string msg = "collection `" + std::string(collection) + "`";
    if (!field.empty()) msg += ", field `" + std::string(field) + "`";
    msg += ": ";
    msg += what;
    return Status::error(Code::invalid_argument, std::move(msg));
}

Status check_type(std::string_view c, std::string_view f, const TypeDesc& t, int depth) {
    if (depth > limits::nesting_max) {
        return Status::error(Code::limit_exceeded, "collection `" + std::string(c) + "`, field `" +
                                                       std::string(f) + "`: type nested too deep");
    }
    switch (t.base) {
        case BaseType::Vector:
            if (t.dim < 1 || t.dim > limits::vector_dim_max) {
                return Status::error(Code::limit_exceeded,
                                     "collection `" + std::string(c) + "`, field `" +
                                         std::string(f) + "`: vector dimension " +
                                         std::to_string(t.dim) + " is outside 1..4096");
            }
            return Status::ok();
        case BaseType::List:
            if (!t.item) return bad(c, f, "a list type needs an item type");
            return check_type(c, f, *t.item, depth + 1);
        case BaseType::Bool: case BaseType::Int: case BaseType::Float: case BaseType::Text:
        case BaseType::Bytes: case BaseType::Timestamp: case BaseType::Json:
            return Status::ok();
    }
    return bad(c, f, "unknown type");
}

bool is_text_or_text_list(const TypeDesc& t) {
    return t.base == BaseType::Text ||
           (t.base == BaseType::List && t.item && t.item->base == BaseType::Text);
}

// Empty (no stemming), or a name of libstemmer's shape; which names exist is index/'s to know.
bool is_stem_name(std::string_view stem) {
    if (stem.size() > limits::stem_name_bytes_max) return false;
    return std::all_of(stem.begin(), stem.end(),
                       [](char ch) { return (ch >= 'a' && ch <= 'z') || ch == '_'; });
}

Status check_index(std::string_view c, const FieldDesc& f, const IndexDesc& ix, bool on_path) {
    switch (ix.kind) {
        case IndexKind::none: return Status::ok();
        case IndexKind::hash: case IndexKind::unique: case IndexKind::sorted:
            if (!on_path && (f.type.base == BaseType::Vector || f.type.base == BaseType::Json)) {
                return bad(c, f.name, "a hash, unique or sorted index needs a scalar or list "
                                      "field (index a json field by its paths)");
            }
            return Status::ok();
        case IndexKind::ttl:
            if (on_path || f.type.base != BaseType::Timestamp) {
                return bad(c, f.name, "ttl needs a timestamp field");
            }
            if (ix.ttl_ms < 1 || ix.ttl_ms > limits::ttl_ms_max) {
                return bad(c, f.name, "ttl duration must be 1 ms .. 2^53 ms");
            }
            return Status::ok();
        case IndexKind::text:
            if (on_path || f.type.base != BaseType::Text) return bad(c, f.name, "@text needs a text field");
            if (!is_stem_name(ix.text.stem)) {
                return bad(c, f.name, "a stemming language is named by 1..32 bytes of [a-z_]");
            }
            return Status::ok();
        case IndexKind::hnsw:
            if (on_path || f.type.base != BaseType::Vector) {
                return bad(c, f.name, "@hnsw needs a vector field");
            }
            if (ix.hnsw.m < 2) return bad(c, f.name, "hnsw m must be at least 2");
            return Status::ok();
    }
    return bad(c, f.name, "unknown index kind");
}

Status check_field(std::string_view c, const FieldDesc& f) {
    if (f.dropped) return Status::ok();
    if (!is_identifier(f.name)) {
        return bad(c, f.name, "a field name must match [A-Za-z_][A-Za-z0-9_]* and be 1..64 bytes");
    }
    if (f.name[0] == '_') return bad(c, f.name, "field names starting with `_` are the system's");
    FENEC_RETURN_IF_ERROR(check_type(c, f.name, f.type, 1));
    if ((f.collation != Collation::bytes || f.nocase) && !is_text_or_text_list(f.type)) {
        return bad(c, f.name, "collate and nocase need a text or [text] field");
    }
    FENEC_RETURN_IF_ERROR(check_index(c, f, f.index, false));
    if (!f.paths.empty() && f.type.base != BaseType::Json) {
        return bad(c, f.name, "path indexes need a json field");
    }
    for (const PathIndex& p : f.paths) {
        if (p.keys.empty() || p.keys.size() > 64) return bad(c, f.name, "a json path has 1..64 keys");
        for (const std::string& k : p.keys) {
            if (k.empty() || k.size() > 255) return bad(c, f.name, "a json path key is 1..255 bytes");
        }
        if (p.index.kind != IndexKind::hash && p.index.kind != IndexKind::unique &&
            p.index.kind != IndexKind::sorted) {
            return bad(c, f.name, "a json path takes a hash, unique or sorted index");
        }
    }
    return Status::ok();
}

}  // namespace

Status validate_schema(std::string_view collection, const Schema& schema) {
    if (schema.fields.size() > limits::fields_max) {
        return Status::error(Code::limit_exceeded, "collection `" + std::string(collection) +
                                                       "`: more than 1024 fields");
    }
    std::unordered_set<std::string_view> names;
    int ttl_fields = 0;
    for (const FieldDesc& f : schema.fields) {
        FENEC_RETURN_IF_ERROR(check_field(collection, f));
        if (f.dropped) continue;
        if (!names.insert(f.name).second) return bad(collection, f.name, "field defined twice");
        if (f.index.kind == IndexKind::ttl) ++ttl_fields;
    }
    if (ttl_fields > 1) return bad(collection, "", "at most one ttl field per collection");
    return Status::ok();
}

Result<Schema> apply_alter(std::string_view collection, const Schema& schema,
                           const AlterSpec& spec, uint16_t* slot_out) {
    Schema after = schema;
    uint16_t slot = 0;
    if (spec.kind == AlterKind::add_field) {
        if (spec.field_desc.required) {
            return bad(collection, spec.field_desc.name, "a field added later cannot be required");
        }
        if (after.fields.size() >= limits::fields_max) {
            return Status::error(Code::limit_exceeded, "collection `" + std::string(collection) +
                                                           "`: more than 1024 fields");
        }
        FieldDesc f = spec.field_desc;
        f.dropped = false;
        slot = static_cast<uint16_t>(after.fields.size());
        after.fields.push_back(std::move(f));
    } else {
        std::optional<uint16_t> s = schema.slot_of(spec.field);
        if (!s) {
            return Status::error(Code::not_found, "collection `" + std::string(collection) +
                                                      "` has no field `" + spec.field + "`");
        }
        slot = *s;
        FieldDesc& f = after.fields[slot];
        switch (spec.kind) {
            case AlterKind::drop_field:
                f = FieldDesc{};
                f.dropped = true;
                f.type = schema.fields[slot].type;  // kept so old bodies still decode
                break;
            case AlterKind::rename_field: f.name = spec.new_name; break;
            case AlterKind::set_index:
                if (spec.keys.empty()) {
                    f.index = spec.index;
                } else {
                    bool found = false;
                    for (PathIndex& p : f.paths) {
                        if (p.keys == spec.keys) {
                            p.index = spec.index;
                            found = true;
                        }
                    }
                    if (!found) f.paths.push_back(PathIndex{spec.keys, spec.index});
                    std::erase_if(f.paths,
                                  [](const PathIndex& p) { return p.index.kind == IndexKind::none; });
                }
                break;
            case AlterKind::add_field: break;
        }
    }
    FENEC_RETURN_IF_ERROR(validate_schema(collection, after));
    if (slot_out) *slot_out = slot;
    return after;
}

}  // namespace fenec::engine
