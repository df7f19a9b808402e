// shard/directory.cc: the directory file (router.md §4) through the engine's public API: the file
// is created with every collection of §4.1, written only with FenecQL blocks (ql::Executor), each
// synced before the maps change, and read whole into the maps when opened.
#include "shard/directory.h"

#include <filesystem>
#include <functional>
#include <iostream>
#include <random>
#include <set>
#include <variant>
#include <vector>

#include "engine/database.h"
#include "engine/format.h"
#include "index/index_set.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "shard/copy_counts.h"
#include "shard/log_line.h"

namespace fenec::shard {

namespace {

using engine::Code;
using engine::Status;
using engine::Value;

// Thaws owed (OwedThaw): a collection a file written before it lacks (upgrade_locked).
constexpr std::string_view kThaws =
    "create collection thaws (node text @hash, tenant text @hash, freeze_id text)";
// §4.1's collections. `by` is a reserved word of FenecQL, so it is written quoted.
constexpr std::string_view kSchema[] = {
    "create collection directory (name text @unique, id text, scope text, format int, starts int)",
    "create collection terms (term int @unique, history text, at timestamp, `by` text)",
    "create collection nodes (name text @unique, addr text, token text, region text, zone text, "
    "lease text, token_env text, token_file text)",
    "create collection pairs (node text @unique, standby text)",
    "create collection tenants (name text @unique, node text @hash, state text, moving_to text, "
    "lineage text, forked text, failed_from text, quota json, moving_from text, moving_term int, "
    "moving_freeze text)",
    "create collection replicas (tenant text @unique, node text)",
    "create collection regions (name text @unique, routers [text])",
    "create collection leases (name text @unique, ms int, at timestamp, `by` text)",
    kThaws,
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

// The `quota` field: an object of the Quota's fields, each an int or absent; null for none.
std::optional<Quota> quota_of(const Value& v) {
    const auto* o = std::get_if<engine::Object>(&v.rep);
    if (!o) return std::nullopt;
    Quota q;
    for (size_t i = 0; i < o->keys.size(); ++i) {
        for (size_t f = 0; f < Quota::fields.size(); ++f) {
            const auto* n = std::get_if<int64_t>(&o->values[i].rep);
            if (o->keys[i] == Quota::fields[f] && n && *n >= 0) {
                q.limits[f] = static_cast<uint64_t>(*n);
            }
        }
    }
    return q;
}

Value quota_value(const std::optional<Quota>& q) {
    if (!q) return Value();
    engine::Object o;
    for (size_t f = 0; f < Quota::fields.size(); ++f) {
        if (!q->limits[f]) continue;
        o.keys.emplace_back(Quota::fields[f]);
        o.values.emplace_back(static_cast<int64_t>(*q->limits[f]));
    }
    return Value(std::move(o));
}

Value or_null(const std::string& s) { return s.empty() ? Value() : Value(s); }
// A row's moving_term: null for none (-1).
Value term_value(int64_t term) { return term < 0 ? Value() : Value(term); }
// A row as it is kept: a term only while `moving` (one copied from a row once moving and set
// active again carries none).
TenantRow kept(TenantRow t) {
    if (t.state != "moving") {
        t.moving_term = -1;
        t.moving_freeze.clear();
    }
    return t;
}

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

namespace {

// The engine's options for the directory file: synced at every block, indexed by `indexes`, its
// feed bound by --replication-buffer, opened to follow a primary or as one.
engine::OpenOptions file_options(index::IndexSet& indexes, const DirectoryOpening& how,
                                 bool follower) {
    engine::OpenOptions o;
    o.tenant = "directory";
    o.sync = engine::SyncPolicy::every_block();
    o.hook = &indexes;
    o.feed_bytes = how.feed_bytes;
    o.role = follower ? engine::Role::follower : engine::Role::primary;
    return o;
}

}  // namespace

engine::Result<std::unique_ptr<Directory>> Directory::open(const std::string& path,
                                                           const DirectoryOpening& how) {
    using Role = DirectoryOpening::Role;
    std::unique_ptr<Directory> d(new Directory());
    d->path_ = path;
    d->how_ = how;
    d->indexes_ = std::make_unique<index::IndexSet>();
    // Read first, so every load() (a standby's too) finds the tokens given to this router.
    d->tokens_ = std::make_unique<TokenSidecar>(path + std::string(token_sidecar_suffix));
    if (Status st = d->tokens_->load(); !st.is_ok()) {
        return Status::error(st.code(), "directory " + path + ": " + st.to_string());
    }
    const bool fresh = !std::filesystem::exists(path);
    if (fresh && how.role == Role::follower) {
        // A standby's first start: nothing to read until the primary's image comes (§5.1), and
        // no node asked until its token has come too.
        d->tokens_settled_.store(false, std::memory_order_release);
        d->publish(std::make_shared<DirectoryMaps>());
        return d;
    }
    if (fresh && how.role == Role::promote) {
        return Status::error(Code::not_found,
                             "directory " + path + ": there is no file here to promote");
    }
    // A file to promote is opened as the follower it is, then promoted below, so a standby's file
    // and one that never followed fork alike.
    const engine::OpenOptions o = file_options(*d->indexes_, how, how.role != Role::primary);
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
            {"insert directory {name: \"self\", id: $1, scope: $3, format: $2, starts: 0}",
             {engine::format::hex16(random_u64()), Value(directory_format), how.scope}});
        create.push_back(
            {"insert terms {term: 0, history: $1, at: $2, `by`: \"\"}",
             {engine::format::hex16(random_u64()), engine::Timestamp{d->db_->created_ms()}}});
        if (Status st = d->write_locked(create); !st.is_ok()) return st;
    }
    if (Status st = d->load(); !st.is_ok()) {
        return Status::error(st.code(), "directory " + path + ": " + std::string(st.message()));
    }
    if (how.role == Role::follower) return d;
    if (how.role == Role::promote) {
        auto p = d->promote_locked(how.by, d->db_->created_ms());
        if (!p.is_ok()) return p.status();
        if (Status st = d->upgrade_locked(); !st.is_ok()) return st;
        return d;
    }
    if (Status st = d->upgrade_locked(); !st.is_ok()) {
        return Status::error(st.code(), "directory " + path + ": " + std::string(st.message()));
    }
    // §2.3 step 4: a leading start is counted before the router serves.
    auto maps = d->maps();
    if (Status st = d->write_locked(
            {{"set directory {starts: $1} where name = \"self\"", {Value(maps->starts + 1)}}});
        !st.is_ok()) {
        return st;
    }
    auto bumped = std::make_shared<DirectoryMaps>(*maps);
    bumped->starts += 1;
    d->publish(std::move(bumped));
    return d;
}

bool Directory::ready() const { return ready_.load(std::memory_order_acquire); }

bool Directory::serving() const {
    return ready() && tokens_settled_.load(std::memory_order_acquire);
}

void Directory::settle_tokens() { tokens_settled_.store(true, std::memory_order_release); }

bool Directory::following() const { return following_.load(std::memory_order_acquire); }

std::optional<engine::Position> Directory::position() {
    std::lock_guard lock(write_mu_);
    if (!db_) return std::nullopt;
    return engine::Position{db_->seq(), db_->history().current()};
}

Status Directory::apply(const engine::FeedEntry& entry) {
    std::lock_guard lock(write_mu_);
    if (!db_) return Status::error(Code::invalid_argument, "a change before the directory's image");
    if (Status st = db_->apply(entry); !st.is_ok()) return st;
    return load();
}

Status Directory::adopt_image(std::span<const std::byte> image, uint64_t seq) {
    std::lock_guard lock(write_mu_);
    if (db_) {
        (void)db_->close();
        db_.reset();
    }
    // The old file's indexes go with it: the image's are built as it opens.
    indexes_ = std::make_unique<index::IndexSet>();
    engine::ImageInfo info;
    auto db = engine::Database::install_open(
        image, path_ + ".incoming", path_, engine::InstallMode::replace,
        file_options(*indexes_, how_, true),
        [&](const engine::ImageInfo& got) {
            if (got.seq.v == seq) return Status::ok();
            return Status::error(Code::corruption,
                                 "the image's seq is " + std::to_string(got.seq.v) +
                                     ", its end frame said " + std::to_string(seq));
        },
        info);
    if (!db.is_ok()) {
        // The old file was left in place; it is opened again, as it stood, to be followed on.
        auto again = engine::Database::open(path_, file_options(*indexes_, how_, true));
        if (again.is_ok()) {
            db_ = std::move(again.value());
            (void)load();
        }
        return db.status();
    }
    db_ = std::move(db.value());
    // The image's history is the primary's, as a primary's: this file now follows it.
    if (Status st = db_->follow(db_->history()); !st.is_ok()) return st;
    return load();
}

engine::Result<Promoted> Directory::promote(const std::string& by, int64_t at_ms) {
    std::lock_guard lock(write_mu_);
    if (!db_) {
        return Status::error(Code::invalid_argument,
                             "the directory has not arrived from the primary yet: there is "
                             "nothing to promote");
    }
    return promote_locked(by, at_ms);
}

engine::Result<Promoted> Directory::promote_locked(const std::string& by, int64_t at_ms) {
    // Opened as a follower, the file forks whether or not its history is a replica's yet.
    auto forked = db_->promote();
    if (!forked.is_ok()) return forked.status();
    promoted_ = true;
    Promoted p;
    p.history = engine::format::hex16(forked->current().v);
    auto maps = this->maps();
    p.term = maps->term + 1;
    if (Status st = write_locked(
            {{"insert terms {term: $1, history: $2, at: $3, `by`: $4}",
              {Value(p.term), p.history, engine::Timestamp{at_ms}, by}},
             {"set directory {starts: $1} where name = \"self\"", {Value(maps->starts + 1)}}});
        !st.is_ok()) {
        return st;
    }
    if (Status st = load(); !st.is_ok()) return st;
    if (Status st = upgrade_locked(); !st.is_ok()) return st;
    // It leads now: the tokens it holds are the ones there are (the operator adds any missing).
    settle_tokens();
    return p;
}

Status Directory::upgrade_locked() {
    bool lacks_fields = false, lacks_moving_from = false, lacks_moving_term = false;
    bool lacks_moving_freeze = false, lacks_thaws = false;
    {
        const engine::ReadView view = db_->read();  // released before the write below
        auto nodes = view.find("nodes");
        if (!nodes.is_ok()) return nodes.status();
        const engine::Schema* schema = view.schema(*nodes);
        lacks_fields = schema == nullptr || !schema->slot_of("token_file");
        auto tenants = view.find("tenants");
        if (!tenants.is_ok()) return tenants.status();
        const engine::Schema* t = view.schema(*tenants);
        lacks_moving_from = t == nullptr || !t->slot_of("moving_from");
        lacks_moving_term = t == nullptr || !t->slot_of("moving_term");
        lacks_moving_freeze = t == nullptr || !t->slot_of("moving_freeze");
        lacks_thaws = !view.find("thaws").is_ok();
    }
    std::vector<Statement> change;
    if (lacks_fields) {
        change.push_back({"alter collection nodes add field token_env text", {}});
        change.push_back({"alter collection nodes add field token_file text", {}});
    }
    // A file written before an import recorded where it came from (the global router's settling).
    if (lacks_moving_from) {
        change.push_back({"alter collection tenants add field moving_from text", {}});
    }
    // A file written before a move's mark named the term it was made under (MoveRows::by_row).
    if (lacks_moving_term) {
        change.push_back({"alter collection tenants add field moving_term int", {}});
    }
    // A file written before a move's mark named its freeze (settle_move's thaw, an owed one).
    if (lacks_moving_freeze) {
        change.push_back({"alter collection tenants add field moving_freeze text", {}});
    }
    // A file written before the thaws an undone move owes were kept in it (Move::roll_back).
    if (lacks_thaws) change.push_back({std::string(kThaws), {}});
    // Each secret reaches the sidecar, durably, before its row lets go of it.
    auto maps = this->maps();
    for (const std::string& name : tokens_in_rows_) {
        auto it = maps->nodes.find(name);
        if (it == maps->nodes.end()) continue;
        if (!tokens_->get(name)) {
            if (Status st = tokens_->put(name, it->second.token); !st.is_ok()) return st;
        }
        change.push_back({"set nodes {token: $1} where name = $2", {Value(), name}});
    }
    if (change.empty()) return Status::ok();
    if (Status st = write_locked(change); !st.is_ok()) return st;
    return load();
}

std::string Directory::token_of(const NodeRow& row, const std::string& in_row,
                                const DirectoryMaps* before) const {
    if (row.token_env.empty() && row.token_file.empty()) {
        if (std::optional<std::string> t = tokens_->get(row.name)) return *t;
        return in_row;
    }
    auto token = read_node_token(row.token_env, row.token_file);
    if (token.is_ok()) return *token;
    // Said when the row or what could be read changes, not at every change of the directory.
    const NodeRow* was = nullptr;
    if (before) {
        auto it = before->nodes.find(row.name);
        if (it != before->nodes.end()) was = &it->second;
    }
    if (!was || was->token_env != row.token_env || was->token_file != row.token_file ||
        !was->token.empty()) {
        log_line("node `" + row.name + "`: " + std::string(token.status().message()) +
                 ": this router calls it without its admin token");
    }
    return "";
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
    for (size_t i = 0; i < statements.size(); ++i)
        items.push_back({&parsed[i], statements[i].params});
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
        return Status::error(Code::invalid_argument, "format " + std::to_string(f) +
                                                         " is newer than this router's " +
                                                         std::to_string(directory_format));
    }
    maps->id = text_of(d.at(0, "id"));
    maps->scope = text_of(d.at(0, "scope"));
    maps->starts = int_of(d.at(0, "starts"));
    if (maps->scope != how_.scope) {
        // R24, §2.3 step 2: a region's directory opened by the global router, or the reverse, or
        // another region's: each would place tenants the other one owns.
        return Status::error(
            Code::invalid_argument,
            "its scope is `" + maps->scope + "`, and this router keeps `" + how_.scope + "`" +
                (how_.scope == "global" ? " (started without --region)"
                                        : " (--region " + how_.scope + ")") +
                ": open it with the router that keeps that scope");
    }
    auto terms = run("get terms order by term desc limit 1");
    if (!terms.is_ok()) return terms.status();
    if (!terms->table.rows.empty()) {
        maps->term = int_of(Rows{terms->table}.at(0, "term"));
        maps->history = text_of(Rows{terms->table}.at(0, "history"));
    }
    auto nodes = run("get nodes");
    if (!nodes.is_ok()) return nodes.status();
    Rows n{nodes->table};
    const std::shared_ptr<const DirectoryMaps> before = this->maps();
    tokens_in_rows_.clear();
    for (size_t i = 0; i < nodes->table.rows.size(); ++i) {
        NodeRow r;
        r.name = text_of(n.at(i, "name"));
        r.addr = text_of(n.at(i, "addr"));
        r.token_env = text_of(n.at(i, "token_env"));
        r.token_file = text_of(n.at(i, "token_file"));
        const std::string in_row = text_of(n.at(i, "token"));
        if (!in_row.empty()) tokens_in_rows_.push_back(r.name);
        r.token = token_of(r, in_row, before.get());
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
        r.moving_from = text_of(t.at(i, "moving_from"));  // null in rows (and files) before it
        r.lineage = text_of(t.at(i, "lineage"));
        r.forked = text_of(t.at(i, "forked"));
        r.failed_from = text_of(t.at(i, "failed_from"));
        r.quota = quota_of(t.at(i, "quota"));
        const Value& term = t.at(i, "moving_term");  // null in rows (and files) before it
        r.moving_term = std::get_if<int64_t>(&term.rep) ? int_of(term) : -1;
        r.moving_freeze = text_of(t.at(i, "moving_freeze"));  // null in rows (and files) before it
        maps->tenants[r.name] = std::move(r);
    }
    auto pairs = run("get pairs");
    if (!pairs.is_ok()) return pairs.status();
    Rows p{pairs->table};
    for (size_t i = 0; i < pairs->table.rows.size(); ++i) {
        maps->pairs[text_of(p.at(i, "node"))] = text_of(p.at(i, "standby"));
    }
    auto replicas = run("get replicas");
    if (!replicas.is_ok()) return replicas.status();
    Rows rp{replicas->table};
    for (size_t i = 0; i < replicas->table.rows.size(); ++i) {
        maps->replicas[text_of(rp.at(i, "tenant"))] = text_of(rp.at(i, "node"));
    }
    auto regions = run("get regions");
    if (!regions.is_ok()) return regions.status();
    Rows rg{regions->table};
    for (size_t i = 0; i < regions->table.rows.size(); ++i) {
        std::vector<std::string> routers;
        if (const auto* l = std::get_if<engine::List>(&rg.at(i, "routers").rep)) {
            for (const Value& v : l->items) routers.push_back(text_of(v));
        }
        maps->regions[text_of(rg.at(i, "name"))] = std::move(routers);
    }
    auto record = run("get leases where name = \"record\"");
    if (!record.is_ok()) return record.status();
    if (!record->table.rows.empty()) {
        Rows l{record->table};
        const Value& at = l.at(0, "at");
        const auto* ts = std::get_if<engine::Timestamp>(&at.rep);
        maps->lease_record =
            LeaseRecord{int_of(l.at(0, "ms")), ts ? ts->ms : 0, text_of(l.at(0, "by"))};
    }
    // A follower's file from a primary written before the collection was (upgrade_locked).
    if (db_->read().find("thaws").is_ok()) {
        auto thaws = run("get thaws");
        if (!thaws.is_ok()) return thaws.status();
        Rows th{thaws->table};
        for (size_t i = 0; i < thaws->table.rows.size(); ++i) {
            maps->thaws[text_of(th.at(i, "node"))][text_of(th.at(i, "tenant"))].insert(
                text_of(th.at(i, "freeze_id")));
        }
    }
    publish(std::move(maps));
    return Status::ok();
}

