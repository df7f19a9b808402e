// shard/merge.cc: the merges of the query across tenants (shard/merge.h, router.md §12.5): the
// request's `merge` read, a tenant's answer prepared, and the concat, order and fold. No I/O.
#include "shard/merge.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "json/timestamp.h"
#include "json/writer.h"
#include "ql/compare.h"

namespace fenec::shard {

namespace {

using engine::Value;
using Element = simdjson::dom::element;

const index::TextRule bytes_rule{};

// ---------------------------------------------------------------------------------------------
// The request's `merge` (§12.2, §12.3).

std::optional<MergeRefusal> refuse(std::string message) {
    return MergeRefusal{std::move(message), "", ""};
}

// A key or a fold column: "name", "name asc", "name desc", or an object.
std::optional<MergeRefusal> parse_column(const Element& e, bool order, MergeColumn& out) {
    std::string_view s;
    if (!e.get_string().get(s)) {
        const size_t space = s.find(' ');
        out.column = std::string(s.substr(0, space));
        if (space != std::string_view::npos) {
            const std::string_view dir = s.substr(space + 1);
            if (dir == "desc") out.desc = true;
            else if (dir != "asc") out.column.clear();
        }
        if (out.column.empty()) {
            return refuse("a key is `name`, `name asc`, `name desc` or an object: not `" +
                          std::string(s) + "`");
        }
        if (!order && space != std::string_view::npos) {
            return refuse("`" + std::string(s) + "`: asc and desc are an order's alone");
        }
        out.label = std::string(s);
        return std::nullopt;
    }
    simdjson::dom::object o;
    if (e.get_object().get(o)) return refuse("a key is a text or an object");
    out.told = true;
    engine::Collation collation = engine::Collation::bytes;
    std::optional<engine::Collation> fold;
    bool nocase = false;
    for (auto field : o) {
        const std::string_view k = field.key;
        if (k == "column") {
            if (field.value.get_string().get(s) || s.empty()) {
                return refuse("a key's `column` is a non-empty text");
            }
            out.column = std::string(s);
        } else if (k == "collate") {
            if (field.value.get_string().get(s)) return refuse("a key's `collate` is a text");
            if (s == "tr") collation = engine::Collation::tr;
            else if (s == "und") collation = engine::Collation::und;
            else {
                return MergeRefusal{"unknown collation `" + std::string(s) +
                                        "`: a key collates by tr or und",
                                    "collation", std::string(s)};
            }
        } else if (k == "nocase") {
            bool b = false;
            if (!field.value.get_bool().get(b)) {
                nocase = b;
            } else if (!field.value.get_string().get(s) && (s == "tr" || s == "und")) {
                nocase = true;
                fold = s == "tr" ? engine::Collation::tr : engine::Collation::und;
            } else {
                return refuse("a key's `nocase` is true, false, \"tr\" or \"und\"");
            }
        } else if (k == "desc") {
            bool b = false;
            if (field.value.get_bool().get(b)) return refuse("a key's `desc` is true or false");
            if (!order) return refuse("`desc` is an order's alone, not a fold column's");
            out.desc = b;
        } else {
            return refuse("unknown member `" + std::string(k) +
                          "` in a key: it takes column, collate, nocase and desc");
        }
    }
    if (out.column.empty()) return refuse("a key object needs its `column`");
    out.rule = index::TextRule{collation, nocase, fold.value_or(collation)};
    out.label = out.column;
    if (collation != engine::Collation::bytes) {
        out.label += collation == engine::Collation::tr ? " collate tr" : " collate und";
    }
    if (nocase) out.label += " nocase";
    if (out.desc) out.label += " desc";
    return std::nullopt;
}

std::optional<MergeRefusal> parse_columns(const Element& e, std::string_view kind, bool order,
                                          std::vector<MergeColumn>& out) {
    simdjson::dom::array a;
    if (e.get_array().get(a)) return refuse("`" + std::string(kind) + "` is an array");
    for (Element item : a) {
        MergeColumn c;
        if (auto r = parse_column(item, order, c)) return r;
        out.push_back(std::move(c));
    }
    return std::nullopt;
}

const char* const average_refusal =
    "an average of averages is not an average: sum its sum and its count";

}  // namespace

std::string_view merge_name(MergeKind kind) {
    switch (kind) {
        case MergeKind::concat: return "concat";
        case MergeKind::order: return "order";
        case MergeKind::fold: return "fold";
    }
    return "concat";
}

std::optional<MergeRefusal> parse_merge(const Element* merge, MergeSpec& out) {
    out = MergeSpec{};
    if (!merge || merge->is_null()) return std::nullopt;
    simdjson::dom::object o;
    if (merge->get_object().get(o)) return refuse("`merge` is an object");
    std::string_view kind;
    Element k;
    if (o.at_key("kind").get(k) || k.get_string().get(kind)) {
        return refuse("`merge` needs its `kind`: concat, order or fold");
    }
    if (kind == "concat") out.kind = MergeKind::concat;
    else if (kind == "order") out.kind = MergeKind::order;
    else if (kind == "fold") out.kind = MergeKind::fold;
    else return refuse("unknown merge kind `" + std::string(kind) + "`: concat, order or fold");
    bool folded = false;
    for (auto field : o) {
        const std::string_view f = field.key;
        if (f == "kind") continue;
        if (f == "keys") {
            if (out.kind != MergeKind::order) {
                return refuse("`keys` belong to an order, not a " + std::string(kind));
            }
            if (auto r = parse_columns(field.value, f, true, out.keys)) return r;
            continue;
        }
        const bool fold_field = f == "group" || f == "sum" || f == "min" || f == "max";
        if (f == "avg") return refuse(average_refusal);
        if (!fold_field) {
            return refuse("unknown member `" + std::string(f) + "` in `merge`" +
                          (out.kind == MergeKind::fold ? ": a fold takes group, sum, min and max"
                                                       : ""));
        }
        if (out.kind != MergeKind::fold) {
            return refuse("`" + std::string(f) + "` belongs to a fold, not a " +
                          std::string(kind));
        }
        folded = true;
        if (f == "sum") {
            simdjson::dom::array a;
            if (field.value.get_array().get(a)) return refuse("`sum` is an array of columns");
            for (Element item : a) {
                std::string_view c;
                if (item.get_string().get(c) || c.empty()) {
                    return refuse("`sum` is an array of column names");
                }
                if (c.starts_with("avg(")) return refuse(average_refusal);
                out.sum.emplace_back(c);
            }
            continue;
        }
        std::vector<MergeColumn>& into = f == "group" ? out.group : f == "min" ? out.min : out.max;
        if (auto r = parse_columns(field.value, f, false, into)) return r;
    }
    if (out.kind == MergeKind::order && out.keys.empty()) {
        return refuse("an order needs `keys`, at least one");
    }
    if (out.kind == MergeKind::fold && !folded) {
        return refuse("a fold needs one of group, sum, min and max");
    }
    std::set<std::string> seen;
    auto twice = [&](const std::string& c) -> std::optional<MergeRefusal> {
        if (seen.insert(c).second) return std::nullopt;
        return MergeRefusal{"the column `" + c + "` is named twice in `merge`", "column", c};
    };
    for (const auto& c : out.keys) if (auto r = twice(c.column)) return r;
    for (const auto& c : out.group) if (auto r = twice(c.column)) return r;
    for (const auto& c : out.sum) if (auto r = twice(c)) return r;
    for (const auto& c : out.min) if (auto r = twice(c.column)) return r;
    for (const auto& c : out.max) if (auto r = twice(c.column)) return r;
    return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Values.

namespace {

// The engine's form of a timestamp (json::format_timestamp): 20 or 24 bytes, ending in Z.
// `s` is in the engine's form exactly when it has that form's shape (`YYYY-MM-DDTHH:MM:SSZ`,
// or `.mmm` before the Z with mmm not 000: json::format_timestamp writes no `.000`) and
// json::parse_timestamp reads it: then writing the time back gives `s` again, the same test as
// comparing with format_timestamp's text, without making that text for every row.
bool timestamp_text(std::string_view s, int64_t& ms) {
    static constexpr std::string_view shape = "dddd-dd-ddTdd:dd:dd.dddZ";
    if (s.size() != 20 && s.size() != 24) return false;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
        const char want = shape[i];
        if (want == 'd' ? s[i] < '0' || s[i] > '9' : s[i] != want) return false;
    }
    if (s.back() != 'Z' || (s.size() == 24 && s.substr(20, 3) == "000")) return false;
    const auto t = json::parse_timestamp(s);
    if (!t) return false;
    ms = *t;
    return true;
}

Value convert(const Element& e, bool told, bool in_object) {
    switch (e.type()) {
        case simdjson::dom::element_type::NULL_VALUE: return Value{};
        case simdjson::dom::element_type::BOOL: return Value{bool(e.get_bool().value_unsafe())};
        case simdjson::dom::element_type::INT64: return Value{e.get_int64().value_unsafe()};
        case simdjson::dom::element_type::UINT64:
            return Value{static_cast<double>(e.get_uint64().value_unsafe())};
        case simdjson::dom::element_type::DOUBLE: return Value{e.get_double().value_unsafe()};
        case simdjson::dom::element_type::STRING: {
            const std::string_view s = e.get_string().value_unsafe();
            int64_t ms = 0;
            if (!told && !in_object && timestamp_text(s, ms)) return Value{engine::Timestamp{ms}};
            return Value{std::string(s)};
        }
        case simdjson::dom::element_type::ARRAY: {
            engine::List l;
            simdjson::dom::array a;
            if (e.get_array().get(a)) return Value{};
            for (Element item : a) {
                l.items.push_back(convert(item, told, in_object));
            }
            return Value{std::move(l)};
        }
        case simdjson::dom::element_type::OBJECT: {
            engine::Object o;
            simdjson::dom::object members;
            if (e.get_object().get(members)) return Value{};
            for (auto field : members) {
                o.keys.emplace_back(field.key);
                o.values.push_back(convert(field.value, true, true));
            }
            return Value{std::move(o)};
        }
    }
    return Value{};
}

// Texts at the top and inside lists to their sort keys (the rule's reach, ql/compare.h).
void to_sort_keys(Value& v, const index::TextRule& rule) {
    if (auto* s = std::get_if<std::string>(&v.rep)) {
        *s = index::sort_key(*s, rule);
    } else if (auto* l = std::get_if<engine::List>(&v.rep)) {
        for (Value& item : l->items) to_sort_keys(item, rule);
    }
}

void write_json(json::Writer& w, const Value& v) {
    std::visit(
        [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, engine::Null>) w.null();
            else if constexpr (std::is_same_v<T, bool>) w.boolean(x);
            else if constexpr (std::is_same_v<T, int64_t>) w.int64(x);
            else if constexpr (std::is_same_v<T, double>) w.float64(x);
            else if constexpr (std::is_same_v<T, std::string>) w.string(x);
            else if constexpr (std::is_same_v<T, engine::Timestamp>) {
                w.string(json::format_timestamp(x.ms));
            } else if constexpr (std::is_same_v<T, engine::List>) {
                w.begin_array();
                for (const Value& item : x.items) write_json(w, item);
                w.end_array();
            } else if constexpr (std::is_same_v<T, engine::Object>) {
                w.begin_object();
                for (size_t i = 0; i < x.keys.size(); ++i) {
                    w.key(x.keys[i]);
                    write_json(w, x.values[i]);
                }
                w.end_object();
            } else {
                w.null();  // bytes and vectors never come back from JSON
            }
        },
        v.rep);
}

}  // namespace

