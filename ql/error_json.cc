// ql/error_json.cc: the error bodies of ql/error_json.h, written with the one JSON writer.
#include "ql/error_json.h"

#include "json/writer.h"

namespace fenec::ql {

std::string error_json(const Error& e) {
    std::string out;
    json::Writer w(out);
    w.begin_object();
    write_error_members(w, e);
    w.end_object();
    return out;
}

void write_error_members(json::Writer& w, const Error& e) {
    w.key("error");
    w.string(e.message);
    if (e.position) {
        w.key("position");
        w.uint64(*e.position);
    }
    if (e.limit != Limit::none) {
        w.key("limit");
        w.string(limit_name(e.limit));
        w.key("max");
        w.uint64(e.max);
    }
    if (e.budget != BudgetKind::none) {
        w.key("budget");
        w.string(budget_name(e.budget));
        w.key("max");
        w.uint64(e.max);
    }
    if (!e.collection.empty()) {
        w.key("collection");
        w.string(e.collection);
    }
    if (e.id) {
        w.key("id");
        w.uint64(*e.id);
    }
    if (!e.field.empty()) {
        w.key("field");
        w.string(e.field);
    }
    if (!e.statement.empty()) {
        w.key("statement");
        w.string(e.statement);
    }
}

}  // namespace fenec::ql
