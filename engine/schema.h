// engine/schema.h: collections' schemas as the engine keeps them, and the rules it enforces on
// them (engine.md §4). A field's slot is its position in `fields`, stable for the collection's
// life: dropping marks the slot, adding appends one, so document bodies never need re-aligning.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/status.h"

namespace fenec::engine {

enum class BaseType : uint8_t { Bool = 1, Int, Float, Text, Bytes, Timestamp, Vector, List, Json };
enum class VectorElem : uint8_t { f32 = 0, f16 = 1 };
enum class Collation : uint8_t { bytes = 0, und = 1, tr = 2 };
enum class Metric : uint8_t { cosine = 0, l2 = 1, dot = 2 };
enum class IndexKind : uint8_t { none = 0, hash, unique, sorted, ttl, text, hnsw };
enum class AlterKind : uint8_t { add_field = 0, drop_field, rename_field, set_index };

struct TypeDesc {
    BaseType base = BaseType::Bool;
    uint32_t dim = 0;                          // vectors
    VectorElem elem = VectorElem::f32;         // vectors
    std::shared_ptr<const TypeDesc> item;      // lists
    bool operator==(const TypeDesc& o) const;
    std::string to_string() const;             // "int", "vector<3>", "[text]"...
};

struct HnswParams {
    Metric metric = Metric::cosine;
    uint16_t m = 16;
    uint16_t ef_construction = 200;
    uint16_t ef_search = 64;
    bool operator==(const HnswParams&) const = default;
};

struct TextParams {
    uint16_t k1_hundredths = 120;
    uint16_t b_hundredths = 75;
    uint8_t prefix = 0;
    uint8_t prefix_min = 0;
    bool chars = false;
    // `@text(stem <language>)`: the Snowball algorithm the field's terms are stemmed by, as
    // libstemmer names it (index/stemmer.h); empty: not stemmed. The engine keeps the name and
    // checks its shape (limits::stem_name_bytes_max, [a-z_]); the index knows the languages.
    std::string stem;
    bool operator==(const TextParams&) const = default;
};

struct IndexDesc {
    IndexKind kind = IndexKind::none;
    int64_t ttl_ms = 0;
    HnswParams hnsw;
    TextParams text;
    bool operator==(const IndexDesc&) const = default;
};

struct PathIndex {
    std::vector<std::string> keys;
    IndexDesc index;
    bool operator==(const PathIndex&) const = default;
};

struct FieldDesc {
    std::string name;
    TypeDesc type;
    bool required = false;
    Collation collation = Collation::bytes;
    bool nocase = false;
    IndexDesc index;
    std::vector<PathIndex> paths;  // json fields only
    bool dropped = false;
    bool operator==(const FieldDesc&) const = default;
};

struct Schema {
    std::vector<FieldDesc> fields;  // position = slot
    bool operator==(const Schema&) const = default;
    // The live field of that name, or nullopt.
    std::optional<uint16_t> slot_of(std::string_view name) const;
    // The slot of the ttl field, if any.
    std::optional<uint16_t> ttl_slot() const;
};

// An alteration by field name; the engine resolves names to slots.
struct AlterSpec {
    AlterKind kind = AlterKind::add_field;
    std::string field;      // drop, rename, set_index: the field; add: unused (field_desc.name)
    FieldDesc field_desc;   // add_field
    std::string new_name;   // rename_field
    IndexDesc index;        // set_index
    std::vector<std::string> keys;  // set_index on a json path (empty: the field itself)
};

TypeDesc make_type(BaseType base);
TypeDesc make_vector(uint32_t dim, VectorElem elem = VectorElem::f32);
TypeDesc make_list(TypeDesc item);

// Identifier rule: [A-Za-z_][A-Za-z0-9_]*, 1..64 bytes.
bool is_identifier(std::string_view name);

// Checks a whole schema for a new collection (engine.md §4 "Schema rules").
Status validate_schema(std::string_view collection, const Schema& schema);

// Applies `spec` to `schema` (a copy is changed); checks the result.
Result<Schema> apply_alter(std::string_view collection, const Schema& schema,
                           const AlterSpec& spec, uint16_t* slot_out);

}  // namespace fenec::engine
