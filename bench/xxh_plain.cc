// bench/xxh_plain.cc: libxxhash's runtime-dispatch entry points sent back to its plain ones, as a
// library to LD_PRELOAD, so that one binary runs an open, a move or a write both ways:
//   LD_PRELOAD=build/bench/libxxh_plain.so build/bench/near_bench ...
// measures Fenec as it was before engine/hash.h took the dispatch (docs/benchmarks.md, "xxHash's
// runtime dispatch"). A measuring aid only: nothing ships or links it.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

extern "C" {

XXH64_hash_t XXH3_64bits_dispatch(const void* input, size_t len) { return XXH3_64bits(input, len); }

XXH_errorcode XXH3_64bits_update_dispatch(XXH3_state_t* state, const void* input, size_t len) {
    return XXH3_64bits_update(state, input, len);
}

XXH128_hash_t XXH3_128bits_dispatch(const void* input, size_t len) {
    return XXH3_128bits(input, len);
}

XXH_errorcode XXH3_128bits_update_dispatch(XXH3_state_t* state, const void* input, size_t len) {
    return XXH3_128bits_update(state, input, len);
}

// The rest of what xxh_x86dispatch.h renames, so a call added later is not measured dispatched
// on the plain side.
XXH64_hash_t XXH3_64bits_withSeed_dispatch(const void* input, size_t len, XXH64_hash_t seed) {
    return XXH3_64bits_withSeed(input, len, seed);
}

XXH64_hash_t XXH3_64bits_withSecret_dispatch(const void* input, size_t len, const void* secret,
                                             size_t secret_len) {
    return XXH3_64bits_withSecret(input, len, secret, secret_len);
}

XXH128_hash_t XXH3_128bits_withSeed_dispatch(const void* input, size_t len, XXH64_hash_t seed) {
    return XXH3_128bits_withSeed(input, len, seed);
}

XXH128_hash_t XXH3_128bits_withSecret_dispatch(const void* input, size_t len, const void* secret,
                                               size_t secret_len) {
    return XXH3_128bits_withSecret(input, len, secret, secret_len);
}

}  // extern "C"
