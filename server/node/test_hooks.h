// server/node/test_hooks.h: the node's test hooks (node-http.md §14), the only ways a test reaches
// into fenec-node's timing and bounds: `Fenec-Test-Stall: land=<ms>` (a landed write's answer
// held), `Fenec-Test-Stall: between=<ms>` (a batch run statement by statement held between
// them), `Fenec-Test-Stall: apply=<ms>` (a follower's blocks applied late), `Fenec-Test-Stall:
// install=<ms>` (a received image's install held, its copy out of service), `Fenec-Test-Stall:
// received=<ms>` (an image received whole held before its copy is taken out), `Fenec-Test-Now:
// <ISO-8601>` (the statements' `now`), and two bounds lowered from the environment
// (FENEC_TEST_FEED_FRAME_BYTES, FENEC_TEST_IMAGE_IN_MEMORY_BYTES), and an image's build for a
// follower held (FENEC_TEST_IMAGE_BUILD_STALL).
//
// Two implementations, chosen at link time (server/CMakeLists.txt):
//   test_hooks_off.cc  every hook does nothing and answers the release value; it names no header
//                      and no variable. It is the library's default, so fenec-node and every
//                      program linking fenec_node get it.
//   test_hooks_on.cc   reads the headers and variables; linked only into fenec-node-hooks, the
//                      node the integration tests start (built with the tests, never installed).
// Invariant: a release binary carries no hook. test/server/node/test_hooks_test.cc checks that
// fenec-node holds none of the hooks' names and ignores their headers, and that
// fenec-node-hooks honours them.
#pragma once

#include <cstdint>
#include <optional>

#include "server/runtime/http.h"

namespace fenec::node::test_hooks {

// Between a write's landing and its answer: sleeps `Fenec-Test-Stall: land=<ms>` of `head`.
void stall_landed(const http::RequestHead& head);
// Whether `head` asks for that stall: its answer is then not given on a Syncer thread, which
// must not sleep (outcome.cc).
bool stalls_landed(const http::RequestHead& head);

// Between two statements of a batch run one by one (it holds `compact`): sleeps
// `Fenec-Test-Stall: between=<ms>` of `head`, the tenant's lock not held.
void stall_between_statements(const http::RequestHead& head);

// `Fenec-Test-Stall: apply=<ms>` of a `POST …/follow`, kept in the tenant's Follows; 0 if none.
int64_t apply_stall_ms(const http::RequestHead& head);
// Before a follower applies a block: sleeps the `apply_stall_ms` its Follows kept.
void stall_apply(int64_t apply_stall_ms);
// `Fenec-Test-Stall: install=<ms>` of a `POST …/follow`, kept the same way; 0 if none.
int64_t install_stall_ms(const http::RequestHead& head);
// With a received image's copy out of service, before its install: sleeps that many ms.
void stall_install(int64_t install_stall_ms);
// `Fenec-Test-Stall: received=<ms>` of a `POST …/follow`: an image received whole waits that
// long before its copy is taken out of service for the install (slept by stall_install).
int64_t received_stall_ms(const http::RequestHead& head);

// The statements' `now` pinned by `Fenec-Test-Now: <ISO-8601>`; nullopt: the clock's.
std::optional<int64_t> now_ms(const http::RequestHead& head);

// The feed's frame bound: `bytes_max`, or FENEC_TEST_FEED_FRAME_BYTES when below it.
uint32_t feed_frame_bytes(uint32_t bytes_max);
// The largest image installed from memory: `bytes_max`, or FENEC_TEST_IMAGE_IN_MEMORY_BYTES.
uint64_t image_in_memory_bytes(uint64_t bytes_max);
// Before a primary builds an image for a follower's stream: sleeps FENEC_TEST_IMAGE_BUILD_STALL ms
// (a large tenant's build, as long as a test needs).
void stall_image_build();
// Whether a primary is refused a thread for building a follower's image, as a process at its thread
// limit is (FENEC_TEST_IMAGE_THREAD_REFUSED set).
bool refuse_image_thread();

}  // namespace fenec::node::test_hooks
