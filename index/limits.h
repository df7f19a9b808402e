// index/limits.h: the bounds the indexes keep, each with its reason. A query past one is refused
// with invalid_argument naming it (a 400 in FenecQL): what it passes depends on the data the
// index holds, not on the size of the request.
#pragma once

#include <cstddef>

namespace fenec::index::limits {

// Distinct index terms the prefix terms of one `match` query may stand for, all its prefixes
// together. A match walks the postings of every term it asks for at once, comparing each row's
// position in every list, so its cost grows with rows × terms; past this many a prefix is too
// short to rank by and is refused rather than answered slowly.
inline constexpr size_t match_prefix_terms_max = 1024;

}  // namespace fenec::index::limits