Value to_value(const Element& e, bool told) { return convert(e, told, false); }

Value key_value(const Element& e, const MergeColumn& column) {
    // A text under a rule (a told column: never a timestamp) goes to its sort key straight.
    std::string_view text;
    if (column.rule != bytes_rule && column.told && !e.get_string().get(text)) {
        return Value{index::sort_key(text, column.rule)};
    }
    Value v = convert(e, column.told, false);
    if (column.rule != bytes_rule) to_sort_keys(v, column.rule);
    return v;
}

void write_value(std::string& out, const Value& v) {
    json::Writer w(out);
    write_json(w, v);
}

// ---------------------------------------------------------------------------------------------
// A tenant's answer.

namespace {

// A scanner over JSON simdjson has already validated: finds the members of the top object's
// `rows` array and gives each one's bytes. Only skips; the values are read by simdjson.
class RowSplitter {
  public:
    explicit RowSplitter(std::string_view s) : s_(s) {}

    // The bytes of the top object's member `want`.
    std::optional<std::string_view> member(std::string_view want) {
        ws();
        if (!eat('{')) return std::nullopt;
        for (;;) {
            ws();
            if (eat('}')) return std::nullopt;
            const size_t key_at = at_;
            if (!skip_string()) return std::nullopt;
            const std::string_view key = s_.substr(key_at + 1, at_ - key_at - 2);
            ws();
            if (!eat(':')) return std::nullopt;
            ws();
            const size_t start = at_;
            if (!skip_value()) return std::nullopt;
            if (key == want) return s_.substr(start, at_ - start);
            ws();
            eat(',');
        }
    }

