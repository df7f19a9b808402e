// ql/answer.cc: the JSON encoding of answers, written with the one JSON writer (json/writer.h).
#include "ql/answer.h"

#include "ql/value_json.h"

namespace fenec::ql {

namespace {

void write_table(json::Writer& w, const Table& t);

void write_row(json::Writer& w, const Table& t, const Row& row) {
    w.begin_object();
    for (size_t i = 0; i < row.cells.size(); ++i) {
        w.key((*t.columns)[i]);
        write_value(w, row.cells[i]);
    }
    if (t.scored) {
        w.key("_score");
        w.float64(row.score.value_or(0));
    }
    for (size_t i = 0; i < row.children.size(); ++i) {
        w.key((*t.lookup_names)[i]);
        write_table(w, row.children[i]);
    }
    w.end_object();
}

void write_table(json::Writer& w, const Table& t) {
    w.begin_array();
    for (const Row& row : t.rows) write_row(w, t, row);
    w.end_array();
}

}  // namespace

std::string rows_json(const Table& table) {
    std::string out;
    json::Writer w(out);
    write_table(w, table);
    return out;
}

std::string row_json(const Table& table, size_t i) {
    std::string out;
    json::Writer w(out);
    write_row(w, table, table.rows[i]);
    return out;
}

std::string to_json(const Answer& a) {
    std::string out;
    json::Writer w(out);
    w.begin_object();
    switch (a.kind) {
        case Answer::Kind::rows:
            w.key("rows");
            write_table(w, a.table);
            break;
        case Answer::Kind::ids:
            w.key("affected");
            w.uint64(a.affected);
            w.key("ids");
            w.begin_array();
            for (uint64_t id : a.ids) w.uint64(id);
            w.end_array();
            break;
        case Answer::Kind::affected:
            w.key("affected");
            w.uint64(a.affected);
            if (a.returning) {
                w.key("rows");
                write_table(w, a.table);
            }
            break;
        case Answer::Kind::ok:
            w.key("ok");
            w.boolean(true);
            break;
    }
    w.end_object();
    return out;
}

}  // namespace fenec::ql
