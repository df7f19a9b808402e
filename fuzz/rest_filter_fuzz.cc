// fuzz/rest_filter_fuzz.cc: fuzz_rest_filter, arbitrary bytes read as a REST query string
// (server/node/rest_filter.h) over one fixed schema, then turned into a FenecQL statement. Seeds:
// fuzz/corpus/rest_filter/.
//
// Input: the first byte chooses a list (even) or a subscription shape (odd); the rest is split
// at `&` into pairs and each pair at its first `=` (no percent-decoding: every byte reaches the
// reader as is). Beyond "never crash, never leak, never read out of bounds", a broken contract
// traps, so libFuzzer keeps the input:
//   - parse_rest_query refuses only with a 400; build_statement only with 400, 404 or a 413
//     naming statement_bytes or parameters;
//   - whatever build_statement answers, ql::parse accepts, and the statement uses exactly the
//     parameters it came with ($1..$n, n = params.size());
//   - a shape whose statement builds also compiles as a ShapeFilter (the executor's own `where`
//     compiler agrees with what build_statement wrote).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ql/parser.h"
#include "server/node/rest_filter.h"

namespace {

using namespace fenec;

void check(bool ok) {
    if (!ok) __builtin_trap();
}

engine::FieldDesc field(const char* name, engine::TypeDesc type) {
    engine::FieldDesc f;
    f.name = name;
    f.type = std::move(type);
    return f;
}

// Every kind a field may have, and a field named like a reserved key.
engine::Schema make_schema() {
    using engine::BaseType;
    engine::Schema s;
    s.fields.push_back(field("title", engine::make_type(BaseType::Text)));
    s.fields.push_back(field("year", engine::make_type(BaseType::Int)));
    s.fields.push_back(field("price", engine::make_type(BaseType::Float)));
    s.fields.push_back(field("ok", engine::make_type(BaseType::Bool)));
    s.fields.push_back(field("at", engine::make_type(BaseType::Timestamp)));
    s.fields.push_back(field("blob", engine::make_type(BaseType::Bytes)));
    s.fields.push_back(field("meta", engine::make_type(BaseType::Json)));
    s.fields.push_back(field("tags", engine::make_list(engine::make_type(BaseType::Text))));
    s.fields.push_back(field("stamps", engine::make_list(engine::make_type(BaseType::Timestamp))));
    s.fields.push_back(field("v", engine::make_vector(2)));
    s.fields.push_back(field("order", engine::make_type(BaseType::Text)));
    engine::FieldDesc name = field("name", engine::make_type(BaseType::Text));
    name.collation = engine::Collation::tr;
    name.nocase = true;
    s.fields.push_back(std::move(name));
    engine::FieldDesc gone = field("gone", engine::make_type(BaseType::Int));
    gone.dropped = true;
    s.fields.push_back(std::move(gone));
    return s;
}

node::QueryPairs split(std::string_view text) {
    node::QueryPairs pairs;
    size_t at = 0;
    while (at <= text.size()) {
        size_t end = text.find('&', at);
        if (end == std::string_view::npos) end = text.size();
        const std::string_view pair = text.substr(at, end - at);
        const size_t eq = pair.find('=');
        if (eq == std::string_view::npos) {
            pairs.emplace_back(std::string(pair), "");
        } else {
            pairs.emplace_back(std::string(pair.substr(0, eq)), std::string(pair.substr(eq + 1)));
        }
        at = end + 1;
    }
    return pairs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    static const engine::Schema schema = make_schema();  // read-only after its first use
    const bool shape = data[0] & 1;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

    auto query = node::parse_rest_query(split(text), shape);
    if (!query) {
        check(query.error().status == 400 && !query.error().message.empty());
        return 0;
    }
    if (shape) check(!query->limit && !query->offset && !query->count && query->order.empty());

    auto statement = node::build_statement(query.value(), "b", schema);
    if (!statement) {
        const node::BodyError& e = statement.error();
        check(!e.message.empty());
        check(e.status == 400 || e.status == 404 ||
              (e.status == 413 &&
               (e.limit == ql::Limit::statement_bytes || e.limit == ql::Limit::parameters)));
        return 0;
    }
    auto parsed = ql::parse(statement->text);
    check(parsed.is_ok());
    check(parsed->params_max == statement->params.size());
    check(parsed->statement.kind() == ql::StatementKind::get);

    if (shape) {
        auto filter = node::ShapeFilter::compile(query.value(), "b", schema);
        check(filter.is_ok());
    }
    return 0;
}