void Directory::publish(std::shared_ptr<DirectoryMaps> maps) {
    const bool following = how_.role == DirectoryOpening::Role::follower && !promoted_;
    // A follower places nothing, and rebuilds its maps from the file at each change it applies:
    // no counts (placement would count afresh); its promotion's maps are counted.
    if (!following) maps->counted = recount(*maps);
    {
        std::lock_guard lock(maps_mu_);
        maps_ = std::move(maps);
    }
    ready_.store(db_ != nullptr, std::memory_order_release);
    following_.store(following, std::memory_order_release);
}

std::shared_ptr<const DirectoryMaps> Directory::maps() const {
    std::lock_guard lock(maps_mu_);
    return maps_;
}

Status Directory::put_node(const NodeRow& node) {
    std::lock_guard lock(write_mu_);
    const bool named = !node.token_env.empty() || !node.token_file.empty();
    // A token given in the clear goes to this router's sidecar, never into the replicated file.
    if (!named) {
        // No token (a node whose admin plane takes none) keeps no line.
        Status st =
            node.token.empty() ? tokens_->remove(node.name) : tokens_->put(node.name, node.token);
        if (!st.is_ok()) return st;
    }
    Status st = write_locked(
        {{"del nodes where name = $1", {node.name}},
         {"insert nodes {name: $1, addr: $2, region: $3, zone: $4, lease: $5, token_env: $6, "
          "token_file: $7}",
          {node.name, node.addr, node.region, node.zone, node.lease, or_null(node.token_env),
           or_null(node.token_file)}}});
    if (!st.is_ok()) return st;
    // The row names where its token is read: a secret kept for it before is dropped. Left
    // behind, it is never read (the row's names come first) and goes with the node's removal.
    if (named) tokens_->remove(node.name).ignore();
    auto next = std::make_shared<DirectoryMaps>(*maps());
    next->nodes[node.name] = node;
    publish(std::move(next));
    return Status::ok();
}