    bool split(std::vector<std::string_view>& rows) {
        ws();
        if (!eat('{')) return false;
        for (;;) {
            ws();
            if (eat('}')) return false;  // no `rows`
            const size_t key_at = at_;
            if (!skip_string()) return false;
            const std::string_view key = s_.substr(key_at, at_ - key_at);
            ws();
            if (!eat(':')) return false;
            ws();
            if (key == "\"rows\"" && peek() == '[') return elements(rows);
            if (!skip_value()) return false;
            ws();
            eat(',');
        }
    }

  private:
    bool elements(std::vector<std::string_view>& rows) {
        ++at_;
        ws();
        if (eat(']')) return true;
        for (;;) {
            ws();
            const size_t start = at_;
            if (!skip_value()) return false;
            rows.push_back(s_.substr(start, at_ - start));
            ws();
            if (eat(']')) return true;
            if (!eat(',')) return false;
        }
    }
    char peek() const { return at_ < s_.size() ? s_[at_] : '\0'; }
    bool eat(char c) {
        if (peek() != c) return false;
        ++at_;
        return true;
    }
    void ws() {
        while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\n' || s_[at_] == '\r' ||
                                   s_[at_] == '\t')) {
            ++at_;
        }
    }
    // To the quote that ends the string: memchr to each quote, which ends it unless an odd run
    // of backslashes stands before it (the rows are mostly texts: this is the scan's bulk).
    bool skip_string() {
        if (!eat('"')) return false;
        const size_t open = at_;
        for (;;) {
            const void* q = std::memchr(s_.data() + at_, '"', s_.size() - at_);
            if (!q) return false;
            const size_t quote = static_cast<size_t>(static_cast<const char*>(q) - s_.data());
            size_t run = quote;
            while (run > open && s_[run - 1] == '\\') --run;
            at_ = quote + 1;
            if ((quote - run) % 2 == 0) return true;
        }
    }
    bool skip_value() {
        const char c = peek();
        if (c == '"') return skip_string();
        if (c == '{' || c == '[') {
            int depth = 0;
            while (at_ < s_.size()) {
                const char d = s_[at_];
                if (d == '"') {
                    if (!skip_string()) return false;
                    continue;
                }
                ++at_;
                if (d == '{' || d == '[') ++depth;
                else if ((d == '}' || d == ']') && --depth == 0) return true;
            }
            return false;
        }
        const size_t start = at_;
        while (at_ < s_.size() && s_[at_] != ',' && s_[at_] != '}' && s_[at_] != ']' &&
               s_[at_] != ' ' && s_[at_] != '\n' && s_[at_] != '\r' && s_[at_] != '\t') {
            ++at_;
        }
        return at_ > start;
    }

    std::string_view s_;
    size_t at_ = 0;
};

