// tools/fenec.cc: the `fenec` command line: `fenec shell FILE` runs FenecQL on a tenant file
// (tools/shell.cc); `fenec demo DIR` writes a demo tenant, reopens it and prints its state;
// `fenec inspect FILE` prints a file's header, history and collections (read-only: it cuts
// nothing, and takes no lock, so it reads a file a node has open: engine/open.cc says what such a
// read can see). Backup and restore come with the node.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "engine/database.h"
#include "engine/format.h"
#include "engine/io.h"
#include "json/timestamp.h"
#include "ql/describe.h"
#include "tools/shell.h"

namespace {

using namespace fenec::engine;

// `created_ms  <ms> (<ISO-8601 UTC>)`; a time outside the years 0000 to 9999 (a damaged header)
// has no ISO text and is printed as its number alone.
void print_created(int64_t ms) {
    if (fenec::json::timestamp_in_range(ms)) {
        std::printf("created_ms  %lld (%s)\n", static_cast<long long>(ms),
                    fenec::json::format_timestamp(ms).c_str());
    } else {
        std::printf("created_ms  %lld\n", static_cast<long long>(ms));
    }
}

// A read-only open (inspect) knows what it read, not what its writer has synced.
void print_state(const Database& db, bool read_only) {
    const History h = db.history();
    const Usage u = db.usage();
    std::printf("lineage     %s\n", format::hex16(db.lineage().v).c_str());
    print_created(db.created_ms());
    if (read_only) {
        std::printf("seq         %llu (as read; a node writing the file may not have synced it)\n",
                    static_cast<unsigned long long>(db.seq().v));
    } else {
        std::printf("seq         %llu (durable %llu)\n",
                    static_cast<unsigned long long>(db.seq().v),
                    static_cast<unsigned long long>(db.durable_seq().v));
    }
    std::printf("history     term %llu:", static_cast<unsigned long long>(h.term()));
    for (const Fork& f : h.forks) {
        std::printf(" (%s @ %llu)", format::hex16(f.history.v).c_str(),
                    static_cast<unsigned long long>(f.seq.v));
    }
    std::printf("%s\n", h.replica ? " replica" : "");
    std::printf("file        %llu bytes, %llu dead\n",
                static_cast<unsigned long long>(u.file_bytes),
                static_cast<unsigned long long>(u.dead_bytes));
    if (const std::optional<uint64_t> torn = db.torn_at()) {
        // The bytes are left for the file's writer: a block it was landing as they were read, or
        // a tear its next open cuts (engine/open.cc).
        std::printf(
            "torn        at offset %llu: the %llu bytes after it not read, left in the file\n",
            static_cast<unsigned long long>(*torn),
            static_cast<unsigned long long>(u.file_bytes - *torn));
    }
    ReadView view = db.read();
    for (const CollectionInfo& c : view.collections()) {
        std::printf("collection  %s (id %u): %llu rows, next id %llu\n", c.name.c_str(), c.id.v,
                    static_cast<unsigned long long>(c.rows),
                    static_cast<unsigned long long>(c.next_id));
        const Schema* s = view.schema(c.id);
        for (const FieldDesc& f : s->fields) {
            if (!f.dropped) {
                std::printf("  field     %s\n", fenec::ql::describe_field(f).definition.c_str());
            }
        }
    }
}

FieldDesc field(const char* name, BaseType type) {
    FieldDesc f;
    f.name = name;
    f.type = make_type(type);
    return f;
}

int fail(const Status& st) {
    std::fprintf(stderr, "fenec: %s\n", st.to_string().c_str());
    return 1;
}

int demo(const std::string& dir) {
    if (Status made = posix_fs().make_dirs(dir); !made.is_ok()) return fail(made);
    const std::string path = dir + "/demo.fenec";
    ::unlink(path.c_str());
    OpenOptions options;
    options.tenant = "demo";
    {
        auto db = Database::create(path, options);
        if (!db.is_ok()) return fail(db.status());
        auto block = (*db)->begin();
        if (!block.is_ok()) return fail(block.status());
        Schema schema;
        schema.fields = {field("name", BaseType::Text), field("city", BaseType::Text),
                         field("joined", BaseType::Timestamp)};
        auto people = block->create_collection("people", schema);
        if (!people.is_ok()) return fail(people.status());
        const char* names[][2] = {{"Ayşe", "İzmir"}, {"Bob", "Boston"}, {"Chloé", "Lyon"}};
        int64_t t = 1'735'689'600'000;  // 2025-01-01T00:00:00Z
        for (auto& [name, city] : names) {
            auto id = block->insert(*people, std::nullopt,
                                    Doc{{0, Value(name)}, {1, Value(city)}, {2, Timestamp{t}}});
            if (!id.is_ok()) return fail(id.status());
            t += 86'400'000;
        }
        auto landed = block->commit();
        if (!landed.is_ok()) return fail(landed.status());
        std::printf("wrote %s: block of %llu writes landed at seq %llu, %llu bytes, durable\n\n",
                    path.c_str(), static_cast<unsigned long long>(landed->last.v - landed->first.v + 1),
                    static_cast<unsigned long long>(landed->last.v),
                    static_cast<unsigned long long>(landed->bytes));
        if (Status st = (*db)->close(); !st.is_ok()) return fail(st);
    }
    auto db = Database::open(path, options);
    if (!db.is_ok()) return fail(db.status());
    std::printf("reopened %s:\n", path.c_str());
    print_state(**db, false);
    ReadView view = (*db)->read();
    auto people = view.find("people");
    if (!people.is_ok()) return fail(people.status());
    view.scan(*people, [](DocId id, DocView doc) {
        const Value name = doc.get(0), city = doc.get(1);
        std::printf("  row %llu: %s, %s\n", static_cast<unsigned long long>(id.v),
                    std::get<std::string>(name.rep).c_str(), std::get<std::string>(city.rep).c_str());
        return true;
    });
    return 0;
}

int inspect(const std::string& path) {
    OpenOptions options;
    options.read_only = true;
    auto db = Database::open(path, options);
    if (!db.is_ok()) return fail(db.status());
    print_state(**db, true);
    return 0;
}

void usage() {
    std::fprintf(stderr,
                 "usage: fenec shell FILE [-c STATEMENT]   FenecQL on a tenant file\n"
                 "       fenec demo DIR        write a demo tenant in DIR, reopen it, print it\n"
                 "       fenec inspect FILE    print a tenant file's header, history, collections\n");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 2 && std::strcmp(argv[1], "shell") == 0) {
        return fenec::tools::shell_main(argc - 1, argv + 1);
    }
    if (argc == 3 && std::strcmp(argv[1], "demo") == 0) return demo(argv[2]);
    if (argc == 3 && std::strcmp(argv[1], "inspect") == 0) return inspect(argv[2]);
    if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
        usage();
        return 0;
    }
    usage();
    return 2;
}
