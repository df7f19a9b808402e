// server/node/json_body.cc: request bodies read with simdjson's DOM parser and turned into engine
// values (json_body.h). The input is copied into a buffer padded as simdjson requires; values are
// converted with an explicit depth count, so conversion recursion is bounded by value_depth_max
// (the parser's own depth bound is set a few levels above it, so deeper bodies stop early).
#include "server/node/json_body.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace fenec::node {

BodyError bad_request(std::string message) { return BodyError{400, std::move(message), {}, {}, 0}; }

std::string quote_name(std::string_view text) {
    if (text.size() > quoted_bytes_max) {
        size_t cut = quoted_bytes_max;
        while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
        return "`" + std::string(text.substr(0, cut)) + "...`";
    }
    return "`" + std::string(text) + "`";
}

namespace {

namespace dom = simdjson::dom;
using engine::Value;

// Levels a body may add around its values: `[` (batch) `{` (statement) `"params": [` and one
// spare, so simdjson stops a body only where the value inside is already too deep.
constexpr size_t body_levels_max = 4;
// A body above this size is parsed by a parser made for it and dropped after, so a reader that met
// one large body does not keep buffers of its size for the small ones that follow.
constexpr size_t reuse_bytes_max = size_t{1} << 20;

BodyError too_deep() {
    return BodyError{413,
                     "a value nests past " + std::to_string(value_depth_max) + " levels",
                     {},
                     ql::Limit::json_depth,
                     value_depth_max};
}

BodyError not_json(simdjson::error_code code) {
    if (code == simdjson::DEPTH_ERROR) return too_deep();
    return bad_request(std::string("the body is not valid JSON: ") + simdjson::error_message(code));
}

// Whether an object's keys (already read into `keys`) repeat one; small objects pairwise, larger
// ones sorted.
std::optional<std::string_view> repeated_key(std::vector<std::string_view>& keys) {
    constexpr size_t pairwise_max = 16;
    if (keys.size() <= pairwise_max) {
        for (size_t i = 1; i < keys.size(); ++i) {
            for (size_t j = 0; j < i; ++j) {
                if (keys[i] == keys[j]) return keys[i];
            }
        }
        return std::nullopt;
    }
    std::sort(keys.begin(), keys.end());
    auto at = std::adjacent_find(keys.begin(), keys.end());
    if (at != keys.end()) return *at;
    return std::nullopt;
}

// Converts one element at `level`: a parameter or a document's field value is level 1, and each
// list or object puts its items one level down. As the executor counts (ql/convert.cc), no value,
// scalar or not, may sit past level value_depth_max: 63 lists around a scalar is the deepest.
std::optional<BodyError> to_value(dom::element e, uint32_t level, Value& out);

// An object's members, each at `level`.
std::optional<BodyError> to_object(dom::object o, uint32_t level, Value& out) {
    engine::Object obj;
    std::vector<std::string_view> keys;
    for (dom::key_value_pair member : o) {
        keys.push_back(member.key);
        Value v;
        if (auto err = to_value(member.value, level, v)) return err;
        obj.keys.emplace_back(member.key);
        obj.values.push_back(std::move(v));
    }
    if (auto dup = repeated_key(keys))
        return bad_request("the key " + quote_name(*dup) + " is given twice");
    out = Value(std::move(obj));
    return std::nullopt;
}

std::optional<BodyError> to_value(dom::element e, uint32_t level, Value& out) {
    if (level > value_depth_max) return too_deep();
    switch (e.type()) {
        case dom::element_type::ARRAY: {
            engine::List list;
            const dom::array items = e.get_array().value_unsafe();
            for (dom::element item : items) {
                Value v;
                if (auto err = to_value(item, level + 1, v)) return err;
                list.items.push_back(std::move(v));
            }
            out = Value(std::move(list));
            return std::nullopt;
        }
        case dom::element_type::OBJECT:
            return to_object(e.get_object().value_unsafe(), level + 1, out);
        case dom::element_type::INT64:
            out = Value(e.get_int64().value_unsafe());
            return std::nullopt;
        case dom::element_type::UINT64:
            // simdjson types only integers past INT64_MAX as uint64.
            return bad_request("the integer " + std::to_string(e.get_uint64().value_unsafe()) +
                               " is outside int64");
        case dom::element_type::DOUBLE:
            out = Value(e.get_double().value_unsafe());
            return std::nullopt;
        case dom::element_type::STRING:
            out = Value(std::string(e.get_string().value_unsafe()));
            return std::nullopt;
        case dom::element_type::BOOL:
            out = Value(e.get_bool().value_unsafe());
            return std::nullopt;
        case dom::element_type::NULL_VALUE:
            out = Value();
            return std::nullopt;
    }
    return bad_request("an unknown JSON value");
}

// The members of one statement object: "query" (string, required) and "params" (null or array).
std::optional<BodyError> read_statement(dom::element root, QueryBody& out) {
    if (root.type() != dom::element_type::OBJECT) {
        return bad_request("a statement is a JSON object {\"query\": \"...\", \"params\": [...]}");
    }
    bool have_query = false;
    bool have_params = false;
    const dom::object members = root.get_object().value_unsafe();
    for (dom::key_value_pair member : members) {
        if (member.key == "query") {
            if (have_query) return bad_request("the member \"query\" is given twice");
            have_query = true;
            if (member.value.type() != dom::element_type::STRING) {
                return bad_request("\"query\" must be a string holding one statement");
            }
            out.query = std::string(member.value.get_string().value_unsafe());
        } else if (member.key == "params") {
            if (have_params) return bad_request("the member \"params\" is given twice");
            have_params = true;
            if (member.value.type() == dom::element_type::NULL_VALUE) continue;
            if (member.value.type() != dom::element_type::ARRAY) {
                return bad_request("\"params\" must be an array (or null)");
            }
            const dom::array items = member.value.get_array().value_unsafe();
            for (dom::element item : items) {
                if (out.params.size() == ql::limits::parameters_max) {
                    return BodyError{413,
                                     "\"params\" holds more than " +
                                         std::to_string(ql::limits::parameters_max) + " values",
                                     {},
                                     ql::Limit::parameters,
                                     ql::limits::parameters_max};
                }
                Value v;
                if (auto err = to_value(item, 1, v)) return err;
                out.params.push_back(std::move(v));
            }
        } else {
            return bad_request("unknown member " + quote_name(member.key) +
                               " (a statement holds \"query\" and \"params\")");
        }
    }
    if (!have_query) return bad_request("the member \"query\" is missing");
    return std::nullopt;
}

// A document: an object whose members' values are each at level 1 (the document itself is not a
// value's level, as the executor converts field by field).
std::optional<BodyError> read_document(dom::element e, Value& out) {
    if (e.type() != dom::element_type::OBJECT) {
        return bad_request(
            "a document is a JSON object, found " +
            std::string(e.type() == dom::element_type::ARRAY ? "an array" : "a scalar"));
    }
    return to_object(e.get_object().value_unsafe(), 1, out);
}

bool is_blank(std::string_view line) {
    return std::all_of(line.begin(), line.end(),
                       [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

BodyError too_many_statements() {
    return bad_request("a batch holds at most " + std::to_string(batch_statements_max) +
                       " statements");
}

}  // namespace

struct BodyReader::Impl {
    dom::parser parser;
    std::unique_ptr<dom::parser> large;  // for a body past reuse_bytes_max, dropped after
    std::unique_ptr<char[]> buffer;      // the body copied, with SIMDJSON_PADDING bytes after it
    size_t buffer_bytes = 0;

    Impl() {
        // The depth bound set here stays through every later capacity growth. Failing to
        // allocate leaves the parser without an implementation; parse() then reports it.
        const simdjson::error_code err = parser.allocate(simdjson::dom::MINIMAL_DOCUMENT_CAPACITY,
                                                         value_depth_max + body_levels_max);
        (void)err;
    }

    // Parses `text`; the element lives until the next call.
    simdjson::simdjson_result<dom::element> parse(std::string_view text) {
        dom::parser* p = &parser;
        if (text.size() > reuse_bytes_max) {
            large = std::make_unique<dom::parser>();
            if (auto err = large->allocate(text.size(), value_depth_max + body_levels_max)) {
                return err;
            }
            p = large.get();
        } else {
            large.reset();
        }
        const size_t need = text.size() + simdjson::SIMDJSON_PADDING;
        if (buffer_bytes < need || (buffer_bytes > reuse_bytes_max && need <= reuse_bytes_max)) {
            buffer = std::make_unique<char[]>(need);
            buffer_bytes = need;
        }
        if (!text.empty()) std::memcpy(buffer.get(), text.data(), text.size());
        std::memset(buffer.get() + text.size(), 0, simdjson::SIMDJSON_PADDING);
        return p->parse(buffer.get(), text.size(), false);
    }
};

BodyReader::BodyReader() : impl_(std::make_unique<Impl>()) {}
BodyReader::~BodyReader() = default;
BodyReader::BodyReader(BodyReader&&) noexcept = default;
BodyReader& BodyReader::operator=(BodyReader&&) noexcept = default;

BodyResult<QueryBody> BodyReader::query_body(std::string_view body) {
    dom::element root;
    if (auto err = impl_->parse(body).get(root)) return not_json(err);
    QueryBody out;
    if (auto err = read_statement(root, out)) return std::move(*err);
    return out;
}

BodyResult<std::vector<QueryBody>> BodyReader::batch(std::string_view body, bool ndjson) {
    std::vector<QueryBody> out;
    if (!ndjson) {
        dom::element root;
        if (auto err = impl_->parse(body).get(root)) return not_json(err);
        if (root.type() != dom::element_type::ARRAY) {
            return bad_request("a JSON batch is an array of {\"query\", \"params\"} objects");
        }
        const dom::array items = root.get_array().value_unsafe();
        for (dom::element item : items) {
            if (out.size() == batch_statements_max) return too_many_statements();
            QueryBody statement;
            if (auto err = read_statement(item, statement)) {
                err->message = "statement " + std::to_string(out.size()) + ": " + err->message;
                return std::move(*err);
            }
            out.push_back(std::move(statement));
        }
        return out;
    }
    uint32_t line_no = 0;
    size_t at = 0;
    while (at < body.size()) {
        size_t end = body.find('\n', at);
        if (end == std::string_view::npos) end = body.size();
        const std::string_view line = body.substr(at, end - at);
        at = end + 1;
        ++line_no;
        if (is_blank(line)) continue;
        BodyError error;
        if (out.size() == batch_statements_max) {
            error = too_many_statements();
        } else {
            dom::element root;
            QueryBody statement;
            if (auto err = impl_->parse(line).get(root)) {
                error = not_json(err);
            } else if (auto bad = read_statement(root, statement)) {
                error = std::move(*bad);
            } else {
                out.push_back(std::move(statement));
                continue;
            }
        }
        error.line = line_no;
        error.message = "line " + std::to_string(line_no) + ": " + error.message;
        return error;
    }
    return out;
}

BodyResult<engine::Value> BodyReader::document_body(std::string_view body) {
    dom::element root;
    if (auto err = impl_->parse(body).get(root)) return not_json(err);
    Value out;
    if (root.type() == dom::element_type::ARRAY) {
        engine::List list;
        const dom::array items = root.get_array().value_unsafe();
        for (dom::element item : items) {
            Value doc;
            if (auto err = read_document(item, doc)) {
                err->message =
                    "document " + std::to_string(list.items.size()) + ": " + err->message;
                return std::move(*err);
            }
            list.items.push_back(std::move(doc));
        }
        return Value(std::move(list));
    }
    if (root.type() != dom::element_type::OBJECT) {
        return bad_request("the body is a JSON object or an array of objects");
    }
    if (auto err = read_document(root, out)) return std::move(*err);
    return out;
}

BodyResult<QueryBody> parse_query_body(std::string_view body) {
    return BodyReader().query_body(body);
}

BodyResult<std::vector<QueryBody>> parse_batch(std::string_view body, bool ndjson) {
    return BodyReader().batch(body, ndjson);
}

BodyResult<engine::Value> parse_document_body(std::string_view body) {
    return BodyReader().document_body(body);
}

std::optional<uint32_t> member_position(std::string_view body, std::optional<size_t> item,
                                        std::string_view member) {
    // The DOM keeps no offsets; the on-demand reader's tokens are views into the padded copy.
    namespace od = simdjson::ondemand;
    od::parser parser;
    const simdjson::padded_string padded(body);
    od::document doc;
    if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) return std::nullopt;
    od::object object;
    if (item) {
        od::array array;
        if (doc.get_array().get(array) != simdjson::SUCCESS) return std::nullopt;
        size_t i = 0;
        bool found = false;
        for (auto element : array) {
            if (i++ != *item) continue;
            if (element.get_object().get(object) != simdjson::SUCCESS) return std::nullopt;
            found = true;
            break;
        }
        if (!found) return std::nullopt;
    } else if (doc.get_object().get(object) != simdjson::SUCCESS) {
        return std::nullopt;
    }
    for (auto field : object) {
        std::string_view key;
        if (field.unescaped_key().get(key) != simdjson::SUCCESS) return std::nullopt;
        if (key != member) continue;
        std::string_view raw;
        if (field.value().raw_json_token().get(raw) != simdjson::SUCCESS) return std::nullopt;
        const size_t bytes = static_cast<size_t>(raw.data() - padded.data());
        uint32_t code_points = 0;
        for (size_t b = 0; b < bytes && b < body.size(); ++b) {
            code_points += (static_cast<unsigned char>(body[b]) & 0xC0) != 0x80;
        }
        return code_points;
    }
    return std::nullopt;
}

std::optional<BodyError> check_document_fields(const engine::Value& document,
                                               const engine::Schema& schema) {
    auto check_one = [&](const Value& doc) -> std::optional<BodyError> {
        const auto* obj = std::get_if<engine::Object>(&doc.rep);
        if (!obj)
            return bad_request("a document is a JSON object, found " +
                               std::string(doc.kind_name()));
        for (const std::string& key : obj->keys) {
            if (key == "_id" || schema.slot_of(key)) continue;
            return BodyError{404, "unknown field " + quote_name(key), {}, {}, 0};
        }
        return std::nullopt;
    };
    if (const auto* list = std::get_if<engine::List>(&document.rep)) {
        for (const Value& doc : list->items) {
            if (auto err = check_one(doc)) return err;
        }
        return std::nullopt;
    }
    return check_one(document);
}

}  // namespace fenec::node