std::string row_no(size_t i) { return "row " + std::to_string(i + 1); }

// Groups compare column by column in their comparison form, under the bytes rule.
struct KeyLess {
    bool operator()(const std::vector<Value>& a, const std::vector<Value>& b) const {
        for (size_t i = 0; i < a.size(); ++i) {
            const int c = ql::compare_values(a[i], b[i], bytes_rule);
            if (c != 0) return c < 0;
        }
        return false;
    }
};

// Folds `from` into `into`, cell by cell (both in one FoldLayout's order).
void fold_cells(std::vector<FoldCell>& into, const std::vector<FoldCell>& from) {
    for (size_t i = 0; i < into.size(); ++i) {
        FoldCell& a = into[i];
        const FoldCell& b = from[i];
        if (!b.any) continue;
        if (a.role == FoldCell::Role::sum) {
            a.int_sum += b.int_sum;
            a.float_sum += b.float_sum;
            a.has_float = a.has_float || b.has_float;
            a.any = true;
            continue;
        }
        const int c = a.any ? ql::compare_values(b.best, a.best, bytes_rule) : 0;
        if (!a.any || (a.role == FoldCell::Role::min ? c < 0 : c > 0)) {
            a.best = b.best;
            a.best_out = b.best_out;
            a.any = true;
        }
    }
}