TokenSidecar::Tokens Directory::clear_tokens() {
    std::lock_guard lock(write_mu_);
    return tokens_->all();
}

Status Directory::take_tokens(const TokenSidecar::Tokens& tokens) {
    std::lock_guard lock(write_mu_);
    if (tokens != tokens_->all()) {
        if (Status st = tokens_->replace(tokens); !st.is_ok()) return st;
        if (db_) {
            if (Status st = load(); !st.is_ok()) return st;
        }
    }
    settle_tokens();
    return Status::ok();
}

Status Directory::remove_node(std::string_view name) {
    std::lock_guard lock(write_mu_);
    const std::string n(name);
    // No pair, replica or owed thaw outlives the node it names (§6.3).
    Status st = write_locked({{"del nodes where name = $1", {n}},
                              {"del pairs where node = $1 or standby = $1", {n}},
                              {"del replicas where node = $1", {n}},
                              {"del thaws where node = $1", {n}}});
    if (!st.is_ok()) return st;
    // The node's token is nobody's now; a failure leaves a line no row reads.
    tokens_->remove(n).ignore();
    return change([&](DirectoryMaps& m) {
        m.nodes.erase(n);
        std::erase_if(m.pairs, [&](const auto& p) { return p.first == n || p.second == n; });
        erase_if(m.replicas, [&](const auto& r) { return r.second == n; });
        m.thaws.erase(n);
    });
}

