// tools/backup.cc: `fenec backup URL -o DIR`: a running node's or router's tenants saved as
// images in DIR (tools/image_files.h says how they are written and what the manifest holds).
//
// Each image is the node's own (`GET /_admin/tenants/<t>/file`), its bytes checked against the
// digest the node sent and replayed whole before it is renamed into place, so DIR never holds a
// partial or damaged image under a tenant's name. Through a router the command asks the router
// where each tenant lives (`GET /_shard/tenants[/<t>]`, `GET /_shard/nodes/<n>`) and takes the
// image from that node. A second run into the same DIR keeps each image the manifest names that
// is still whole (its bytes and digest), and takes the rest: an interrupted backup resumes.
#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <map>

#include "engine/io.h"
#include "json/timestamp.h"
#include "tools/commands.h"
#include "tools/remote.h"

namespace fenec::tools {

namespace {

using engine::posix_fs;

struct Planned {
    std::string tenant;
    NodeRef node;
};

std::string now_text() {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    return json::format_timestamp(ms);
}

// Every primary on the node at `addr` (its copies of other nodes' tenants are theirs to back up).
std::optional<std::vector<Planned>> node_tenants(Remote& remote, const std::string& addr,
                                                 const Tokens& tokens, std::string& why) {
    Reply r = remote.call(addr, "GET", "/_admin/tenants", tokens.admin);
    simdjson::dom::parser parser;
    simdjson::dom::array list;
    if (!r.answered() || r.status != 200 || parser.parse(r.body).get(list)) {
        why = "node " + addr + " did not list its tenants: " + r.said();
        return std::nullopt;
    }
    std::vector<Planned> out;
    for (simdjson::dom::element t : list) {
        std::string_view name, role;
        if (t["name"].get_string().get(name)) continue;
        if (!t["role"].get_string().get(role) && role == "replica") {
            std::printf("skipped %.*s: a replica here (back up its primary)\n",
                        static_cast<int>(name.size()), name.data());
            continue;
        }
        out.push_back({std::string(name), NodeRef{addr, addr, tokens.admin}});
    }
    return out;
}

// Every tenant in the router's directory, each with its node.
std::optional<std::vector<Planned>> router_tenants(Remote& remote, const std::string& addr,
                                                   const Tokens& tokens, std::string& why) {
    Reply r = remote.call(addr, "GET", "/_shard/tenants", tokens.router);
    simdjson::dom::parser parser;
    simdjson::dom::array list;
    if (!r.answered() || r.status != 200 || parser.parse(r.body).get(list)) {
        why = "the router did not list its tenants: " + r.said();
        return std::nullopt;
    }
    std::map<std::string, NodeRef> nodes;
    std::vector<Planned> out;
    for (simdjson::dom::element t : list) {
        std::string_view name, node;
        if (t["name"].get_string().get(name) || t["node"].get_string().get(node)) continue;
        auto it = nodes.find(std::string(node));
        if (it == nodes.end()) {
            auto found = remote.node_named(addr, std::string(node), tokens, why);
            if (!found) return std::nullopt;
            it = nodes.emplace(std::string(node), *found).first;
        }
        out.push_back({std::string(name), it->second});
    }
    return out;
}

// One tenant's image into `dir`, unless the manifest names a whole one already.
bool back_up(Remote& remote, const Planned& p, const std::string& dir, Manifest& manifest) {
    const std::string name = "backup";
    if (!tenant_name_ok(p.tenant)) {
        failed(name, "skipped a tenant named `" + p.tenant + "`: not a name a node takes");
        return false;
    }
    if (const ImageEntry* kept = manifest.find(p.tenant);
        kept && image_whole(posix_fs(), dir, *kept)) {
        std::printf("kept %s: %s, seq %llu, taken %s (whole, digest checked)\n", p.tenant.c_str(),
                    Progress::bytes_text(kept->bytes).c_str(),
                    static_cast<unsigned long long>(kept->seq), kept->taken_at.c_str());
        return true;
    }
    const std::string file = p.tenant + std::string(image_suffix);
    auto writer = ImageWriter::begin(posix_fs(), dir + "/" + file);
    if (!writer.is_ok()) {
        failed(name, p.tenant + ": " + writer.status().to_string());
        return false;
    }
    ImageHeaders h;
    if (std::string why = remote.fetch_image(p.node, p.tenant, **writer, h); !why.empty()) {
        failed(name, p.tenant + ": " + why);
        return false;
    }
    if (engine::Status st = (*writer)->finish(); !st.is_ok()) {
        failed(name, p.tenant + ": the image did not check: " + st.to_string());
        return false;
    }
    ImageEntry e{p.tenant,  file,     h.bytes,     h.seq,     h.history,
                 h.lineage, h.digest, p.node.name, now_text()};
    manifest.put(e);
    if (engine::Status st = write_manifest(posix_fs(), dir, manifest); !st.is_ok()) {
        failed(name, "the manifest was not written: " + st.to_string());
        return false;
    }
    std::printf("saved %s: %s, seq %llu, lineage %s, from %s\n", p.tenant.c_str(),
                Progress::bytes_text(h.bytes).c_str(), static_cast<unsigned long long>(h.seq),
                h.lineage.c_str(), p.node.name.c_str());
    return true;
}

}  // namespace

const Command& backup_command() {
    static const Command c = [] {
        Command made{
            "backup",
            "URL -o DIR [--all]",
            "save a running node's or router's tenants as images in DIR",
            "URL is http://host:port/t/<tenant> for one tenant, or http://host:port with --all\n"
            "for every tenant (a node's primaries, or every tenant a router's directory holds).\n"
            "Each image is checked against the digest its node sent and replayed whole before it\n"
            "is renamed into place (DIR/<tenant>.fenec); DIR/fenec-backup.json names each one.\n"
            "Run it again into the same DIR to finish an interrupted backup: images still whole\n"
            "are kept. Through a router, the images come from each tenant's node, which takes\n"
            "its own admin token. Exit 0 when every image was saved or kept, 1 otherwise.",
            {{"--output", "DIR", "the folder to write (created if missing)", {}, "-o"},
             {"--all", {}, "every tenant, not one"}},
            1,
            1};
        for (const Option& o : token_options()) made.options.push_back(o);
        return made;
    }();
    return c;
}

int backup_main(int argc, char** argv) {
    const Command& c = backup_command();
    Args args;
    if (auto exit = read_args(c, argc, argv, args)) return *exit;
    std::string why;
    std::optional<Url> url = parse_url(args.positional[0], why);
    if (!url) return usage_error(c, why);
    const std::optional<std::string> dir = args.value("--output");
    if (!dir) return usage_error(c, "name the folder to write: -o DIR");
    const bool all = args.has("--all");
    if (all == !url->tenant.empty()) {
        return usage_error(c, all ? "--all takes a URL without /t/<tenant>"
                                  : "name a tenant (URL/t/<tenant>) or give --all");
    }
    std::optional<Tokens> tokens = read_tokens(args, why);
    if (!tokens) return usage_error(c, why);

    Remote remote;
    std::optional<bool> router = remote.is_router(url->addr, why);
    if (!router) return failed(c.name, why);
    std::optional<std::vector<Planned>> plan;
    if (!all) {
        bool missing = false;
        std::optional<NodeRef> node =
            *router ? remote.locate(url->addr, url->tenant, *tokens, why, missing)
                    : NodeRef{url->addr, url->addr, tokens->admin};
        if (!node) return failed(c.name, why);
        plan = std::vector<Planned>{{url->tenant, *node}};
    } else {
        plan = *router ? router_tenants(remote, url->addr, *tokens, why)
                       : node_tenants(remote, url->addr, *tokens, why);
        if (!plan) return failed(c.name, why);
    }
    if (engine::Status st = posix_fs().make_dirs(*dir); !st.is_ok()) {
        return failed(c.name, st.to_string());
    }
    auto read = read_manifest(posix_fs(), *dir);
    if (!read.is_ok() && read.status().code() != engine::Code::not_found) {
        return failed(c.name, read.status().to_string());
    }
    Manifest manifest = read.is_ok() ? std::move(*read) : Manifest{};
    manifest.source = args.positional[0];
    bool all_saved = true;
    for (const Planned& p : *plan) all_saved = back_up(remote, p, *dir, manifest) && all_saved;
    if (plan->empty()) std::printf("no tenant to back up\n");
    return all_saved ? exit_ok : exit_failed;
}

}  // namespace fenec::tools