bool prepare_fold(const MergeSpec& spec, const simdjson::dom::array& rows, TenantInput& out,
                  std::string& why) {
    const FoldLayout layout = fold_layout(spec);
    std::map<std::string_view, size_t> where;  // column → group index, or group count + fold
    for (size_t i = 0; i < spec.group.size(); ++i) where.emplace(spec.group[i].column, i);
    for (size_t i = 0; i < layout.columns.size(); ++i) {
        where.emplace(layout.columns[i], spec.group.size() + i);
    }
    const size_t width = where.size();
    std::map<std::vector<Value>, size_t, KeyLess> index;
    std::vector<bool> seen(width);
    size_t n = 0;
    for (Element row : rows) {
        simdjson::dom::object o;
        if (row.get_object().get(o)) {
            why = row_no(n) + " is not an object";
            return false;
        }
        FoldGroup g;
        g.key.resize(spec.group.size());
        g.key_out.resize(spec.group.size());
        g.cells.resize(layout.columns.size());
        std::fill(seen.begin(), seen.end(), false);
        size_t count = 0;
        for (auto field : o) {
            auto it = where.find(field.key);
            if (it == where.end()) {
                why = row_no(n) + " has the column `" + std::string(field.key) +
                      "`, neither grouped nor folded: the merge would drop it";
                return false;
            }
            if (seen[it->second]) continue;
            seen[it->second] = true;
            ++count;
            if (it->second < spec.group.size()) {
                const MergeColumn& c = spec.group[it->second];
                g.key_out[it->second] = to_value(field.value, c.told);
                g.key[it->second] = key_value(field.value, c);
                continue;
            }
            const size_t f = it->second - spec.group.size();
            if (n == 0) out.fold_order.emplace_back(field.key);
            FoldCell& cell = g.cells[f];
            cell.role = layout.roles[f];
            if (field.value.is_null()) continue;
            if (cell.role == FoldCell::Role::sum) {
                int64_t i = 0;
                double d = 0;
                if (!field.value.get_int64().get(i)) {
                    cell.int_sum = i;
                } else if (!field.value.get_double().get(d)) {
                    cell.float_sum = d;
                    cell.has_float = true;
                } else {
                    why = row_no(n) + " holds a " +
                          std::string(field.value.is_string() ? "text" : "non-number") +
                          " in the sum column `" + std::string(field.key) + "`";
                    return false;
                }
                cell.any = true;
                continue;
            }
            cell.best_out = to_value(field.value, layout.rules[f]->told);
            cell.best = key_value(field.value, *layout.rules[f]);
            cell.any = true;
        }
        if (count != width) {
            for (const auto& [name, pos] : where) {
                if (!seen[pos]) {
                    why = row_no(n) + " lacks the column `" + std::string(name) +
                          "` the merge names";
                    return false;
                }
            }
        }
        for (size_t f = 0; f < g.cells.size(); ++f) g.cells[f].role = layout.roles[f];
        auto [it, fresh] = index.emplace(g.key, out.groups.size());
        if (fresh) out.groups.push_back(std::move(g));
        else fold_cells(out.groups[it->second].cells, g.cells);
        ++n;
    }
    // In group order, which the final fold keeps.
    std::vector<FoldGroup> sorted;
    sorted.reserve(out.groups.size());
    for (const auto& [key, at] : index) sorted.push_back(std::move(out.groups[at]));
    out.groups = std::move(sorted);
    return true;
}

}  // namespace

std::optional<std::string_view> member_bytes(std::string_view json, std::string_view key) {
    return RowSplitter(json).member(key);
}

FoldLayout fold_layout(const MergeSpec& spec) {
    FoldLayout l;
    for (const auto& c : spec.sum) {
        l.columns.push_back(c);
        l.roles.push_back(FoldCell::Role::sum);
        l.rules.push_back(nullptr);
    }
    for (const auto& c : spec.min) {
        l.columns.push_back(c.column);
        l.roles.push_back(FoldCell::Role::min);
        l.rules.push_back(&c);
    }
    for (const auto& c : spec.max) {
        l.columns.push_back(c.column);
        l.roles.push_back(FoldCell::Role::max);
        l.rules.push_back(&c);
    }
    return l;
}

