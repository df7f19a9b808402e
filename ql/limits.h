// ql/limits.h: every bound the FenecQL front end enforces, each with its reason (fenecql.md §14).
// Passing a `*_max` here is a 413 naming the limit (ql::Limit); the ranges at the bottom are
// argument validation, a 400. Bounds the engine also keeps are taken from engine/limits.h so the
// two can never disagree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/limits.h"

namespace fenec::ql::limits {

// Statement text, in bytes of UTF-8: one request carries one statement, and a megabyte of it is
// already far past anything written by hand; documents past it travel as parameters.
inline constexpr size_t statement_bytes_max = size_t{1} << 20;
// Highest `$n`, and entries in `params`: numbered parameters are for values, not bulk data.
inline constexpr uint32_t parameters_max = 65535;
// Expression depth as §14 counts it. It also bounds the parser's recursion: every recursive
// descent opens at least one level, and the parser stops at the first level past this.
inline constexpr uint32_t expression_depth_max = 512;
// Nesting of lists and objects in a statement's values: the engine's own nesting bound, so every
// value the parser accepts is one the engine can store.
inline constexpr uint32_t json_depth_max = engine::limits::nesting_max;
// Keys in a path past its field (`meta.a.b` has two).
inline constexpr uint32_t path_keys_max = 64;
// Collection, field, alias and lookup names, in bytes.
inline constexpr size_t name_bytes_max = engine::limits::name_bytes_max;
// Fields listed by one `create collection`.
inline constexpr size_t fields_max = engine::limits::fields_max;
// Components of a `vector<N>` type.
inline constexpr uint32_t vector_dimension_max = engine::limits::vector_dim_max;
// Lookups chained below the read's own collection: each level is one probe per parent row.
inline constexpr uint32_t lookup_depth_max = 8;
// Rows a `near` or `match` ranks (`offset` + `limit`), when both are literals; the executor
// checks the same sum once parameters are bound.
inline constexpr uint64_t ranked_rows_max = 10'000;
// Items of an `in` list compared one by one; a longer list is compiled into a hash set of
// equality keys (ql/eval.h), one lookup per row. Below this a few comparisons cost less than
// building a key for the row.
inline constexpr size_t in_list_linear_max = 16;

// Argument ranges: outside them is a 400 (fenecql.md §4.1, §14).
inline constexpr int64_t ef_min = 1;
inline constexpr int64_t ef_max = 10'000;
inline constexpr int64_t text_k1_hundredths_max = 1'000;  // k1 0 to 10
inline constexpr int64_t text_b_hundredths_max = 100;     // b 0 to 1
inline constexpr int64_t hnsw_m_min = 2;
inline constexpr int64_t hnsw_m_max = 100;
inline constexpr int64_t hnsw_ef_construction_min = 10;
inline constexpr int64_t hnsw_ef_construction_max = 2'000;
inline constexpr int64_t hnsw_ef_search_min = 1;
inline constexpr int64_t hnsw_ef_search_max = 10'000;
inline constexpr int64_t ttl_ms_min = 1;
inline constexpr int64_t ttl_ms_max = 36'500LL * 86'400'000LL;  // 36 500 days

}  // namespace fenec::ql::limits