// A row placing a tenant on a node this directory does not have (one handed to its region's
// router meanwhile, §11.9) would route it nowhere: refused under the writers' lock, so no write
// lands between a hand-over's check and its block.
Status placeable(const DirectoryMaps& maps, const std::string& node) {
    if (node.empty() || node.starts_with('@') || maps.nodes.contains(node)) return Status::ok();
    return Status::error(Code::not_found, "node `" + node + "` is not in the directory");
}

Status Directory::put_tenant(const TenantRow& row, const std::optional<OwedThaw>& owed) {
    const TenantRow t = kept(row);
    std::lock_guard lock(write_mu_);
    if (Status st = placeable(*maps(), t.node); !st.is_ok()) return st;
    std::vector<Statement> block = {
        {"del tenants where name = $1", {t.name}},
        {"insert tenants {name: $1, node: $2, state: $3, moving_to: $4, lineage: $5, forked: $6, "
         "failed_from: $7, quota: $8, moving_from: $9, moving_term: $10, moving_freeze: $11}",
         {t.name, t.node, t.state, or_null(t.moving_to), or_null(t.lineage), or_null(t.forked),
          or_null(t.failed_from), quota_value(t.quota), or_null(t.moving_from),
          term_value(t.moving_term), or_null(t.moving_freeze)}}};
    if (owed) {
        block.push_back({"insert thaws {node: $1, tenant: $2, freeze_id: $3}",
                         {owed->node, owed->tenant, owed->freeze_id}});
    }
    Status st = write_locked(block);
    if (!st.is_ok()) return st;
    auto next = std::make_shared<DirectoryMaps>(*maps());
    next->tenants[t.name] = t;
    if (owed) next->thaws[owed->node][owed->tenant].insert(owed->freeze_id);
    publish(std::move(next));
    return Status::ok();
}

