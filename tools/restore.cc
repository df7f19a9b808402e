// tools/restore.cc: `fenec restore DIR|FILE URL`: images installed into a running node, or
// through a router onto the node holding each tenant.
//
// Invariant: every image is checked here first, whole (replayed as a node replays an install:
// Database::verify_image; its digest against the manifest's), and nothing on any node is
// touched until all of them have passed. An image then goes in with `PUT /_admin/tenants/<t>/file`
// carrying its Fenec-Image-Digest, Fenec-Seq and Fenec-Lineage, which the node checks again
// before it renames the file into place; a tenant the node already holds is refused (409, before
// the body) unless `--replace`, which replaces it in place: `DELETE …/file` (its quota and other
// side files kept) then the same PUT.
//
// A copy that follows a primary elsewhere (a replica) is never restored in place: the node would
// install the image as a primary following nothing, cutting the replication the router set up
// while the router still counts the copy as the tenant's replica. Every tenant named is looked up
// on a node URL before anything is installed, and a replica refuses the whole restore.
//
// Through a router: a tenant in its directory is installed on the node the directory names; one
// missing from it is created through the router first (`PUT /_shard/tenants/<t>`, on `--node` or
// the node the router picks), so it is placed and routed as any tenant, and the empty file that
// create made is then replaced by the image. docs/tools.md says what the router's recorded
// lineage means then.
#include <simdjson.h>
#include <sys/stat.h>

#include <cstdio>
#include <map>
#include <set>

#include "engine/database.h"
#include "engine/format.h"
#include "tools/commands.h"
#include "tools/remote.h"

