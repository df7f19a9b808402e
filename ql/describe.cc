// ql/describe.cc: a field's description as FenecQL (ql/describe.h).
#include "ql/describe.h"

#include "ql/lexer.h"

namespace fenec::ql {

namespace {

using engine::IndexKind;

// Hundredths as the shortest decimal: 90 → "0.9", 120 → "1.2", 75 → "0.75", 100 → "1".
std::string hundredths_text(uint16_t h) {
    std::string out = std::to_string(h / 100);
    const unsigned frac = h % 100;
    if (frac == 0) return out;
    out += '.';
    out += static_cast<char>('0' + frac / 10);
    if (frac % 10 != 0) out += static_cast<char>('0' + frac % 10);
    return out;
}

// A duration in the largest unit that holds it whole, as `@ttl(...)` reads it (§11).
std::string duration_text(int64_t ms) {
    constexpr std::pair<int64_t, const char*> kUnits[] = {
        {86'400'000, "d"}, {3'600'000, "h"}, {60'000, "m"}, {1'000, "s"}};
    for (const auto& [unit, suffix] : kUnits) {
        if (ms != 0 && ms % unit == 0) return std::to_string(ms / unit) + suffix;
    }
    return std::to_string(ms) + "ms";
}

const char* metric_text(engine::Metric m) {
    switch (m) {
        case engine::Metric::cosine:
            return "cosine";
        case engine::Metric::l2:
            return "l2";
        case engine::Metric::dot:
            return "dot";
    }
    return "cosine";
}

std::optional<std::string> annotation_text(const engine::IndexDesc& index) {
    switch (index.kind) {
        case IndexKind::none:
            return std::nullopt;
        case IndexKind::hash:
            return "@hash";
        case IndexKind::unique:
            return "@unique";
        case IndexKind::sorted:
            return "@sorted";
        case IndexKind::ttl:
            return "@ttl(" + duration_text(index.ttl_ms) + ")";
        case IndexKind::text:
            return "@text(k1 = " + hundredths_text(index.text.k1_hundredths) +
                   ", b = " + hundredths_text(index.text.b_hundredths) +
                   (index.text.stem.empty() ? "" : ", stem " + index.text.stem) + ")";
        case IndexKind::hnsw:
            return "@hnsw(" + std::string(metric_text(index.hnsw.metric)) +
                   ", m = " + std::to_string(index.hnsw.m) +
                   ", ef_construction = " + std::to_string(index.hnsw.ef_construction) +
                   ", ef_search = " + std::to_string(index.hnsw.ef_search) + ")";
    }
    return std::nullopt;
}

// What the file holds beyond what FenecQL can write, as a note after the definition.
std::string beyond_fenecql(const engine::FieldDesc& f) {
    std::string notes;
    auto add = [&](const std::string& note) { notes += (notes.empty() ? "" : "; ") + note; };
    if (f.type.base == engine::BaseType::Vector && f.type.elem == engine::VectorElem::f16) {
        add("float16 components");
    }
    if (f.required) add("required");
    const engine::TextParams& t = f.index.text;
    if (f.index.kind == IndexKind::text && (t.prefix != 0 || t.prefix_min != 0 || t.chars)) {
        add("prefix " + std::to_string(t.prefix) + ", prefix_min " + std::to_string(t.prefix_min) +
            (t.chars ? ", chars" : ""));
    }
    for (const engine::PathIndex& p : f.paths) {
        std::string path;
        for (const std::string& key : p.keys) path += (path.empty() ? "" : ".") + key;
        add("path " + path + " " + annotation_text(p.index).value_or("unindexed"));
    }
    return notes.empty() ? "" : " [" + notes + "]";
}

}  // namespace

std::string name_text(const std::string& name) {
    if (engine::is_identifier(name) && !is_reserved(name)) return name;
    return "`" + name + "`";
}

FieldDescription describe_field(const engine::FieldDesc& f) {
    FieldDescription d;
    d.name = f.name;
    d.type = f.type.to_string();
    if (f.collation == engine::Collation::tr) d.collate = "tr";
    if (f.collation == engine::Collation::und) d.collate = "und";
    d.nocase = f.nocase;
    d.index = annotation_text(f.index);
    // FenecQL writes no float16 vector (the note below says it): the type as it would be created.
    const bool f16 =
        f.type.base == engine::BaseType::Vector && f.type.elem == engine::VectorElem::f16;
    d.definition =
        name_text(f.name) + " " + (f16 ? "vector<" + std::to_string(f.type.dim) + ">" : d.type);
    if (d.collate) d.definition += " collate " + *d.collate;
    if (d.nocase) d.definition += " nocase";
    if (d.index) d.definition += " " + *d.index;
    d.definition += beyond_fenecql(f);
    return d;
}

}  // namespace fenec::ql