Status Directory::paid_thaw(const OwedThaw& thaw) {
    std::lock_guard lock(write_mu_);
    Status st = write_locked({{"del thaws where node = $1 and tenant = $2 and freeze_id = $3",
                               {thaw.node, thaw.tenant, thaw.freeze_id}}});
    if (!st.is_ok()) return st;
    return change([&](DirectoryMaps& m) {
        auto n = m.thaws.find(thaw.node);
        if (n == m.thaws.end()) return;
        if (auto t = n->second.find(thaw.tenant); t != n->second.end()) {
            t->second.erase(thaw.freeze_id);
            if (t->second.empty()) n->second.erase(t);
        }
        if (n->second.empty()) m.thaws.erase(n);
    });
}

Status Directory::flip_tenant(std::string_view name, const std::string& to) {
    std::lock_guard lock(write_mu_);
    if (Status st = placeable(*maps(), to); !st.is_ok()) return st;
    Status st = write_locked(
        {{"set tenants {node: $2, state: \"active\", moving_to: null, "
          "moving_from: null, failed_from: null, moving_term: null, moving_freeze: null} "
          "where name = $1 "
          "require 1",
          {std::string(name), to}}});
    if (!st.is_ok()) return st;
    auto next = std::make_shared<DirectoryMaps>(*maps());
    if (auto it = next->tenants.find(name); it != next->tenants.end()) {
        it->second.node = to;
        it->second.state = "active";
        it->second.moving_to.clear();
        it->second.moving_from.clear();
        it->second.failed_from.clear();
        it->second.moving_term = -1;
        it->second.moving_freeze.clear();
    }
    publish(std::move(next));
    return Status::ok();
}