namespace {

template <class T>
int three_way(const T& a, const T& b) {
    return (a > b) - (a < b);
}

// Two values of a key under the bytes rule (key_value's comparison form): by their own
// alternative when both hold the same plain one (what ql::compare_values does for two of them
// under the bytes rule, without looking at their ranks), else by ql::compare_values.
int compare_key(const Value& x, const Value& y) {
    if (x.rep.index() == y.rep.index()) {
        if (const auto* i = std::get_if<int64_t>(&x.rep)) {
            return three_way(*i, *std::get_if<int64_t>(&y.rep));
        }
        if (const auto* t = std::get_if<engine::Timestamp>(&x.rep)) {
            return three_way(t->ms, std::get_if<engine::Timestamp>(&y.rep)->ms);
        }
        if (const auto* s = std::get_if<std::string>(&x.rep)) {
            const int r = s->compare(*std::get_if<std::string>(&y.rep));
            return (r > 0) - (r < 0);
        }
    }
    return ql::compare_values(x, y, bytes_rule);
}

}  // namespace

int compare_keys(const MergeSpec& spec, const Value* a, const Value* b, size_t* decided) {
    for (size_t i = 0; i < spec.keys.size(); ++i) {
        const int c = compare_key(a[i], b[i]);
        if (c == 0) continue;
        if (decided) *decided = i;
        return spec.keys[i].desc ? -c : c;
    }
    return 0;
}

