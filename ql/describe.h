// ql/describe.h: how a field is described to people, in one place for every reader of a schema:
// the node's `GET /t/<t>/`, `fenec inspect` and the shell's `.describe`. The description is the
// FenecQL field definition that would create the field (fenecql.md §3 `field_def`): its name, its
// type, `collate`, `nocase` and its annotation with every argument spelled out, defaults included,
// so what the file holds can be read whole and pasted back into a `create collection`.
//
// Invariant: for every field FenecQL can create, `definition` parses as a `field_def` into that
// same field (test/ql/describe_test.cc checks the round trip). What the file format can hold and
// FenecQL cannot yet say (a json field's path indexes, @text's prefix options, float16 vectors)
// is written after the FenecQL as a bracketed note, never passed off as syntax.
#pragma once

#include <optional>
#include <string>

#include "engine/schema.h"

namespace fenec::ql {

struct FieldDescription {
    std::string name;                    // as stored
    std::string type;                    // "int", "vector<3>", "[text]"
    std::optional<std::string> collate;  // "tr" or "und"; none when the field compares bytes
    bool nocase = false;
    std::optional<std::string> index;  // the annotation, "@sorted", "@hnsw(cosine, m = 16, ...)"
    std::string definition;            // the whole field_def, "year int @sorted"
};

FieldDescription describe_field(const engine::FieldDesc& field);

// A collection or field name as a statement writes it: backquoted where it is a reserved word
// (fenecql.md §2), so the text parses back to the same name.
std::string name_text(const std::string& name);

}  // namespace fenec::ql