Status Directory::fail_over_tenant(std::string_view name, const std::string& to,
                                   const std::string& from, const std::string& history) {
    std::lock_guard lock(write_mu_);
    const std::string tenant(name);
    // An import not yet activated stays so on its new node: no lease names it before the move
    // across regions has moved its home (shard/handoff.h).
    const auto now = maps();
    const auto row = now->tenants.find(name);
    const std::string state =
        row != now->tenants.end() && row->second.state == "importing" ? "importing" : "active";
    Status st =
        write_locked({{"set tenants {node: $2, state: $5, moving_to: null, "
                       "moving_term: null, moving_freeze: null, failed_from: $3, forked: $4} "
                       "where name = $1 "
                       "require 1",
                       {tenant, to, from, or_null(history), state}},
                      {"del replicas where tenant = $1", {tenant}}});
    if (!st.is_ok()) return st;
    return change([&](DirectoryMaps& m) {
        if (auto it = m.tenants.find(name); it != m.tenants.end()) {
            it->second.node = to;
            it->second.state = state;
            it->second.moving_to.clear();
            it->second.moving_term = -1;
            it->second.moving_freeze.clear();
            it->second.failed_from = from;
            it->second.forked = history;
        }
        if (auto it = m.replicas.find(name); it != m.replicas.end()) m.replicas.erase(it);
    });
}

Status Directory::set_lineage(std::string_view name, const std::string& lineage) {
    std::lock_guard lock(write_mu_);
    Status st = write_locked({{"set tenants {lineage: $2} where name = $1 require 1",
                               {std::string(name), or_null(lineage)}}});
    if (!st.is_ok()) return st;
    return change([&](DirectoryMaps& m) {
        if (auto it = m.tenants.find(name); it != m.tenants.end()) it->second.lineage = lineage;
    });
}

Status Directory::set_quota(std::string_view name, const std::optional<Quota>& q) {
    std::lock_guard lock(write_mu_);
    Status st = write_locked({{"set tenants {quota: $2} where name = $1 require 1",
                               {std::string(name), quota_value(q)}}});
    if (!st.is_ok()) return st;
    return change([&](DirectoryMaps& m) {
        if (auto it = m.tenants.find(name); it != m.tenants.end()) it->second.quota = q;
    });
}

std::vector<std::string> Directory::keep_replicas(std::vector<Statement>& statements,
                                                  std::string_view node,
                                                  const std::vector<std::string>& kept,
                                                  const std::string& kept_on) {
    std::vector<std::string> out;
    if (kept_on.empty()) return out;
    // Read under write_mu_, which every write takes: a tenant deleted, moved off `node`, failed
    // over or given a replica since `kept` was listed, or a pair changed meanwhile, is left out.
    const std::shared_ptr<const DirectoryMaps> now = maps();
    const auto pair = now->pairs.find(node);
    if (pair == now->pairs.end() || pair->second != kept_on) return out;
    for (const std::string& t : kept) {
        const auto row = now->tenants.find(t);
        if (row == now->tenants.end() || row->second.node != node || now->replicas.contains(t)) {
            continue;
        }
        statements.push_back({"del replicas where tenant = $1", {t}});
        statements.push_back({"insert replicas {tenant: $1, node: $2}", {t, kept_on}});
        out.push_back(t);
    }
    return out;
}

Status Directory::put_pair(std::string_view node, const std::string& standby,
                           const std::vector<std::string>& kept, const std::string& kept_on) {
    std::lock_guard lock(write_mu_);
    const std::string n(node);
    std::vector<Statement> statements;
    const std::vector<std::string> keep = keep_replicas(statements, n, kept, kept_on);
    statements.push_back({"del pairs where node = $1", {n}});
    statements.push_back({"insert pairs {node: $1, standby: $2}", {n, standby}});
    Status st = write_locked(statements);
    if (!st.is_ok()) return st;
    return change([&](DirectoryMaps& m) {
        m.pairs[n] = standby;
        for (const std::string& t : keep) m.replicas[t] = kept_on;
    });
}

Status Directory::remove_pair(std::string_view node, const std::vector<std::string>& kept,
                              const std::string& kept_on) {
    std::lock_guard lock(write_mu_);
    std::vector<Statement> statements;
    const std::vector<std::string> keep = keep_replicas(statements, node, kept, kept_on);
    statements.push_back({"del pairs where node = $1", {std::string(node)}});
    Status st = write_locked(statements);
    if (!st.is_ok()) return st;
    return change([&](DirectoryMaps& m) {
        if (auto it = m.pairs.find(node); it != m.pairs.end()) m.pairs.erase(it);
        for (const std::string& t : keep) m.replicas[t] = kept_on;
    });
}

