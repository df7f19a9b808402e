// test/support/file_search.h: which of some byte strings a file holds, read a chunk at a time so a
// binary of hundreds of megabytes (an ASan build's, with its debug info) is never held whole.
// Used by the TestHooks suites to look for the hooks' names in the binaries.
#pragma once

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace fenec::test {

// For each of `needles`, whether the file at `path` holds it; nullopt if it cannot be read or is
// empty. A needle that straddles two chunks is found: each chunk is searched together with the
// tail of the one before, as long as the longest needle less one byte.
inline std::optional<std::vector<bool>> file_contains(const std::string& path,
                                                      const std::vector<std::string>& needles) {
    constexpr size_t chunk_bytes = 16 << 20;
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    size_t keep = 0;
    for (const std::string& n : needles) keep = std::max(keep, n.size());
    keep = keep > 0 ? keep - 1 : 0;
    std::vector<bool> found(needles.size(), false);
    std::string window;
    std::string chunk(chunk_bytes, '\0');
    size_t total = 0;
    while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
        const size_t got = static_cast<size_t>(in.gcount());
        total += got;
        window.append(chunk, 0, got);
        for (size_t i = 0; i < needles.size(); ++i) {
            if (!found[i] && window.find(needles[i]) != std::string::npos) found[i] = true;
        }
        window.erase(0, window.size() - std::min(window.size(), keep));
    }
    if (total == 0) return std::nullopt;
    return found;
}

}  // namespace fenec::test