namespace fenec::tools {

namespace {

using engine::posix_fs;

struct Source {
    std::string tenant;
    std::string path;
    ImageHeaders headers;
};

// The image at `path` checked whole: replayed (its seq and lineage are what it holds), its
// digest computed and, when `expected` names one, matched.
std::optional<ImageHeaders> check_image(const std::string& path, const ImageEntry* expected,
                                        std::string& why) {
    auto info = engine::Database::verify_image(posix_fs(), path);
    if (!info.is_ok()) {
        why = path + " is not a whole image: " + info.status().to_string();
        return std::nullopt;
    }
    Progress progress("check " + path, info->bytes);
    auto digest = file_digest(posix_fs(), path, &progress);
    if (!digest.is_ok()) {
        why = path + ": " + digest.status().to_string();
        return std::nullopt;
    }
    ImageHeaders h{info->bytes, info->seq.v, engine::format::hex16(info->history.current().v),
                   engine::format::hex16(info->lineage.v), *digest};
    if (expected && (expected->digest != h.digest || expected->bytes != h.bytes)) {
        why = path + " is not the image the manifest names (digest " + h.digest + ", " +
              std::to_string(h.bytes) + " bytes; the manifest says " + expected->digest + ", " +
              std::to_string(expected->bytes) + ")";
        return std::nullopt;
    }
    return h;
}

bool is_dir(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A node's answer to an install: the seq and lineage it installed must be the image's.
std::string check_installed(const Reply& r, const Source& s) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    uint64_t seq = 0;
    std::string_view lineage;
    if (parser.parse(r.body).get(doc) || doc["seq"].get_uint64().get(seq) ||
        doc["lineage"].get_string().get(lineage)) {
        return "the node answered the install without its seq and lineage: " + r.said();
    }
    if (seq != s.headers.seq || lineage != s.headers.lineage) {
        return "the node installed seq " + std::to_string(seq) + " of lineage " +
               std::string(lineage) + ", not the image's";
    }
    return {};
}

// The image onto `node`: PUT; on 409 with `replace`, DELETE …/file and PUT again.
std::string install(Remote& remote, const NodeRef& node, const Source& s, bool replace) {
    Reply r = remote.send_image(node, s.tenant, s.path, s.headers);
    if (r.answered() && r.status == 409) {
        if (!replace) {
            return "node " + node.name + " holds `" + s.tenant +
                   "` already (--replace replaces it in place)";
        }
        Reply del =
            remote.call(node.addr, "DELETE", "/_admin/tenants/" + s.tenant + "/file", node.token);
        if (!del.answered() || (del.status != 204 && del.status != 404)) {
            return "node " + node.name + " did not remove the file of `" + s.tenant +
                   "`: " + del.said();
        }
        r = remote.send_image(node, s.tenant, s.path, s.headers);
    }
    if (!r.answered() || (r.status != 201 && r.status != 200)) {
        return "node " + node.name + " did not install `" + s.tenant + "`: " + r.said();
    }
    return check_installed(r, s);
}

// What `node` says each copy of `tenants` follows: tenant to its primary's address ("" when the
// node does not say), for the copies that are replicas there. nullopt (with `why`) when the node
// did not list its tenants: a restore that cannot tell a replica from a primary does not start.
std::optional<std::map<std::string, std::string>> replicas_among(Remote& remote,
                                                                 const NodeRef& node,
                                                                 const std::vector<Source>& sources,
                                                                 std::string& why) {
    Reply r = remote.call(node.addr, "GET", "/_admin/tenants", node.token);
    simdjson::dom::parser parser;
    simdjson::dom::array list;
    if (!r.answered() || r.status != 200 || parser.parse(r.body).get(list)) {
        why = "node " + node.name + " did not list its tenants: " + r.said();
        return std::nullopt;
    }
    std::set<std::string> named;
    for (const Source& s : sources) named.insert(s.tenant);
    std::map<std::string, std::string> out;
    for (simdjson::dom::element t : list) {
        std::string_view name, role;
        if (t["name"].get_string().get(name) || t["role"].get_string().get(role)) continue;
        if (role != "replica" || !named.count(std::string(name))) continue;
        // The list opens no tenant; the primary's address is in the copy's own description.
        std::string from;
        Reply d = remote.call(node.addr, "GET", "/_admin/tenants/" + std::string(name), node.token);
        simdjson::dom::parser dp;
        simdjson::dom::element doc;
        std::string_view f;
        if (d.answered() && d.status == 200 && !dp.parse(d.body).get(doc) &&
            !doc["following"]["from"].get_string().get(f)) {
            from = f;
        }
        out.emplace(std::string(name), from);
    }
    return out;
}

// The tenant created through the router at `router`, on `node_name` when given; its node.
std::optional<NodeRef> create_through(Remote& remote, const std::string& router,
                                      const std::string& tenant,
                                      const std::optional<std::string>& node_name,
                                      const Tokens& tokens, std::string& why) {
    std::string body = "{}";
    if (node_name) body = "{\"node\":\"" + *node_name + "\"}";
    Reply r = remote.call(router, "PUT", "/_shard/tenants/" + tenant, tokens.router, body);
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view node;
    if (!r.answered() || r.status != 201 || parser.parse(r.body).get(doc) ||
        doc["node"].get_string().get(node)) {
        why = "the router did not create `" + tenant + "`: " + r.said();
        return std::nullopt;
    }
    std::printf("created %s through the router, on node %.*s\n", tenant.c_str(),
                static_cast<int>(node.size()), node.data());
    return remote.node_named(router, std::string(node), tokens, why);
}

// What the router records of `tenant`: its lineage, "" when it has none.
std::string router_lineage(Remote& remote, const std::string& router, const std::string& tenant,
                           const Tokens& tokens) {
    Reply r = remote.call(router, "GET", "/_shard/tenants/" + tenant, tokens.router);
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view lineage;
    if (!r.answered() || r.status != 200 || parser.parse(r.body).get(doc) ||
        doc["lineage"].get_string().get(lineage)) {
        return {};
    }
    return std::string(lineage);
}

// The images named on the command line, each checked; nullopt (said) on the first that fails.
std::optional<std::vector<Source>> sources(const Command& c, const std::string& from,
                                           const Url& url, bool tenants, int& exit) {
    exit = exit_failed;
    std::string why;
    std::vector<Source> out;
    const auto fail = [&](const std::string& w) -> std::optional<std::vector<Source>> {
        failed(c.name, w);
        return std::nullopt;
    };
    if (!is_dir(from)) {
        if (tenants) {
            exit = usage_error(c, "--tenants takes a backup folder, not a file");
            return std::nullopt;
        }
        if (url.tenant.empty()) {
            exit = usage_error(c, "name the tenant the image becomes: URL/t/<tenant>");
            return std::nullopt;
        }
        auto h = check_image(from, nullptr, why);
        if (!h) return fail(why);
        out.push_back({url.tenant, from, *h});
        return out;
    }
    if (tenants == !url.tenant.empty()) {
        exit = usage_error(c, tenants ? "--tenants takes a URL without /t/<tenant>"
                                      : "name a tenant (URL/t/<tenant>) or give --tenants");
        return std::nullopt;
    }
    auto manifest = read_manifest(posix_fs(), from);
    if (!manifest.is_ok()) return fail(manifest.status().to_string());
    std::vector<const ImageEntry*> chosen;
    if (tenants) {
        for (const ImageEntry& e : manifest->images) chosen.push_back(&e);
    } else if (const ImageEntry* e = manifest->find(url.tenant)) {
        chosen.push_back(e);
    } else {
        return fail(from + " holds no image of `" + url.tenant + "`");
    }
    for (const ImageEntry* e : chosen) {
        const std::string path = from + "/" + e->file;
        auto h = check_image(path, e, why);
        if (!h) return fail(why);
        out.push_back({e->tenant, path, *h});
    }
    return out;
}

}  // namespace

const Command& restore_command() {
    static const Command c = [] {
        Command made{
            "restore",
            "DIR|FILE URL [--replace] [--tenants] [--node NAME]",
            "install images into a running node, or through a router",
            "FILE is one image, installed as the tenant URL/t/<tenant> names. DIR is a folder\n"
            "`fenec backup` wrote: the image of the tenant URL names, or with --tenants (and a\n"
            "URL without /t/) every image in it. Every image is checked here first (replayed\n"
            "whole, its digest matched) and nothing is installed until all have passed; the node\n"
            "checks each again as it installs it. A tenant the node holds already is refused\n"
            "unless --replace, which replaces it in place (DELETE then PUT …/file; its quota\n"
            "kept). Through a router, a tenant missing from its directory is created there first\n"
            "(on --node, or where the router places it). Exit 0 when every image was installed.",
            {{"--replace", {}, "replace a tenant the node holds already"},
             {"--tenants", {}, "every image in DIR (a whole node's backup)"},
             {"--node", "NAME", "through a router: the node a missing tenant is created on"}},
            2,
            2};
        for (const Option& o : token_options()) made.options.push_back(o);
        return made;
    }();
    return c;
}

int restore_main(int argc, char** argv) {
    const Command& c = restore_command();
    Args args;
    if (auto exit = read_args(c, argc, argv, args)) return *exit;
    std::string why;
    std::optional<Url> url = parse_url(args.positional[1], why);
    if (!url) return usage_error(c, why);
    std::optional<Tokens> tokens = read_tokens(args, why);
    if (!tokens) return usage_error(c, why);
    const bool replace = args.has("--replace");
    int exit = exit_failed;
    auto images = sources(c, args.positional[0], *url, args.has("--tenants"), exit);
    if (!images) return exit;

    Remote remote;
    std::optional<bool> router = remote.is_router(url->addr, why);
    if (!router) return failed(c.name, why);
    if (!*router && args.has("--node")) return usage_error(c, "--node is for a router's URL");
    if (!*router) {  // through a router, each tenant goes to the node its directory names primary
        auto replicas =
            replicas_among(remote, NodeRef{url->addr, url->addr, tokens->admin}, *images, why);
        if (!replicas) return failed(c.name, why);
        for (const auto& [tenant, from] : *replicas) {
            failed(c.name, tenant + ": node " + url->addr + " holds `" + tenant +
                               "` as a replica following " +
                               (from.empty() ? "its primary" : "the primary at " + from) +
                               ": restore it on that primary (or through the router), which " +
                               "this copy then follows; nothing was restored");
        }
        if (!replicas->empty()) return exit_failed;
    }
    bool all_installed = true;
    for (const Source& s : *images) {
        std::optional<NodeRef> node;
        bool created = false;
        if (*router) {
            bool missing = false;
            node = remote.locate(url->addr, s.tenant, *tokens, why, missing);
            if (!node && missing) {
                node =
                    create_through(remote, url->addr, s.tenant, args.value("--node"), *tokens, why);
                created = node.has_value();
            }
        } else {
            node = NodeRef{url->addr, url->addr, tokens->admin};
        }
        std::string failure = node ? install(remote, *node, s, replace || created) : why;
        if (!failure.empty()) {
            all_installed = false;
            failed(c.name, s.tenant + ": " + failure);
            continue;
        }
        std::printf("restored %s on %s: %s, seq %llu, lineage %s\n", s.tenant.c_str(),
                    node->name.c_str(), Progress::bytes_text(s.headers.bytes).c_str(),
                    static_cast<unsigned long long>(s.headers.seq), s.headers.lineage.c_str());
        if (*router) {
            const std::string known = router_lineage(remote, url->addr, s.tenant, *tokens);
            if (!known.empty() && known != s.headers.lineage) {
                std::fprintf(stderr,
                             "fenec restore: note: the router records `%s` as lineage %s, the "
                             "image is of %s: a failover of it is refused until a repair learns "
                             "the new lineage or one is forced (docs/tools.md)\n",
                             s.tenant.c_str(), known.c_str(), s.headers.lineage.c_str());
            }
        }
    }
    return all_installed ? exit_ok : exit_failed;
}

}  // namespace fenec::tools