Status Directory::put_replica(std::string_view tenant, const std::string& node) {
    std::lock_guard lock(write_mu_);
    const std::string t(tenant);
    Status st = write_locked({{"del replicas where tenant = $1", {t}},
                              {"insert replicas {tenant: $1, node: $2}", {t, node}}});
    if (!st.is_ok()) return st;
    return change([&](DirectoryMaps& m) { m.replicas[t] = node; });
}

Status Directory::remove_replica(std::string_view tenant) {
    std::lock_guard lock(write_mu_);
    Status st = write_locked({{"del replicas where tenant = $1", {std::string(tenant)}}});
    if (!st.is_ok()) return st;
    return change([&](DirectoryMaps& m) {
        if (auto it = m.replicas.find(tenant); it != m.replicas.end()) m.replicas.erase(it);
    });
}

Status Directory::put_region(std::string_view name, const std::vector<std::string>& routers) {
    std::lock_guard lock(write_mu_);
    const std::string r(name);
    engine::List list;
    for (const std::string& url : routers) list.items.emplace_back(url);
    Status st = write_locked({{"del regions where name = $1", {r}},
                              {"insert regions {name: $1, routers: $2}", {r, Value(list)}}});
    if (!st.is_ok()) return st;
    return change([&](DirectoryMaps& m) { m.regions[r] = routers; });
}

Status Directory::remove_region(std::string_view name) {
    std::lock_guard lock(write_mu_);
    Status st = write_locked({{"del regions where name = $1", {std::string(name)}}});
    if (!st.is_ok()) return st;
    return change([&](DirectoryMaps& m) {
        if (auto it = m.regions.find(name); it != m.regions.end()) m.regions.erase(it);
    });
}

Status Directory::adopt_rows(const RegionRows& rows) {
    std::lock_guard lock(write_mu_);
    std::vector<Statement> block;
    for (const NodeRow& n : rows.nodes) {
        const bool named = !n.token_env.empty() || !n.token_file.empty();
        if (!named && !n.token.empty()) {
            if (Status st = tokens_->put(n.name, n.token); !st.is_ok()) return st;
        }
        block.push_back({"del nodes where name = $1", {n.name}});
        block.push_back({"insert nodes {name: $1, addr: $2, region: $3, zone: $4, lease: $5, "
                         "token_env: $6, token_file: $7}",
                         {n.name, n.addr, n.region, n.zone, n.lease, or_null(n.token_env),
                          or_null(n.token_file)}});
    }
    for (const auto& [node, standby] : rows.pairs) {
        block.push_back({"del pairs where node = $1", {node}});
        block.push_back({"insert pairs {node: $1, standby: $2}", {node, standby}});
    }
    for (const auto& [tenant, node] : rows.replicas) {
        block.push_back({"del replicas where tenant = $1", {tenant}});
        block.push_back({"insert replicas {tenant: $1, node: $2}", {tenant, node}});
    }
    for (const TenantRow& row : rows.tenants) {
        const TenantRow t = kept(row);
        block.push_back({"del tenants where name = $1", {t.name}});
        block.push_back(
            {"insert tenants {name: $1, node: $2, state: $3, moving_to: $4, lineage: "
             "$5, forked: $6, failed_from: $7, quota: $8, moving_from: $9, moving_term: $10, "
             "moving_freeze: $11}",
             {t.name, t.node, t.state, or_null(t.moving_to), or_null(t.lineage), or_null(t.forked),
              or_null(t.failed_from), quota_value(t.quota), or_null(t.moving_from),
              term_value(t.moving_term), or_null(t.moving_freeze)}});
    }
    if (Status st = write_locked(block); !st.is_ok()) return st;
    return change([&](DirectoryMaps& m) {
        for (const NodeRow& n : rows.nodes) m.nodes[n.name] = n;
        for (const auto& [node, standby] : rows.pairs) m.pairs[node] = standby;
        for (const auto& [tenant, node] : rows.replicas) m.replicas[tenant] = node;
        for (const TenantRow& t : rows.tenants) m.tenants[t.name] = kept(t);
    });
}

