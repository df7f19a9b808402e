// server/node/test_hooks_off.cc: the test hooks of a release (server/node/test_hooks.h): none.
// Every hook does nothing and answers the release value, and nothing here names a hook's header
// or variable, so fenec-node cannot be stalled, have its clock pinned or its bounds lowered by a
// request or its environment.
#include "server/node/test_hooks.h"

namespace fenec::node::test_hooks {

void stall_landed(const http::RequestHead&) {}

bool stalls_landed(const http::RequestHead&) { return false; }

void stall_between_statements(const http::RequestHead&) {}

int64_t apply_stall_ms(const http::RequestHead&) { return 0; }

void stall_apply(int64_t) {}

int64_t install_stall_ms(const http::RequestHead&) { return 0; }

int64_t received_stall_ms(const http::RequestHead&) { return 0; }

void stall_install(int64_t) {}

std::optional<int64_t> now_ms(const http::RequestHead&) { return std::nullopt; }

uint32_t feed_frame_bytes(uint32_t bytes_max) { return bytes_max; }

uint64_t image_in_memory_bytes(uint64_t bytes_max) { return bytes_max; }
void stall_image_build() {}
bool refuse_image_thread() { return false; }

}  // namespace fenec::node::test_hooks
