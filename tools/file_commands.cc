// tools/file_commands.cc: the commands on a tenant file on this machine, through the engine's own
// API: `verify` (every record replayed; the first fault named by its offset), `inspect` (header,
// history, records by kind, graphs, dead share, collections), `cut` (a damaged tail dropped by
// hand, its bytes kept beside the file), `compact` (the file rewritten without its dead bytes),
// and `demo` (a small tenant written and read back).
//
// `verify` and `inspect` open the file read-only: no lock, nothing written, so they read a file a
// node has open (engine/open.cc says what such a read sees). `cut` and `compact` take the file's
// lock as a node does, so they refuse a file a running node holds.
//
// What `cut` may cut (engine.md §6.2 in our words): the engine reads a file's records in order and
// stops at the first it cannot take. Cutting is safe only where a record starts and after the
// image region (a file without its whole image is damaged whatever follows), up to and including
// the offset where the engine found damage: there the bad record starts, and past it nothing can
// be told apart from garbage. The file left must still hold a history record. Any other offset is
// refused. The bytes cut are first written, fsynced, to `<file>.cut-<offset>` beside it, so a cut
// made by mistake can be put back; then the file is truncated and fsynced, and read again.
#include <unistd.h>

#include <cstdio>
#include <map>

#include "engine/database.h"
#include "engine/format.h"
#include "engine/io.h"
#include "json/timestamp.h"
#include "ql/describe.h"
#include "tools/commands.h"
#include "tools/progress.h"

