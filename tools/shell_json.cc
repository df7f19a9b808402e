// tools/shell_json.cc: the answers read for showing (tools/shell_json.h), with simdjson's
// on-demand reader: its tokens are views of the body, so a number is shown as the node wrote it,
// digit for digit, and members keep the order they were written in (a row's columns).
#include "tools/shell_json.h"

#include <simdjson.h>

namespace fenec::tools {

namespace {

namespace od = simdjson::ondemand;

std::string_view trim_right(std::string_view s) {
    while (!s.empty() &&
           (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

std::string control_escape(unsigned char c) {
    static constexpr char kHex[] = "0123456789abcdef";
    return std::string("\\u00") + kHex[c >> 4] + kHex[c & 0xF];
}

// One value as a table cell: false when the body is not JSON after all.
bool cell_text(od::value v, std::string& out, bool& numeric) {
    numeric = false;
    od::json_type type;
    if (v.type().get(type) != simdjson::SUCCESS) return false;
    std::string_view raw;
    switch (type) {
        case od::json_type::string: {
            std::string_view s;
            if (v.get_string().get(s) != simdjson::SUCCESS) return false;
            // Control characters are shown escaped: a line break would break the row, and an
            // escape sequence stored in a tenant would otherwise drive the reader's terminal.
            for (char c : s) {
                const auto u = static_cast<unsigned char>(c);
                if (c == '\n')
                    out += "\\n";
                else if (c == '\t')
                    out += "\\t";
                else if (c == '\r')
                    out += "\\r";
                else if (u < 0x20 || u == 0x7F)
                    out += control_escape(u);
                else
                    out += c;
            }
            return true;
        }
        case od::json_type::array: {
            od::array a;
            if (v.get_array().get(a) != simdjson::SUCCESS || a.raw_json().get(raw)) return false;
            break;
        }
        case od::json_type::object: {
            od::object o;
            if (v.get_object().get(o) != simdjson::SUCCESS || o.raw_json().get(raw)) return false;
            break;
        }
        default:
            numeric = type == od::json_type::number;
            raw = v.raw_json_token();
            break;
    }
    out += trim_right(raw);
    return true;
}

bool read_rows(od::array rows, AnswerView& view) {
    view.rows_present = true;
    for (auto item : rows) {
        od::object row;
        if (item.get_object().get(row) != simdjson::SUCCESS) return false;
        const bool first = view.rows.empty();
        std::vector<std::string> cells;
        std::vector<bool> numeric;
        for (auto field : row) {
            std::string_view key;
            od::value value;
            if (field.unescaped_key().get(key) || field.value().get(value)) return false;
            if (first) view.columns.emplace_back(key);
            cells.emplace_back();
            bool number = false;
            if (!cell_text(value, cells.back(), number)) return false;
            numeric.push_back(number);
        }
        // Every row of an answer has the same columns (fenecql.md); a body where they differ is
        // not one, and is shown as it is.
        if (cells.size() != view.columns.size()) return false;
        view.rows.push_back(std::move(cells));
        view.numeric.push_back(std::move(numeric));
    }
    return true;
}

}  // namespace

std::optional<AnswerView> read_answer(std::string_view body) {
    od::parser parser;
    const simdjson::padded_string padded(body);
    od::document doc;
    od::object object;
    if (parser.iterate(padded).get(doc) || doc.get_object().get(object)) return std::nullopt;
    AnswerView view;
    for (auto field : object) {
        std::string_view key;
        od::value value;
        if (field.unescaped_key().get(key) || field.value().get(value)) return std::nullopt;
        if (key == "rows") {
            od::array rows;
            if (value.get_array().get(rows) || !read_rows(rows, view)) return std::nullopt;
        } else if (key == "affected") {
            uint64_t n = 0;
            if (value.get_uint64().get(n)) return std::nullopt;
            view.affected = n;
        } else if (key == "ids") {
            od::array ids;
            if (value.get_array().get(ids)) return std::nullopt;
            for (auto id : ids) {
                uint64_t n = 0;
                if (id.get_uint64().get(n)) return std::nullopt;
                view.ids.push_back(n);
            }
        } else if (key == "ok") {
            bool ok = false;
            if (value.get_bool().get(ok)) return std::nullopt;
            view.ok = ok;
        } else {
            return std::nullopt;  // not a shape the table view knows
        }
    }
    return view;
}

std::optional<ErrorView> read_error(std::string_view body) {
    od::parser parser;
    const simdjson::padded_string padded(body);
    od::document doc;
    od::object object;
    if (parser.iterate(padded).get(doc) || doc.get_object().get(object)) return std::nullopt;
    ErrorView view;
    bool has_error = false;
    for (auto field : object) {
        std::string_view key;
        od::value value;
        if (field.unescaped_key().get(key) || field.value().get(value)) return std::nullopt;
        if (key == "error") {
            std::string_view text;
            if (value.get_string().get(text)) return std::nullopt;
            view.message = text;
            has_error = true;
        } else if (key == "position") {
            uint64_t p = 0;
            if (value.get_uint64().get(p)) return std::nullopt;
            view.position = p;
        } else {
            std::string text;
            bool numeric = false;
            if (!cell_text(value, text, numeric)) return std::nullopt;
            if (!view.extra.empty()) view.extra += ", ";
            view.extra += std::string(key) + ": " + text;
        }
    }
    if (!has_error) return std::nullopt;
    return view;
}

bool read_tenant(std::string_view body, std::vector<CollectionText>& out) {
    od::parser parser;
    const simdjson::padded_string padded(body);
    od::document doc;
    od::array collections;
    if (parser.iterate(padded).get(doc) || doc["collections"].get_array().get(collections)) {
        return false;
    }
    for (auto item : collections) {
        od::object c;
        if (item.get_object().get(c)) return false;
        CollectionText text;
        for (auto field : c) {
            std::string_view key;
            if (field.unescaped_key().get(key)) return false;
            if (key == "name") {
                std::string_view name;
                if (field.value().get_string().get(name)) return false;
                text.name = name;
            } else if (key == "fields") {
                od::array fields;
                if (field.value().get_array().get(fields)) return false;
                for (auto f : fields) {
                    std::string_view definition;
                    if (f["definition"].get_string().get(definition)) return false;
                    text.definitions.emplace_back(definition);
                }
            }
        }
        out.push_back(std::move(text));
    }
    return true;
}

std::optional<uint64_t> read_single_int(std::string_view body) {
    std::optional<AnswerView> view = read_answer(body);
    if (!view || view->rows.size() != 1 || view->rows[0].size() != 1) return std::nullopt;
    const std::string& cell = view->rows[0][0];
    if (cell.empty() || cell.find_first_not_of("0123456789") != std::string::npos) {
        return std::nullopt;
    }
    return std::stoull(cell);
}

}  // namespace fenec::tools
