// server/node/admin.h: the admin plane's parts (node-http.md §8), each in its own file, shared
// by the router of admin.cc: lifecycle.cc (delete, freeze, thaw), image.cc (the file image).
// Every entry point runs on a worker with the call past its admin credential and its tenant name
// checked; each answers through Node::answer, and the mutating ones write their audit line.
#pragma once

#include <memory>

#include "server/node/handlers.h"

namespace fenec::node {

// An `admin` audit line (§13.3): method, path, tenant, status. Every /_admin/ request but the
// GETs and the read-only query writes one.
void audit_admin(Node& node, const Call& call, int status);
// Answers `r` and writes the call's audit line with its status.
void answer_audited(Node& node, Call& call, http::Response r);

// lifecycle.cc
// `DELETE /_admin/tenants/<t>` (§8.1), and `DELETE …/file` with `sidecars` false (§8.3).
void delete_tenant(Node& node, Call& call, bool sidecars);
// `POST …/freeze` and `POST …/thaw` (§8.2).
void freeze_tenant(Node& node, Call& call);
void thaw_tenant(Node& node, Call& call);
// `<t>.frozen` at `path` written durably (a freeze's, or an image installed frozen).
engine::Status write_frozen_mark(Node& node, const std::string& path);

// image.cc (§8.3)
void get_image(Node& node, const std::shared_ptr<Call>& call);
void put_image(Node& node, Call& call);

}  // namespace fenec::node