namespace fenec::tools {

namespace {

using namespace fenec::engine;

// `created_ms  <ms> (<ISO-8601 UTC>)`; a time outside the years 0000 to 9999 (a damaged header)
// has no ISO text and is printed as its number alone.
void print_created(int64_t ms) {
    if (json::timestamp_in_range(ms)) {
        std::printf("created_ms  %lld (%s)\n", static_cast<long long>(ms),
                    json::format_timestamp(ms).c_str());
    } else {
        std::printf("created_ms  %lld\n", static_cast<long long>(ms));
    }
}

unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }

// A read-only open (inspect) knows what it read, not what its writer has synced.
void print_state(const Database& db, bool read_only) {
    const History h = db.history();
    const Usage u = db.usage();
    std::printf("lineage     %s\n", format::hex16(db.lineage().v).c_str());
    print_created(db.created_ms());
    if (read_only) {
        std::printf("seq         %llu (as read; a node writing the file may not have synced it)\n",
                    ull(db.seq().v));
    } else {
        std::printf("seq         %llu (durable %llu)\n", ull(db.seq().v), ull(db.durable_seq().v));
    }
    std::printf("history     term %llu:", ull(h.term()));
    for (const Fork& f : h.forks) {
        std::printf(" (%s @ %llu)", format::hex16(f.history.v).c_str(), ull(f.seq.v));
    }
    std::printf("%s\n", h.replica ? " replica" : "");
    const double dead_pct =
        u.file_bytes ? 100.0 * static_cast<double>(u.dead_bytes) / u.file_bytes : 0.0;
    std::printf("file        %llu bytes, %llu dead (%.1f%%)\n", ull(u.file_bytes),
                ull(u.dead_bytes), dead_pct);
    if (const std::optional<uint64_t> torn = db.torn_at()) {
        // The bytes are left for the file's writer: a block it was landing as they were read, or
        // a tear its next open cuts (engine/open.cc).
        std::printf(
            "torn        at offset %llu: the %llu bytes after it not read, left in the file\n",
            ull(*torn), ull(u.file_bytes - *torn));
    }
    ReadView view = db.read();
    for (const CollectionInfo& c : view.collections()) {
        std::printf("collection  %s (id %u): %llu rows, next id %llu\n", c.name.c_str(), c.id.v,
                    ull(c.rows), ull(c.next_id));
        const Schema* s = view.schema(c.id);
        for (const FieldDesc& f : s->fields) {
            if (!f.dropped) {
                std::printf("  field     %s\n", ql::describe_field(f).definition.c_str());
            }
        }
    }
}

// The records a pass read, by kind: how many and their bytes; graph records are the vector
// indexes' saved graphs (only each field's last one is read on open).
void print_records(const FileSurvey& s) {
    std::map<uint8_t, std::pair<uint64_t, uint64_t>> by_kind;
    for (const RecordSpan& r : s.records) {
        auto& [n, bytes] = by_kind[r.kind];
        ++n;
        bytes += r.framed;
    }
    std::printf("records     %llu", ull(s.records.size()));
    for (const auto& [kind, nb] : by_kind) {
        std::printf(", %s %llu (%llu bytes)", format::kind_name(static_cast<format::Kind>(kind)),
                    ull(nb.first), ull(nb.second));
    }
    std::printf("\n");
    if (s.image_end) std::printf("image       bytes 64 to %llu\n", ull(s.image_end));
    const uint64_t graphs = by_kind.contains(static_cast<uint8_t>(format::Kind::graph))
                                ? by_kind[static_cast<uint8_t>(format::Kind::graph)].first
                                : 0;
    std::printf("graphs      %llu graph record%s\n", ull(graphs), graphs == 1 ? "" : "s");
}

Command file_command(std::string_view name, std::string_view args, std::string_view summary,
                     std::string_view details, std::vector<Option> options = {}) {
    return Command{name, args, summary, details, std::move(options), 1, 1};
}

// The first offset after the image region where a record may start.
uint64_t appended_from(const FileSurvey& s) {
    return s.image_end ? s.image_end : format::kHeaderBytes;
}

// Whether `at` is a record's start that cut may cut at, else why not.
std::string cut_refusal(const FileSurvey& s, uint64_t at) {
    const std::optional<uint64_t> fault_at = s.fault.is_ok() || s.fault.code() != Code::corruption
                                                 ? std::nullopt
                                                 : std::optional<uint64_t>(s.fault.detail().offset);
    if (fault_at && *fault_at < appended_from(s)) {
        return "the file is damaged inside its image (" + s.fault.to_string() +
               "): no cut mends it; restore it from a backup";
    }
    if (at < appended_from(s)) {
        return "offset " + std::to_string(at) + " is inside the file's " +
               (s.image_end ? "image" : "header") + ", which ends at " +
               std::to_string(appended_from(s));
    }
    if (fault_at && at > *fault_at) {
        return "the file is damaged at offset " + std::to_string(*fault_at) + ", before " +
               std::to_string(at) + ": cut there or before";
    }
    bool boundary = (fault_at && at == *fault_at) || (s.torn_at && at == *s.torn_at);
    uint64_t before = appended_from(s), after = s.file_bytes;
    bool history_kept = false;
    for (const RecordSpan& r : s.records) {
        if (r.offset == at) boundary = true;
        if (r.offset < at) {
            before = r.offset;
            if (r.kind == static_cast<uint8_t>(format::Kind::history)) history_kept = true;
        } else if (r.offset > at && r.offset < after) {
            after = r.offset;
        }
    }
    if (!boundary) {
        return "offset " + std::to_string(at) + " is not where a record starts (records start at " +
               std::to_string(before) + " and " + std::to_string(after) + ")";
    }
    if (!history_kept) {
        return "cutting at " + std::to_string(at) + " would leave no history record";
    }
    return {};
}

// The bytes of `file` from `at` to `end` into `<path>.cut-<at>`, fsynced, the folder too.
Status save_tail(Fs& fs, File& file, const std::string& path, uint64_t at, uint64_t end,
                 std::string& saved) {
    saved = path + ".cut-" + std::to_string(at);
    FENEC_ASSIGN_OR_RETURN(std::unique_ptr<File> out, fs.open(saved, OpenMode::create_new));
    std::vector<std::byte> buf(1 << 20);
    Progress progress("save " + saved, end - at);
    for (uint64_t p = at; p < end;) {
        const uint64_t n = std::min<uint64_t>(buf.size(), end - p);
        FENEC_RETURN_IF_ERROR(file.read_at(p, {buf.data(), n}));
        FENEC_RETURN_IF_ERROR(out->append({buf.data(), n}));
        progress.add(n);
        p += n;
    }
    FENEC_RETURN_IF_ERROR(out->sync());
    return fs.sync_dir(dir_of(saved));
}

}  // namespace

const Command& verify_command() {
    static const Command c = file_command(
        "verify", "FILE", "replay every record of a tenant file; name the first fault",
        "Reads the file as a node opens it, every record checked and applied, without taking\n"
        "its lock or writing anything. Exit 0 when it is whole (a torn tail, which the node's\n"
        "next open cuts, is said and is not a fault); exit 1 naming the offset and the fault\n"
        "where it is damaged (`fenec cut FILE --at OFFSET` drops a damaged tail).");
    return c;
}

int verify_main(int argc, char** argv) {
    const Command& c = verify_command();
    Args args;
    if (auto exit = read_args(c, argc, argv, args)) return *exit;
    const std::string& path = args.positional[0];
    auto s = Database::survey(posix_fs(), path);
    if (!s.is_ok()) return failed(c.name, path + ": " + s.status().to_string());
    if (!s->fault.is_ok()) {
        std::string why = path + ": " + s->fault.to_string();
        if (s->fault.code() == Code::corruption && s->fault.detail().offset >= appended_from(*s)) {
            why += " (`fenec cut " + path + " --at " + std::to_string(s->fault.detail().offset) +
                   "` drops it and what follows)";
        }
        return failed(c.name, why);
    }
    OpenOptions options;
    options.read_only = true;
    auto db = Database::open(path, options);
    if (!db.is_ok()) return failed(c.name, path + ": " + db.status().to_string());
    std::printf("%s: whole: %llu records, seq %llu, history %s, lineage %s, %llu bytes\n",
                path.c_str(), ull(s->records.size()), ull((*db)->seq().v),
                format::hex16((*db)->history().current().v).c_str(),
                format::hex16((*db)->lineage().v).c_str(), ull(s->file_bytes));
    if (s->torn_at) {
        std::printf("%s: torn tail at offset %llu (%llu bytes): the next open cuts it\n",
                    path.c_str(), ull(*s->torn_at), ull(s->file_bytes - *s->torn_at));
    }
    return exit_ok;
}