Status Directory::move_region_out(const RegionRows& rows, const std::vector<std::string>& routers) {
    std::lock_guard lock(write_mu_);
    const std::string home = "@" + rows.region;
    // The region's tenants now are those its router adopted: one created or moved onto its nodes
    // since the rows were read would be left on a node this block removes.
    {
        const auto now = maps();
        std::set<std::string> sent, there, nodes, region_nodes;
        for (const TenantRow& t : rows.tenants) sent.insert(t.name);
        for (const NodeRow& n : rows.nodes) nodes.insert(n.name);
        for (const auto& [name, n] : now->nodes) {
            if (n.region == rows.region) region_nodes.insert(name);
        }
        for (const auto& [name, t] : now->tenants) {
            if (region_nodes.contains(t.node) || region_nodes.contains(t.moving_to)) {
                there.insert(name);
            }
        }
        if (sent != there || nodes != region_nodes) {
            return Status::error(Code::busy,
                                 "the region's nodes or tenants changed while its router adopted "
                                 "them: ask again");
        }
    }
    engine::List list;
    for (const std::string& url : routers) list.items.emplace_back(url);
    std::vector<Statement> block = {{"del regions where name = $1", {rows.region}},
                                    {"insert regions {name: $1, routers: $2}",
                                     {rows.region, Value(list)}}};
    for (const TenantRow& t : rows.tenants) {
        block.push_back({"del tenants where name = $1", {t.name}});
        block.push_back({"insert tenants {name: $1, node: $2, state: \"active\"}", {t.name, home}});
        block.push_back({"del replicas where tenant = $1", {t.name}});
    }
    for (const NodeRow& n : rows.nodes) {
        block.push_back({"del nodes where name = $1", {n.name}});
        block.push_back({"del pairs where node = $1 or standby = $1", {n.name}});
        block.push_back({"del replicas where node = $1", {n.name}});
        block.push_back({"del thaws where node = $1", {n.name}});
    }
    if (Status st = write_locked(block); !st.is_ok()) return st;
    for (const NodeRow& n : rows.nodes) tokens_->remove(n.name).ignore();
    return change([&](DirectoryMaps& m) {
        m.regions[rows.region] = routers;
        for (const TenantRow& t : rows.tenants) {
            TenantRow at_home;
            at_home.name = t.name;
            at_home.node = home;
            m.tenants[t.name] = at_home;
            m.replicas.erase(t.name);
        }
        for (const NodeRow& n : rows.nodes) {
            m.nodes.erase(n.name);
            std::erase_if(m.pairs,
                          [&](const auto& p) { return p.first == n.name || p.second == n.name; });
            erase_if(m.replicas, [&](const auto& r) { return r.second == n.name; });
            m.thaws.erase(n.name);
        }
    });
}

Status Directory::put_lease_record(const LeaseRecord& record) {
    std::lock_guard lock(write_mu_);
    Status st = write_locked({{"del leases where name = \"record\"", {}},
                              {"insert leases {name: \"record\", ms: $1, at: $2, `by`: $3}",
                               {Value(record.ms), engine::Timestamp{record.at_ms}, record.by}}});
    if (!st.is_ok()) return st;
    return change([&](DirectoryMaps& m) { m.lease_record = record; });
}

Status Directory::change(const std::function<void(DirectoryMaps&)>& edit) {
    auto next = std::make_shared<DirectoryMaps>(*maps());
    edit(*next);
    publish(std::move(next));
    return Status::ok();
}

std::optional<std::string_view> home_region(std::string_view node) {
    if (!node.starts_with('@')) return std::nullopt;
    return node.substr(1);
}

std::string DirectoryMaps::region_of(const TenantRow& tenant) const {
    if (std::optional<std::string_view> r = home_region(tenant.node)) return std::string(*r);
    auto n = nodes.find(tenant.node);
    return n == nodes.end() ? "" : n->second.region;
}

const std::string* DirectoryMaps::standby_of(std::string_view node) const {
    auto it = pairs.find(node);
    return it == pairs.end() ? nullptr : &it->second;
}

bool DirectoryMaps::keeps_nodes_of(std::string_view region) const {
    if (scope == region) return true;
    for (const auto& [name, n] : nodes) {
        if (n.region == region) return true;
    }
    return false;
}

bool DirectoryMaps::is_standby(std::string_view node) const {
    for (const auto& [n, s] : pairs) {
        if (s == node) return true;
    }
    return false;
}

std::string DirectoryMaps::copy_of(const TenantRow& tenant) const {
    // A replica row on a paired node is one the standby has not replaced yet: the pair is recorded
    // before its standby takes the node's tenants, and a tenant the standby did not take keeps its
    // row (Copies::paired). That replica follows the tenant; the standby may hold nothing of it.
    if (auto it = replicas.find(tenant.name); it != replicas.end()) return it->second;
    const std::string* s = standby_of(tenant.node);
    return s ? *s : "";
}

Status Directory::remove_tenant(std::string_view name) {
    std::lock_guard lock(write_mu_);
    const std::string t(name);
    Status st = write_locked({{"del tenants where name = $1", {t}},
                              {"del replicas where tenant = $1", {t}},
                              {"del thaws where tenant = $1", {t}}});
    if (!st.is_ok()) return st;
    return change([&](DirectoryMaps& m) {
        m.tenants.erase(t);
        m.replicas.erase(t);
        for (auto it = m.thaws.begin(); it != m.thaws.end();) {
            it->second.erase(t);
            it = it->second.empty() ? m.thaws.erase(it) : std::next(it);
        }
    });
}

void Directory::close() {
    std::lock_guard lock(write_mu_);
    if (!db_) return;
    (void)db_->sync();
    (void)db_->close();
    db_.reset();
}

}  // namespace fenec::shard
