// index/collation.h: how two texts compare under a field's text rule (fenecql.md §6.2-§6.4): a
// collation (bytes, ICU root "und", ICU "tr"), optionally after case folding (`nocase`). The only
// file of Fenec that calls ICU's collation and folding.
//
// Invariants:
// - The order is total and, without nocase, two texts compare 0 only when their bytes are equal:
//   where ICU ties, the UTF-8 bytes decide (§6.3). With nocase, texts compare 0 exactly when their
//   folds' bytes are equal (§6.4), so compare_text(a, b) == 0 iff equal_text(a, b).
// - sort_key(a) <=> sort_key(b) by memcmp equals compare_text(a, b) for every pair of texts.
// - ICU runs at tertiary strength with normalization on, other attributes at their defaults.
// - Nothing here throws or crashes on ICU failure: a collator that cannot be opened (a broken
//   install, which is an environment error) makes that thread order by bytes, consistently for
//   compare_text and sort_key.
//
// Thread safety: every function may be called from any thread. Collators live one per thread
// and collation (thread_local, opened on first use), so no ICU object is shared across threads.
// sort_key's scratch buffers are per thread too.
//
// Texts are UTF-8; the engine validates every stored text (engine/value.h). Ill-formed input is
// read safely (each bad sequence as U+FFFD by ICU), never crashing.
#pragma once

#include <string>
#include <string_view>

#include "engine/schema.h"

namespace fenec::index {

// A field's (or an order key's) text rule.
struct TextRule {
    engine::Collation collation = engine::Collation::bytes;  // bytes: UTF-8 byte order
    bool nocase = false;                                     // compare the folds
    // Which fold nocase applies: Turkish when tr, Unicode full default folding otherwise. It is
    // the field's own collation, so `order f collate tr` on a plain nocase field still folds as
    // Unicode does (§6.4).
    engine::Collation fold = engine::Collation::bytes;

    bool operator==(const TextRule&) const = default;
};

// The rule of a field declared `collate c` (and `nocase` when nocase).
inline TextRule field_rule(engine::Collation c, bool nocase) { return TextRule{c, nocase, c}; }

// Full case folding of `utf8`: Turkish (U_FOLD_CASE_EXCLUDE_SPECIAL_I: I -> ı, İ -> i) when
// `turkish`, else Unicode default (I -> i, İ -> i + U+0307, ß -> ss, ı stays ı).
std::string fold(std::string_view utf8, bool turkish);

// -1, 0 or 1 as `a` sorts before, with or after `b` under `rule`.
int compare_text(std::string_view a, std::string_view b, const TextRule& rule);

// Equality under `rule`: equal bytes, or equal folds' bytes under nocase. Never calls a collator.
bool equal_text(std::string_view a, std::string_view b, const TextRule& rule);

// A byte string whose memcmp order is compare_text's order, for sorted indexes:
//   ICU sort key of the (folded) text without its 0x00 terminator, 0x00, the tie-break bytes
//   (the fold under nocase, else the text). Under the bytes collation, just the tie-break bytes.
// ICU sort keys hold no 0x00 before their terminator, so the separator ends the collation part.
std::string sort_key(std::string_view text, const TextRule& rule);

// `~`: whether fold(hay) contains fold(needle). An empty needle is in every text.
bool contains_folded(std::string_view hay, std::string_view needle, bool turkish);

// Unicode's default (locale-independent) upper or lower case mapping: FenecQL's upper() and
// lower() (fenecql.md §6.5).
std::string change_case(std::string_view utf8, bool upper);

}  // namespace fenec::index