const Command& inspect_command() {
    static const Command c = file_command(
        "inspect", "FILE",
        "print a tenant file's header, history, records, graphs, dead share and collections",
        "Read-only: no lock is taken and nothing is cut, so it reads a file a node has open.\n"
        "A damaged file prints the records read before the damage and exits 1.");
    return c;
}

int inspect_main(int argc, char** argv) {
    const Command& c = inspect_command();
    Args args;
    if (auto exit = read_args(c, argc, argv, args)) return *exit;
    const std::string& path = args.positional[0];
    auto s = Database::survey(posix_fs(), path);
    if (!s.is_ok()) return failed(c.name, path + ": " + s.status().to_string());
    if (!s->fault.is_ok()) {
        print_records(*s);
        return failed(c.name, path + ": " + s->fault.to_string());
    }
    OpenOptions options;
    options.read_only = true;
    auto db = Database::open(path, options);
    if (!db.is_ok()) return failed(c.name, path + ": " + db.status().to_string());
    print_state(**db, true);
    print_records(*s);
    return exit_ok;
}

const Command& cut_command() {
    static const Command c = file_command(
        "cut", "FILE --at OFFSET", "drop a damaged tail of a tenant file by hand",
        "OFFSET must be where a record starts after the file's image, at most where the\n"
        "engine finds damage (`fenec verify` names it), and leave a history record before it;\n"
        "anything else is refused. The bytes cut are saved first, fsynced, as\n"
        "FILE.cut-OFFSET beside the file; then the file is truncated, fsynced and verified.\n"
        "The file's lock is taken as a node takes it: stop the node serving it first.\n"
        "Writes in the bytes cut are lost to the file.",
        {{"--at", "OFFSET", "where the cut starts"}});
    return c;
}

int cut_main(int argc, char** argv) {
    const Command& c = cut_command();
    Args args;
    if (auto exit = read_args(c, argc, argv, args)) return *exit;
    const std::string& path = args.positional[0];
    const std::optional<std::string> at_text = args.value("--at");
    if (!at_text) return usage_error(c, "name the offset: --at OFFSET");
    uint64_t at = 0;
    if (at_text->empty() || at_text->find_first_not_of("0123456789") != std::string::npos ||
        at_text->size() > 19) {
        return usage_error(c, "--at takes a byte offset, not `" + *at_text + "`");
    }
    at = std::stoull(*at_text);
    Fs& fs = posix_fs();
    auto file = fs.open(path, OpenMode::read_write);
    if (!file.is_ok()) return failed(c.name, path + ": " + file.status().to_string());
    if (Status st = fs.lock(**file); !st.is_ok()) return failed(c.name, open_failure(path, st));
    auto s = Database::survey(fs, path);
    if (!s.is_ok()) return failed(c.name, path + ": " + s.status().to_string());
    if (at >= s->file_bytes) {
        return failed(c.name, path + " is " + std::to_string(s->file_bytes) +
                                  " bytes: nothing at or after offset " + std::to_string(at));
    }
    if (std::string why = cut_refusal(*s, at); !why.empty()) return failed(c.name, why);
    std::string saved;
    if (Status st = save_tail(fs, **file, path, at, s->file_bytes, saved); !st.is_ok()) {
        return failed(c.name, "the bytes to cut were not saved, nothing cut: " + st.to_string());
    }
    if (Status st = (*file)->truncate(at); !st.is_ok()) return failed(c.name, st.to_string());
    if (Status st = (*file)->sync(); !st.is_ok()) return failed(c.name, st.to_string());
    std::printf("cut %s at offset %llu: %llu bytes saved as %s\n", path.c_str(), ull(at),
                ull(s->file_bytes - at), saved.c_str());
    auto after = Database::survey(fs, path);
    if (!after.is_ok() || !after->fault.is_ok()) {
        return failed(c.name, path + " is still damaged: " +
                                  (after.is_ok() ? after->fault : after.status()).to_string());
    }
    std::printf("%s: whole: %llu records, %llu bytes\n", path.c_str(), ull(after->records.size()),
                ull(after->file_bytes));
    return exit_ok;
}

