// fuzz/json_body_fuzz.cc: fuzz_json_body, arbitrary bytes read as each request body the node
// takes (server/node/json_body.h): a `/query` body, a `/batch` body as NDJSON and as a JSON array,
// and a REST document. Seeds: fuzz/corpus/json_body/.
//
// Beyond "never crash, never leak, never read out of bounds, never overflow the stack", each
// answer must keep the contract of json_body.h; a broken one traps, so libFuzzer keeps the input:
//   - a refusal is a 400 with a message, or a 413 naming json_depth or parameters with its max;
//     an NDJSON refusal names a line from 1 to the body's line count, a JSON one none;
//   - an accepted value nests at most value_depth_max levels; a batch holds at most
//     batch_statements_max statements; a document body is an object or a list of objects;
//   - a reader reused after other bodies answers as a fresh one (the padded buffer and the
//     parser carry nothing over).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/node/json_body.h"

namespace {

using fenec::engine::Value;
using namespace fenec::node;

void check(bool ok) {
    if (!ok) __builtin_trap();
}

// The level of the deepest value in `v`, `v` itself at level 1.
uint32_t levels(const Value& v) {
    uint32_t deepest = 0;
    if (const auto* l = std::get_if<fenec::engine::List>(&v.rep)) {
        for (const Value& item : l->items) deepest = std::max(deepest, levels(item));
    } else if (const auto* o = std::get_if<fenec::engine::Object>(&v.rep)) {
        check(o->keys.size() == o->values.size());
        for (const Value& item : o->values) deepest = std::max(deepest, levels(item));
    }
    return deepest + 1;
}

void check_refusal(const BodyError& e) {
    check(!e.message.empty());
    if (e.status == 413) {
        check(e.limit == fenec::ql::Limit::json_depth || e.limit == fenec::ql::Limit::parameters);
        check(e.max > 0);
    } else {
        check(e.status == 400 && e.limit == fenec::ql::Limit::none);
    }
}

void check_statement(const QueryBody& q) {
    for (const Value& p : q.params) check(levels(p) <= value_depth_max);
}

void check_document(const Value& doc) {
    const auto* obj = std::get_if<fenec::engine::Object>(&doc.rep);
    check(obj != nullptr);
    for (const Value& v : obj->values) check(levels(v) <= value_depth_max);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    BodyReader reader;

    auto query = reader.query_body(body);
    if (query) {
        check_statement(query.value());
    } else {
        check_refusal(query.error());
        check(!query.error().line);
    }

    const uint32_t lines = static_cast<uint32_t>(std::count(body.begin(), body.end(), '\n')) + 1;
    auto ndjson = reader.batch(body, true);
    if (ndjson) {
        check(ndjson->size() <= batch_statements_max);
        for (const QueryBody& q : ndjson.value()) check_statement(q);
    } else {
        check_refusal(ndjson.error());
        check(ndjson.error().line && *ndjson.error().line >= 1 && *ndjson.error().line <= lines);
    }

    auto array = reader.batch(body, false);
    if (array) {
        check(array->size() <= batch_statements_max);
        for (const QueryBody& q : array.value()) check_statement(q);
    } else {
        check_refusal(array.error());
        check(!array.error().line);
    }

    auto document = reader.document_body(body);
    if (document) {
        if (const auto* list = std::get_if<fenec::engine::List>(&document->rep)) {
            for (const Value& doc : list->items) check_document(doc);
        } else {
            check_document(document.value());
        }
    } else {
        check_refusal(document.error());
    }

    // The reused reader (it has parsed this body four times) agrees with a fresh one.
    auto fresh = parse_query_body(body);
    auto again = reader.query_body(body);
    check(fresh.is_ok() == again.is_ok());
    if (fresh) {
        check(fresh->query == again->query && fresh->params == again->params);
    } else {
        check(fresh.error().status == again.error().status &&
              fresh.error().message == again.error().message);
    }
    return 0;
}
