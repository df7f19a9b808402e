// shard/move_image.h: a move's image passed from its source node to its target (router.md §7.2
// steps 4 and 5), and what the move's steps share to say a node's refusal. The image never passes
// through the loops (which read an answer with a length whole): on the API worker, the source's
// `GET …/file` answer is relayed by the blocking client (server/runtime/client.h,
// Connection::relay_to: splice(2) through a pipe of relay_buffer_bytes) into the target's
// `PUT …/file`, sent with `Expect: 100-continue` so a target that already holds a file refuses
// (409) before a byte of the body goes; that copy is stale by definition (the directory never
// pointed at it) and is deleted and the install tried once more. The router holds a megabyte of
// the image at a time, whatever its size.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "shard/directory.h"
#include "shard/upstream.h"

namespace fenec::shard {

// Why a move stops, said for the client: the status, the step ("mark", "freeze", "image",
// "install", "flip") and what happened.
struct MoveFailure {
    int status = 502;
    std::string step;
    std::string message;
};

// The status a node's answer to a step fails the move with (§7.2 Rollback): a node's 4xx passes
// through; a node's 5xx, or no answer, is 502.
int node_status(int status);
// The `error` of a node's JSON refusal, or the body's first bytes.
std::string node_error(std::string_view body);
// "node `n1` (127.0.0.1:7001)".
std::string who(const NodeRow& node);

// Where a move's time went, in ms, answered under `steps` (the bench reads it): the image built
// on the source (the GET sent to its head: the image taken and its digest), its bytes passed on
// (`transfer`), and the target's verify (the last byte sent to its answer: written, fsynced,
// verified, renamed).
struct MoveSteps {
    using Clock = std::chrono::steady_clock;
    Clock::time_point at = Clock::now();
    double mark = 0, freeze = 0, image = 0, transfer = 0, verify = 0, flip = 0, remove = 0;
    // The target's own account, from its answer: the body received and written, then installed.
    double receive = 0, install = 0;
    // The ms since the last lap.
    double lap() {
        const Clock::time_point now = Clock::now();
        const double ms = std::chrono::duration<double, std::milli>(now - at).count();
        at = now;
        return ms;
    }
};

// One image's way from `from` to `to`.
struct ImageMove {
    const NodeRow& from;
    const NodeRow& to;
    const std::string& tenant;
    const std::string& path;  // /_admin/tenants/<t>
    std::string_view request_id;
    std::string_view frozen_seq;  // the seq the source's freeze answered
};

// What the source's image said of itself, as the target installed it.
struct Copied {
    uint64_t bytes = 0;
    std::string seq, history, lineage, digest;
};

// Steps 4 and 5: the source's image into the target, checked against the freeze's seq and the
// target's answer. `steps` gains image, transfer, verify, receive and install.
std::optional<MoveFailure> copy_image(Upstream& upstream, const ImageMove& m, Copied& out,
                                      MoveSteps& steps);

}  // namespace fenec::shard