const Command& compact_command() {
    static const Command c = file_command(
        "compact", "FILE", "rewrite a tenant file without its dead bytes",
        "Opens the file as a node does (taking its lock: stop the node serving it first; a torn\n"
        "tail is cut as any open cuts it), rewrites it as one image with only the live rows,\n"
        "and renames the new file into place durably. A node does this on its own past\n"
        "--compact-dead; this is for a file no node serves.");
    return c;
}

int compact_main(int argc, char** argv) {
    const Command& c = compact_command();
    Args args;
    if (auto exit = read_args(c, argc, argv, args)) return *exit;
    const std::string& path = args.positional[0];
    auto db = Database::open(path, OpenOptions{});
    if (!db.is_ok()) return failed(c.name, open_failure(path, db.status()));
    const Usage before = (*db)->usage();
    if (Status st = (*db)->compact(); !st.is_ok()) return failed(c.name, st.to_string());
    const Usage after = (*db)->usage();
    if (Status st = (*db)->close(); !st.is_ok()) return failed(c.name, st.to_string());
    std::printf("compacted %s: %llu bytes (%llu dead) to %llu bytes, seq %llu\n", path.c_str(),
                ull(before.file_bytes), ull(before.dead_bytes), ull(after.file_bytes),
                ull(after.seq.v));
    return exit_ok;
}

namespace {

FieldDesc field(const char* name, BaseType type) {
    FieldDesc f;
    f.name = name;
    f.type = make_type(type);
    return f;
}

int demo_failed(const Status& st) { return failed("demo", st.to_string()); }

}  // namespace

const Command& demo_command() {
    static const Command c = Command{"demo",
                                     "DIR",
                                     "write a demo tenant in DIR/demo.fenec, reopen it, print it",
                                     "Refuses a DIR/demo.fenec that exists: it may be a tenant a "
                                     "node serves.",
                                     {},
                                     1,
                                     1};
    return c;
}

int demo_main(int argc, char** argv) {
    const Command& c = demo_command();
    Args args;
    if (auto exit = read_args(c, argc, argv, args)) return *exit;
    const std::string& dir = args.positional[0];
    if (Status made = posix_fs().make_dirs(dir); !made.is_ok()) return demo_failed(made);
    const std::string path = dir + "/demo.fenec";
    OpenOptions options;
    options.tenant = "demo";
    {
        // Never replaced: a data directory's demo.fenec is the tenant `demo` a node may serve,
        // and one written over under it would lose every write the node answered.
        auto db = Database::create(path, options);
        if (!db.is_ok() && db.status().code() == Code::already_exists) {
            return failed("demo", path +
                                      " exists: demo writes a new file and replaces none (it "
                                      "may be the tenant `demo` a node serves); remove it, "
                                      "or give another DIR");
        }
        if (!db.is_ok()) return demo_failed(db.status());
        auto block = (*db)->begin();
        if (!block.is_ok()) return demo_failed(block.status());
        Schema schema;
        schema.fields = {field("name", BaseType::Text), field("city", BaseType::Text),
                         field("joined", BaseType::Timestamp)};
        auto people = block->create_collection("people", schema);
        if (!people.is_ok()) return demo_failed(people.status());
        const char* names[][2] = {{"Ayşe", "İzmir"}, {"Bob", "Boston"}, {"Chloé", "Lyon"}};
        int64_t t = 1'735'689'600'000;  // 2025-01-01T00:00:00Z
        for (auto& [name, city] : names) {
            auto id = block->insert(*people, std::nullopt,
                                    Doc{{0, Value(name)}, {1, Value(city)}, {2, Timestamp{t}}});
            if (!id.is_ok()) return demo_failed(id.status());
            t += 86'400'000;
        }
        auto landed = block->commit();
        if (!landed.is_ok()) return demo_failed(landed.status());
        std::printf("wrote %s: block of %llu writes landed at seq %llu, %llu bytes, durable\n\n",
                    path.c_str(), ull(landed->last.v - landed->first.v + 1), ull(landed->last.v),
                    ull(landed->bytes));
        if (Status st = (*db)->close(); !st.is_ok()) return demo_failed(st);
    }
    auto db = Database::open(path, options);
    if (!db.is_ok()) return demo_failed(db.status());
    std::printf("reopened %s:\n", path.c_str());
    print_state(**db, false);
    ReadView view = (*db)->read();
    auto people = view.find("people");
    if (!people.is_ok()) return demo_failed(people.status());
    view.scan(*people, [](DocId id, DocView doc) {
        const Value name = doc.get(0), city = doc.get(1);
        std::printf("  row %llu: %s, %s\n", ull(id.v), std::get<std::string>(name.rep).c_str(),
                    std::get<std::string>(city.rep).c_str());
        return true;
    });
    return exit_ok;
}

}  // namespace fenec::tools
