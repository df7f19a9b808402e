// index/tokenizer.h: the one tokenizer of text search (fenecql.md §8), the same for documents and
// queries, so a query term and a document term are equal exactly when their texts are.
//
// 1. Words are the maximal runs of letters (L*) and digits (N*); a combining mark (M*) joins the
//    run it follows (a mark with no run before it separates, like every other character).
// 2. Inside a word, each maximal stretch of Han, Hiragana, Katakana or Hangul characters (by
//    Script_Extensions, so U+30FC ー counts as kana) becomes its overlapping pairs of characters,
//    a character carrying the marks that follow it; a stretch of one character is one term. What
//    stands on either side of the stretch is a word of its own.
// 3. Every term is mapped by ICU's NFKC_Casefold, then U+0131 becomes `i` and U+0307 is removed
//    (so I, İ, ı and i fold together); empty terms are dropped.
// Ill-formed UTF-8 sequences separate. A query marks its prefix terms with `*` (tokenize_query).
// Thread-safe: no state beyond ICU's own immutable data.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fenec::index {

class Stemmer;

// The terms of `utf8` in text order, repeats kept. With a stemmer (a field's
// `@text(stem <language>)`, index/stemmer.h), each term is folded as in 3 but for ı (and, under
// Turkish, with I lowercased to ı and İ to i first), then stemmed, then ı becomes i: a stem is
// folded as any term is, and the stemmer saw the word as its language writes it.
std::vector<std::string> tokenize(std::string_view utf8, Stemmer* stemmer = nullptr);

// A term of a `match` query: a whole term, or a prefix standing for every term of the index
// that starts with it (fenecql.md §8, prefix terms).
struct QueryTerm {
    std::string text;
    bool prefix = false;
};

// The terms of a query, as tokenize() makes them, in text order, repeats kept. A `*` written
// right after a word (no space between) makes the word's last term a prefix: `search*`,
// `東京*`; a `*` standing alone, or after a separator, only separates. A prefix is folded as
// any term is but never stemmed: it is the start of a word, not a word.
std::vector<QueryTerm> tokenize_query(std::string_view utf8, Stemmer* stemmer = nullptr);

}  // namespace fenec::index
