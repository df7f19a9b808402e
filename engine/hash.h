// engine/hash.h: how Fenec reaches xxHash. What it ships includes this, not <xxhash.h>, so that
// every XXH3 call (record checksums, image and graph digests, replication frames) takes
// libxxhash's runtime dispatch where the build found it (FENEC_XXH_DISPATCH, set by the top
// CMakeLists.txt when the library exports XXH3_64bits_dispatch, as Debian's libxxhash.so does):
// the library then runs XXH3 in AVX2 or AVX-512 on CPUs that have them, SSE2 otherwise. The
// hashes are the same bits on every path; only their speed differs (docs/benchmarks.md,
// "hash_bench: xxHash's runtime dispatch").
// Without the dispatch symbols (a static libxxhash, another CPU) the calls stay the plain ones.
// Tests, fuzz targets and bench/hash_bench.cc include <xxhash.h> itself: a file's checks computed
// there by the plain entry points are held against the engine's
// (test/engine/file_format_golden_test.cc).
#pragma once

#ifndef XXH_STATIC_LINKING_ONLY
#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#endif
#include <xxhash.h>

#if defined(FENEC_XXH_DISPATCH)
#include <xxh_x86dispatch.h>  // renames the XXH3 entry points (and XXH128) to their _dispatch
#endif
