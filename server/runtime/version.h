// server/runtime/version.h: the project's one version string, which fenec-node, fenec-shard and
// the `fenec` command all print (`--version`, the ready line, `/_admin/hello`, `Server`,
// `fenec_build_info`). Changed here alone, for a release.
#pragma once

#include <string_view>

namespace fenec::server {

inline constexpr std::string_view fenec_version = "0.1.0";

}  // namespace fenec::server
