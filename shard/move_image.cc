// shard/move_image.cc: a move's image from its source's GET into its target's PUT (shard/
// move_image.h), over two connections of the blocking client's own, never pooled: the source's
// answer is read past its head only by the relay, and the PUT closes after its answer.
#include "shard/move_image.h"

#include <simdjson.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "server/runtime/client.h"

namespace fenec::shard {

namespace {

using server::Connection;

std::string header_of(const http::ResponseHead& h, std::string_view name) {
    auto v = h.header(name);
    return v ? std::string(*v) : std::string();
}

// A node's answer that stops the move at `step`: its body read (when it has a length) for the
// node's own words.
MoveFailure answered(Connection& conn, const NodeRow& node, const http::ResponseHead& head,
                     std::string_view step) {
    std::string body;
    server::CallError ignored;
    (void)conn.read_body(head.content_length.value_or(0), body, ignored);
    return MoveFailure{node_status(head.status), std::string(step),
                       who(node) + " answered " + std::to_string(head.status) + " to the " +
                           std::string(step == "image" ? "image" : "install") + ": " +
                           node_error(body)};
}

// Step 4: the source's GET …/file, up to its head: 200 with a length, the image's Fenec-*
// headers, at the seq its freeze answered (else something wrote).
std::optional<MoveFailure> open_source(Upstream& up, const ImageMove& m, const server::Cancel& cut,
                                       std::unique_ptr<Connection>& source, Copied& out) {
    server::CallError error;
    server::CallRequest r = to_node(m.from);
    source = up.blocking().connect(r, {.cancel = &cut}, error);
    http::ResponseHead head;
    if (!source ||
        !source->send(
            admin_request(m.from, m.request_id, {.method = "GET", .target = m.path + "/file"}),
            error) ||
        !source->read_head(head, error)) {
        return MoveFailure{502, "image", up.said(error, m.from.name)};
    }
    if (head.status != 200) return answered(*source, m.from, head, "image");
    if (!head.content_length || head.transfer_encoding) {
        return MoveFailure{502, "image", who(m.from) + " sent the image without a Content-Length"};
    }
    out.bytes = *head.content_length;
    out.seq = header_of(head, "Fenec-Seq");
    out.history = header_of(head, "Fenec-History");
    out.lineage = header_of(head, "Fenec-Lineage");
    out.digest = header_of(head, "Fenec-Image-Digest");
    if (out.seq.empty() || out.lineage.empty() || out.digest.empty()) {
        return MoveFailure{502, "image",
                           who(m.from) +
                               " sent the image without its Fenec-Seq, "
                               "Fenec-Lineage and Fenec-Image-Digest"};
    }
    if (out.seq != m.frozen_seq) {
        return MoveFailure{502, "image",
                           who(m.from) + " froze at seq " + std::string(m.frozen_seq) +
                               " but its image is at seq " + out.seq};
    }
    return std::nullopt;
}

// Step 5's head: PUT …/file on the target with `Expect: 100-continue`, up to its 100. A 409 before
// the body (a copy an interrupted attempt left, stale since the directory never pointed at it)
// deletes that copy and asks once more.
std::optional<MoveFailure> open_target(Upstream& up, const ImageMove& m, const Copied& image,
                                       const server::Cancel& cut,
                                       std::unique_ptr<Connection>& target) {
    const std::string file = m.path + "/file";
    http::OutRequest put{.method = "PUT", .target = file};
    put.headers = {{"Content-Type", "application/octet-stream"},
                   {"Fenec-Image-Digest", image.digest},
                   {"Fenec-Seq", image.seq},
                   {"Fenec-Lineage", image.lineage}};
    put.body_bytes = image.bytes;
    put.expect_continue = true;
    put.close = true;
    const std::string head_bytes = admin_request(m.to, m.request_id, put, up.fence());
    for (bool again = false;; again = true) {
        server::CallError error;
        target = up.blocking().connect(to_node(m.to), {.cancel = &cut}, error);
        http::ResponseHead head;
        if (!target || !target->send(head_bytes, error) || !target->read_head(head, error, true)) {
            return MoveFailure{502, "install", up.said(error, m.to.name)};
        }
        if (head.status == 100) return std::nullopt;
        if (head.status != 409 || again) return answered(*target, m.to, head, "install");
        std::string body;
        (void)target->read_body(head.content_length.value_or(0), body, error);
        server::CallResult del = up.admin(m.to, {.method = "DELETE",
                                                 .target = m.path + "/file",
                                                 .request_id = m.request_id,
                                                 .resendable = true});
        if (!del.answer || (del.answer->status != 204 && del.answer->status != 404)) {
            return MoveFailure{del.answer ? node_status(del.answer->status) : 502, "install",
                               who(m.to) + " holds a stale copy of `" + m.tenant +
                                   "` that it did not delete: " +
                                   (del.answer ? node_error(del.answer->body) : del.error.message)};
        }
    }
}

// The target stopped taking the body: its answer says why when it gave one.
MoveFailure refused(Connection& target, const ImageMove& m, const std::string& why) {
    http::ResponseHead head;
    server::CallError ignored;
    if (target.read_head(head, ignored) && head.status >= 400) {
        return answered(target, m.to, head, "install");
    }
    return MoveFailure{502, "install", why};
}

// The target's answer to the whole body: 201 (or 200) installing the seq and lineage sent, its
// own timings taken from Server-Timing. A copy installed but not the one sent is deleted.
std::optional<MoveFailure> installed(Upstream& up, Connection& target, const ImageMove& m,
                                     const Copied& image, MoveSteps& steps) {
    http::ResponseHead head;
    server::CallError error;
    if (!target.read_head(head, error)) {
        return MoveFailure{502, "install", up.said(error, m.to.name)};
    }
    steps.verify = steps.lap();
    std::string body;
    if (!target.read_body(head.content_length.value_or(0), body, error)) {
        return MoveFailure{502, "install", up.said(error, m.to.name)};
    }
    if (head.status != 201 && head.status != 200) {
        return MoveFailure{node_status(head.status), "install",
                           who(m.to) + " answered " + std::to_string(head.status) +
                               " to the install: " + node_error(body)};
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    uint64_t seq = 0;
    std::string_view lineage;
    if (parser.parse(body).get(doc) || doc["seq"].get_uint64().get(seq) ||
        doc["lineage"].get_string().get(lineage)) {
        return MoveFailure{502, "install",
                           who(m.to) + " answered the install without seq and lineage"};
    }
    const std::string timing = header_of(head, "Server-Timing");
    for (auto [name, into] :
         {std::pair{"receive;dur=", &steps.receive}, std::pair{"install;dur=", &steps.install}}) {
        const size_t at = timing.find(name);
        if (at != std::string::npos) {
            *into = std::strtod(timing.c_str() + at + std::strlen(name), nullptr);
        }
    }
    if (std::to_string(seq) != image.seq || lineage != image.lineage) {
        // Installed, but not the image sent: it goes, since nothing routes to it.
        (void)up.admin(
            m.to,
            {.method = "DELETE", .target = m.path, .request_id = m.request_id, .resendable = true});
        return MoveFailure{502, "install",
                           who(m.to) + " installed seq " + std::to_string(seq) + " of lineage " +
                               std::string(lineage) + ", not seq " + image.seq + " of " +
                               image.lineage};
    }
    return std::nullopt;
}

}  // namespace

int node_status(int status) { return status >= 400 && status < 500 ? status : 502; }

std::string who(const NodeRow& node) { return "node `" + node.name + "` (" + node.addr + ")"; }

std::string node_error(std::string_view body) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view e;
    if (!parser.parse(body.data(), body.size()).get(doc) && !doc["error"].get_string().get(e)) {
        return std::string(e);
    }
    return std::string(body.substr(0, 200));
}

std::optional<MoveFailure> copy_image(Upstream& up, const ImageMove& m, Copied& out,
                                      MoveSteps& steps) {
    // Each connection ends at once should its node's lease lapse (Upstream::cut_calls): declared
    // first, the Cancels outlive the connections that wait on them.
    const std::shared_ptr<const server::Cancel> from_cut = up.node_cancel(m.from.name);
    const std::shared_ptr<const server::Cancel> to_cut = up.node_cancel(m.to.name);
    std::unique_ptr<Connection> source;
    if (auto f = open_source(up, m, *from_cut, source, out)) return f;
    steps.image = steps.lap();
    std::unique_ptr<Connection> target;
    if (auto f = open_target(up, m, out, *to_cut, target)) return f;
    if (auto failed = source->relay_to(*target, out.bytes)) {
        if (failed->source) {
            return MoveFailure{502, "image",
                               from_cut->cancelled() ? up.cut_said(m.from.name) : failed->message};
        }
        return refused(*target, m, to_cut->cancelled() ? up.cut_said(m.to.name) : failed->message);
    }
    steps.transfer = steps.lap();
    return installed(up, *target, m, out, steps);
}

}  // namespace fenec::shard