bool prepare_tenant(const MergeSpec& spec, std::string body, TenantInput& out, std::string& why) {
    // One parser a thread, reused: its buffers grow to the largest answer and stay.
    thread_local simdjson::dom::parser parser;
    out = TenantInput{};
    out.body = std::move(body);
    // An upstream answer has this room already (shard/query.cc): no copy then.
    out.body.reserve(out.body.size() + simdjson::SIMDJSON_PADDING);
    const char* const no_rows = "the answer has no `rows` array of row objects";
    Element doc;
    simdjson::dom::array rows;
    if (parser.parse(out.body.data(), out.body.size(), false).get(doc) ||
        doc["rows"].get_array().get(rows)) {
        why = no_rows;
        return false;
    }
    out.rows.reserve(rows.size());
    if (!RowSplitter(out.body).split(out.rows) || out.rows.size() != rows.size()) {
        why = no_rows;
        return false;
    }
    if (spec.kind == MergeKind::fold) return prepare_fold(spec, rows, out, why);
    if (spec.kind == MergeKind::order) out.keys.reserve(out.rows.size() * spec.keys.size());
    size_t n = 0;
    for (Element row : rows) {
        simdjson::dom::object o;
        if (row.get_object().get(o)) {
            why = row_no(n) + " is not an object";
            return false;
        }
        if (spec.kind == MergeKind::order) {
            const size_t width = spec.keys.size();
            for (const MergeColumn& k : spec.keys) {
                Element e;
                if (o.at_key(k.column).get(e)) {
                    why = row_no(n) + " lacks the key column `" + k.column + "`";
                    return false;
                }
                out.keys.push_back(key_value(e, k));
            }
            const Value* here = out.keys.data() + n * width;
            size_t decided = 0;
            if (n > 0 && compare_keys(spec, here - width, here, &decided) > 0) {
                why = row_no(n) + " comes before " + row_no(n - 1) + " by `" +
                      spec.keys[decided].label + "`";
                return false;
            }
        }
        ++n;
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// The merges.

std::vector<MergedRow> merge_concat(const std::vector<const TenantInput*>& inputs) {
    std::vector<MergedRow> out;
    for (uint32_t t = 0; t < inputs.size(); ++t) {
        if (!inputs[t]) continue;
        for (uint32_t r = 0; r < inputs[t]->rows.size(); ++r) out.push_back({t, r});
    }
    return out;
}

bool OrderMerge::before(const Entry& a, const Entry& b) const {
    const int c = compare_keys(*spec_, a.key, b.key);
    if (c != 0) return c < 0;
    // Ties in tenant name order, a tenant's own rows in its order.
    return a.tenant != b.tenant ? a.tenant < b.tenant : a.row < b.row;
}

void OrderMerge::merge_last_two() {
    Run b = std::move(runs_.back());
    runs_.pop_back();
    Run& a = runs_.back();
    std::vector<Entry> out(a.entries.size() + b.entries.size());
    std::merge(a.entries.begin(), a.entries.end(), b.entries.begin(), b.entries.end(), out.begin(),
               [this](const Entry& x, const Entry& y) { return before(x, y); });
    a.entries = std::move(out);
    a.tenants += b.tenants;
}

void OrderMerge::add(uint32_t tenant, const TenantInput& input) {
    const size_t width = spec_->keys.size();
    Run run;
    run.tenants = 1;
    run.entries.resize(input.rows.size());
    for (uint32_t r = 0; r < input.rows.size(); ++r) {
        run.entries[r] = {input.keys.data() + static_cast<size_t>(r) * width, tenant, r};
    }
    runs_.push_back(std::move(run));
    // The binary counter's carry: two runs of as many tenants become one.
    while (runs_.size() >= 2 && runs_[runs_.size() - 2].tenants <= runs_.back().tenants) {
        merge_last_two();
    }
}

std::vector<MergedRow> OrderMerge::finish() {
    while (runs_.size() >= 2) merge_last_two();  // the smallest first
    std::vector<MergedRow> out;
    if (runs_.empty()) return out;
    out.reserve(runs_.front().entries.size());
    for (const Entry& e : runs_.front().entries) out.push_back({e.tenant, e.row});
    runs_.clear();
    return out;
}

std::vector<MergedRow> merge_order(const MergeSpec& spec,
                                   const std::vector<const TenantInput*>& inputs) {
    OrderMerge merge(spec);
    for (uint32_t t = 0; t < inputs.size(); ++t) {
        if (inputs[t]) merge.add(t, *inputs[t]);
    }
    return merge.finish();
}

bool merge_fold(const MergeSpec& spec, const std::vector<const TenantInput*>& inputs,
                std::vector<std::string>& rows, std::string& overflow_column) {
    const FoldLayout layout = fold_layout(spec);
    std::map<std::vector<Value>, FoldGroup, KeyLess> groups;
    const std::vector<std::string>* order = nullptr;  // the first answering tenant's
    for (const TenantInput* in : inputs) {
        if (!in) continue;
        if (!order && !in->fold_order.empty()) order = &in->fold_order;
        for (const FoldGroup& g : in->groups) {
            auto [it, fresh] = groups.try_emplace(g.key, g);
            if (!fresh) fold_cells(it->second.cells, g.cells);
        }
    }
    // The fold columns in the first answering tenant's order, else the spec's.
    std::vector<size_t> columns;
    for (size_t i = 0; i < layout.columns.size(); ++i) columns.push_back(i);
    if (order) {
        auto rank = [&](size_t i) {
            auto at = std::find(order->begin(), order->end(), layout.columns[i]);
            return static_cast<size_t>(at - order->begin());
        };
        std::stable_sort(columns.begin(), columns.end(),
                         [&](size_t a, size_t b) { return rank(a) < rank(b); });
    }
    rows.clear();
    rows.reserve(groups.size());
    for (const auto& [key, g] : groups) {
        std::string row;
        json::Writer w(row);
        w.begin_object();
        for (size_t i = 0; i < spec.group.size(); ++i) {
            w.key(spec.group[i].column);
            write_json(w, g.key_out[i]);
        }
        for (size_t i : columns) {
            const FoldCell& c = g.cells[i];
            w.key(layout.columns[i]);
            if (!c.any) {
                w.null();
            } else if (c.role != FoldCell::Role::sum) {
                write_json(w, c.best_out);
            } else if (c.has_float) {
                w.float64(static_cast<double>(c.int_sum) + c.float_sum);
            } else if (c.int_sum > INT64_MAX || c.int_sum < INT64_MIN) {
                overflow_column = layout.columns[i];
                return false;
            } else {
                w.int64(static_cast<int64_t>(c.int_sum));
            }
        }
        w.end_object();
        rows.push_back(std::move(row));
    }
    return true;
}

}  // namespace fenec::shard
