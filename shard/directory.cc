// shard/directory.cc: the directory file (router.md §4) through the engine's public API: the file
// is created with every collection of §4.1, written only with FenecQL blocks (ql::Executor), each
// synced before the maps change, and read whole into the maps when opened.
#include "shard/directory.h"

#include <filesystem>
#include <random>
#include <variant>
#include <vector>

#include "engine/database.h"
#include "engine/format.h"
#include "index/index_set.h"
#include "ql/executor.h"
#include "ql/parser.h"

namespace fenec::shard {

namespace {

using engine::Code;
using engine::Status;
using engine::Value;

// §4.1's collections. `by` is a reserved word of FenecQL, so it is written quoted.
constexpr std::string_view kSchema[] = {
    "create collection directory (name text @unique, id text, scope text, format int, starts int)",
    "create collection terms (term int @unique, history text, at timestamp, `by` text)",
    "create collection nodes (name text @unique, addr text, token text, region text, zone text, "
    "lease text)",
    "create collection pairs (node text @unique, standby text)",
    "create collection tenants (name text @unique, node text @hash, state text, moving_to text, "
    "lineage text, forked text, failed_from text, quota json)",
    "create collection replicas (tenant text @unique, node text)",
    "create collection regions (name text @unique, routers [text])",
    "create collection leases (name text @unique, ms int, at timestamp, `by` text)",
};

uint64_t random_u64() {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

std::string text_of(const Value& v) {
    if (const auto* s = std::get_if<std::string>(&v.rep)) return *s;
    return "";
}
int64_t int_of(const Value& v) {
    if (const auto* i = std::get_if<int64_t>(&v.rep)) return *i;
    return 0;
}

// A table's rows as column name → value.
struct Rows {
    const ql::Table& table;
    size_t column(std::string_view name) const {
        const auto& cols = *table.columns;
        for (size_t i = 0; i < cols.size(); ++i) {
            if (cols[i] == name) return i;
        }
        return SIZE_MAX;
    }
    const Value& at(size_t row, std::string_view name) const {
        static const Value null;
        const size_t c = column(name);
        const auto& cells = table.rows[row].cells;
        return c < cells.size() ? cells[c] : null;
    }
};

Status ql_status(const ql::Error& e) {
    return Status::error(Code::invalid_argument, "the directory refused a statement: " + e.message);
}

}  // namespace

struct Directory::Statement {
    std::string text;
    std::vector<Value> params;
};

bool valid_name(std::string_view name) {
    if (name.empty() || name.size() > 64) return false;
    for (char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
        if (!ok) return false;
    }
    return true;
}

Directory::~Directory() { close(); }

engine::Result<std::unique_ptr<Directory>> Directory::open(const std::string& path) {
    std::unique_ptr<Directory> d(new Directory());
    d->path_ = path;
    d->indexes_ = std::make_unique<index::IndexSet>();
    engine::OpenOptions o;
    o.tenant = "directory";
    o.sync = engine::SyncPolicy::every_block();
    o.hook = d->indexes_.get();
    const bool fresh = !std::filesystem::exists(path);
    auto db = fresh ? engine::Database::create(path, o) : engine::Database::open(path, o);
    if (!db.is_ok()) {
        return Status::error(db.status().code(),
                             "directory " + path + ": " + db.status().to_string());
    }
    d->db_ = std::move(db.value());
    std::lock_guard lock(d->write_mu_);
    if (fresh) {
        std::vector<Statement> create;
        for (std::string_view s : kSchema) create.push_back({std::string(s), {}});
        create.push_back(
            {"insert directory {name: \"self\", id: $1, scope: \"global\", format: $2, "
             "starts: 0}",
             {engine::format::hex16(random_u64()), Value(directory_format)}});
        create.push_back(
            {"insert terms {term: 0, history: $1, at: $2, `by`: \"\"}",
             {engine::format::hex16(random_u64()), engine::Timestamp{d->db_->created_ms()}}});
        if (Status st = d->write_locked(create); !st.is_ok()) return st;
    }
    if (Status st = d->load(); !st.is_ok()) {
        return Status::error(st.code(), "directory " + path + ": " + std::string(st.message()));
    }
    // §2.3 step 4: a leading start is counted before the router serves.
    auto maps = d->maps();
    if (Status st = d->write_locked({{"set directory {starts: $1} where name = \"self\"",
                                      {Value(maps->starts + 1)}}});
        !st.is_ok()) {
        return st;
    }
    auto bumped = std::make_shared<DirectoryMaps>(*maps);
    bumped->starts += 1;
    d->publish(std::move(bumped));
    return d;
}

Status Directory::write_locked(const std::vector<Statement>& statements) {
    if (!db_) return Status::error(Code::read_only, "the directory is closed");
    std::vector<ql::ParsedStatement> parsed;
    parsed.reserve(statements.size());
    for (const Statement& s : statements) {
        auto p = ql::parse(s.text);
        if (!p) return ql_status(p.error());
        parsed.push_back(std::move(p.value()));
    }
    std::vector<ql::Item> items;
    for (size_t i = 0; i < statements.size(); ++i) items.push_back({&parsed[i], statements[i].params});
    ql::Executor ex(*db_, *indexes_);
    ql::BlockOutcome out = ex.run_block(items, {});
    if (out.error) return ql_status(*out.error);
    // every_block syncs as the block lands; a block that did not say so is synced here.
    if (out.landed && !out.durable) {
        if (Status st = db_->sync(); !st.is_ok()) return st;
    }
    return Status::ok();
}

Status Directory::load() {
    auto maps = std::make_shared<DirectoryMaps>();
    ql::Executor ex(*db_, *indexes_);
    auto run = [&](std::string_view text) -> engine::Result<ql::Answer> {
        auto p = ql::parse(text);
        if (!p) return ql_status(p.error());
        auto a = ex.run(p.value(), {});
        if (!a) return ql_status(a.error());
        return std::move(a.value());
    };
    auto self = run("get directory where name = \"self\"");
    if (!self.is_ok()) return self.status();
    if (self->table.rows.empty()) return Status::error(Code::corruption, "no `directory` row");
    Rows d{self->table};
    if (int64_t f = int_of(d.at(0, "format")); f > directory_format) {
        return Status::error(Code::invalid_argument,
                             "format " + std::to_string(f) + " is newer than this router's " +
                                 std::to_string(directory_format));
    }
    maps->id = text_of(d.at(0, "id"));
    maps->scope = text_of(d.at(0, "scope"));
    maps->starts = int_of(d.at(0, "starts"));
    if (maps->scope != "global") {
        return Status::error(Code::invalid_argument,
                             "its scope is `" + maps->scope + "`, and this router keeps `global`");
    }
    auto terms = run("get terms order by term desc limit 1");
    if (!terms.is_ok()) return terms.status();
    if (!terms->table.rows.empty()) maps->term = int_of(Rows{terms->table}.at(0, "term"));
    auto nodes = run("get nodes");
    if (!nodes.is_ok()) return nodes.status();
    Rows n{nodes->table};
    for (size_t i = 0; i < nodes->table.rows.size(); ++i) {
        NodeRow r;
        r.name = text_of(n.at(i, "name"));
        r.addr = text_of(n.at(i, "addr"));
        r.token = text_of(n.at(i, "token"));
        r.region = text_of(n.at(i, "region"));
        r.zone = text_of(n.at(i, "zone"));
        r.lease = text_of(n.at(i, "lease"));
        maps->nodes[r.name] = std::move(r);
    }
    auto tenants = run("get tenants");
    if (!tenants.is_ok()) return tenants.status();
    Rows t{tenants->table};
    for (size_t i = 0; i < tenants->table.rows.size(); ++i) {
        TenantRow r;
        r.name = text_of(t.at(i, "name"));
        r.node = text_of(t.at(i, "node"));
        r.state = text_of(t.at(i, "state"));
        r.moving_to = text_of(t.at(i, "moving_to"));
        r.lineage = text_of(t.at(i, "lineage"));
        maps->tenants[r.name] = std::move(r);
    }
    publish(std::move(maps));
    return Status::ok();
}

void Directory::publish(std::shared_ptr<const DirectoryMaps> maps) {
    std::lock_guard lock(maps_mu_);
    maps_ = std::move(maps);
}

std::shared_ptr<const DirectoryMaps> Directory::maps() const {
    std::lock_guard lock(maps_mu_);
    return maps_;
}

Status Directory::put_node(const NodeRow& node) {
    std::lock_guard lock(write_mu_);
    Status st = write_locked(
        {{"del nodes where name = $1", {node.name}},
         {"insert nodes {name: $1, addr: $2, token: $3, region: $4, zone: $5, lease: $6}",
          {node.name, node.addr, node.token, node.region, node.zone, node.lease}}});
    if (!st.is_ok()) return st;
    auto next = std::make_shared<DirectoryMaps>(*maps());
    next->nodes[node.name] = node;
    publish(std::move(next));
    return Status::ok();
}

Status Directory::remove_node(std::string_view name) {
    std::lock_guard lock(write_mu_);
    Status st = write_locked({{"del nodes where name = $1", {std::string(name)}}});
    if (!st.is_ok()) return st;
    auto next = std::make_shared<DirectoryMaps>(*maps());
    if (auto it = next->nodes.find(name); it != next->nodes.end()) next->nodes.erase(it);
    publish(std::move(next));
    return Status::ok();
}

Status Directory::put_tenant(const TenantRow& t) {
    std::lock_guard lock(write_mu_);
    auto or_null = [](const std::string& s) { return s.empty() ? Value() : Value(s); };
    Status st = write_locked(
        {{"del tenants where name = $1", {t.name}},
         {"insert tenants {name: $1, node: $2, state: $3, moving_to: $4, lineage: $5}",
          {t.name, t.node, t.state, or_null(t.moving_to), or_null(t.lineage)}}});
    if (!st.is_ok()) return st;
    auto next = std::make_shared<DirectoryMaps>(*maps());
    next->tenants[t.name] = t;
    publish(std::move(next));
    return Status::ok();
}

Status Directory::flip_tenant(std::string_view name, const std::string& to) {
    std::lock_guard lock(write_mu_);
    Status st = write_locked({{"set tenants {node: $2, state: \"active\", moving_to: null, "
                               "failed_from: null} where name = $1 require 1",
                               {std::string(name), to}}});
    if (!st.is_ok()) return st;
    auto next = std::make_shared<DirectoryMaps>(*maps());
    if (auto it = next->tenants.find(name); it != next->tenants.end()) {
        it->second.node = to;
        it->second.state = "active";
        it->second.moving_to.clear();
    }
    publish(std::move(next));
    return Status::ok();
}

Status Directory::remove_tenant(std::string_view name) {
    std::lock_guard lock(write_mu_);
    Status st = write_locked({{"del tenants where name = $1", {std::string(name)}}});
    if (!st.is_ok()) return st;
    auto next = std::make_shared<DirectoryMaps>(*maps());
    if (auto it = next->tenants.find(name); it != next->tenants.end()) next->tenants.erase(it);
    publish(std::move(next));
    return Status::ok();
}

void Directory::close() {
    std::lock_guard lock(write_mu_);
    if (!db_) return;
    (void)db_->sync();
    (void)db_->close();
    db_.reset();
}

}  // namespace fenec::shard
