// index/tokenizer.cc: words, CJK pairs and the term mapping of index/tokenizer.h, over ICU's
// character properties (u_charType, uscript_hasScript) and its NFKC_Casefold normalizer.
#include "index/tokenizer.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/uscript.h>
#include <unicode/ustring.h>
#include <unicode/utf8.h>

#include <cassert>
#include <cstdint>
#include <limits>

#include "index/stemmer.h"

namespace fenec::index {
namespace {

enum class CharClass : uint8_t { separator, word, cjk, mark };

bool is_cjk(UChar32 c) {
    return uscript_hasScript(c, USCRIPT_HAN) || uscript_hasScript(c, USCRIPT_HIRAGANA) ||
           uscript_hasScript(c, USCRIPT_KATAKANA) || uscript_hasScript(c, USCRIPT_HANGUL);
}

CharClass classify(UChar32 c) {
    if (c < 0x80) {
        const bool alnum =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        return alnum ? CharClass::word : CharClass::separator;
    }
    switch (u_charType(c)) {
        case U_NON_SPACING_MARK: case U_ENCLOSING_MARK: case U_COMBINING_SPACING_MARK:
            return CharClass::mark;
        case U_UPPERCASE_LETTER: case U_LOWERCASE_LETTER: case U_TITLECASE_LETTER:
        case U_MODIFIER_LETTER: case U_OTHER_LETTER:
        case U_DECIMAL_DIGIT_NUMBER: case U_LETTER_NUMBER: case U_OTHER_NUMBER:
            return is_cjk(c) ? CharClass::cjk : CharClass::word;
        default:
            return CharClass::separator;
    }
}

// A piece of the current word: a run of non-CJK characters, or one CJK character; marks that
// follow extend it. Byte offsets into the text.
struct Unit {
    int32_t begin = 0;
    int32_t end = 0;
    bool cjk = false;
};

// Maps terms by NFKC_Casefold and the two Turkish rules; reuses its buffers across terms.
// Before a stemmer (`keep_dotless`), ı is kept for it and U+0307 still removed; under a Turkish
// stemmer I and İ are first lowercased as Turkish does (I → ı, İ and I + U+0307 → i).
class TermMapper {
public:
  TermMapper(std::vector<std::string>& out, bool keep_dotless, bool turkish)
      : out_(out), keep_dotless_(keep_dotless), turkish_(turkish) {}

  void emit(std::string_view raw) {
      bool ascii = true;
      for (char ch : raw) ascii = ascii && static_cast<unsigned char>(ch) < 0x80;
      if (ascii && turkish_ && raw.find('I') != std::string_view::npos) ascii = false;
      if (ascii) {  // letters and digits only: NFKC_Casefold is lower-casing
          std::string term(raw);
          for (char& ch : term) {
              if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
          }
          out_.push_back(std::move(term));
          return;
      }
      emit_icu(raw);
    }

private:
    void emit_icu(std::string_view raw) {
        UErrorCode err = U_ZERO_ERROR;
        const UNormalizer2* nfkc_cf = unorm2_getNFKCCasefoldInstance(&err);
        assert(U_SUCCESS(err));  // ICU's data is linked in; its absence is a build error
        // UTF-16 never needs more code units than UTF-8 has bytes.
        src_.resize(raw.size());
        int32_t src_len = 0;
        u_strFromUTF8WithSub(src_.data(), static_cast<int32_t>(src_.size()), &src_len, raw.data(),
                             static_cast<int32_t>(raw.size()), 0xFFFD, nullptr, &err);
        assert(U_SUCCESS(err));
        if (turkish_) src_len = lower_turkish_i(src_len);
        if (dst_.size() < src_.size() * 2 + 8) dst_.resize(src_.size() * 2 + 8);
        int32_t dst_len = unorm2_normalize(nfkc_cf, src_.data(), src_len, dst_.data(),
                                           static_cast<int32_t>(dst_.size()), &err);
        if (err == U_BUFFER_OVERFLOW_ERROR) {  // expansions such as U+FDFA
            err = U_ZERO_ERROR;
            dst_.resize(static_cast<size_t>(dst_len));
            dst_len = unorm2_normalize(nfkc_cf, src_.data(), src_len, dst_.data(),
                                       static_cast<int32_t>(dst_.size()), &err);
        }
        assert(U_SUCCESS(err));
        int32_t kept = 0;
        for (int32_t i = 0; i < dst_len; ++i) {
            const char16_t u = dst_[static_cast<size_t>(i)];
            if (u == 0x0307) continue;
            dst_[static_cast<size_t>(kept++)] = u == 0x0131 && !keep_dotless_ ? char16_t{'i'} : u;
        }
        if (kept == 0) return;  // empty terms are dropped
        std::string term(static_cast<size_t>(kept) * 3, '\0');
        int32_t term_len = 0;
        u_strToUTF8WithSub(term.data(), static_cast<int32_t>(term.size()), &term_len, dst_.data(),
                           kept, 0xFFFD, nullptr, &err);
        assert(U_SUCCESS(err));
        term.resize(static_cast<size_t>(term_len));
        out_.push_back(std::move(term));
    }

    // I → ı, İ → i and I + U+0307 → i in src_'s first `len` units (Turkish lowercasing of the
    // I forms; NFKC_Casefold then leaves ı and i as they are). Returns the new length.
    int32_t lower_turkish_i(int32_t len) {
        int32_t kept = 0;
        for (int32_t i = 0; i < len; ++i) {
            char16_t u = src_[static_cast<size_t>(i)];
            if (u == u'I' && i + 1 < len && src_[static_cast<size_t>(i) + 1] == 0x0307) {
                u = u'i';
                ++i;
            } else if (u == u'I') {
                u = 0x0131;
            } else if (u == 0x0130) {
                u = u'i';
            }
            src_[static_cast<size_t>(kept++)] = u;
        }
        return kept;
    }

    std::vector<std::string>& out_;
    const bool keep_dotless_;
    const bool turkish_;
    std::u16string src_;
    std::u16string dst_;
};

// Emits the terms of one word: its non-CJK stretches whole, its CJK stretches as pairs.
void emit_word(std::string_view text, const std::vector<Unit>& word, TermMapper& mapper) {
    auto piece = [&](int32_t begin, int32_t end) {
        mapper.emit(text.substr(static_cast<size_t>(begin), static_cast<size_t>(end - begin)));
    };
    size_t i = 0;
    while (i < word.size()) {
        if (!word[i].cjk) {  // adjacent non-CJK characters were merged into one unit
            piece(word[i].begin, word[i].end);
            ++i;
            continue;
        }
        size_t j = i;
        while (j < word.size() && word[j].cjk) ++j;
        if (j - i == 1) {
            piece(word[i].begin, word[i].end);
        } else {
            for (size_t p = i; p + 1 < j; ++p) piece(word[p].begin, word[p + 1].end);
        }
        i = j;
    }
}

// ı (U+0131, C4 B1 in UTF-8) → i in a stem: the last step of the term mapping, after a stemmer
// that needed ı to tell Turkish vowels apart.
void fold_dotless(std::string& term) {
    size_t kept = 0;
    for (size_t i = 0; i < term.size(); ++i) {
        if (term[i] == '\xC4' && i + 1 < term.size() && term[i + 1] == '\xB1') {
            term[kept++] = 'i';
            ++i;
        } else {
            term[kept++] = term[i];
        }
    }
    term.resize(kept);
}

// Splits `utf8` into terms, stemmed by `stemmer` unless it is null. `prefix_at(end)` says
// whether the word ending at byte offset `end` is a query's prefix, whose last term is left
// unstemmed; `word_end(before, after)` is called after each word with the count of terms
// before and after it.
template <class PrefixAt, class WordEnd>
std::vector<std::string> split(std::string_view utf8, Stemmer* stemmer, PrefixAt prefix_at,
                               WordEnd word_end) {
    std::vector<std::string> terms;
    // ICU indexes in int32_t; a document is at most 16 MiB (engine/limits.h).
    assert(utf8.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()));
    const auto* s = reinterpret_cast<const uint8_t*>(utf8.data());
    const auto n = static_cast<int32_t>(utf8.size());
    TermMapper mapper(terms, stemmer != nullptr, stemmer != nullptr && stemmer->turkish());
    std::vector<Unit> word;
    auto flush = [&] {
        if (word.empty()) return;
        const size_t before = terms.size();
        emit_word(utf8, word, mapper);
        const bool prefix = prefix_at(word.back().end);
        if (stemmer != nullptr) {
            for (size_t t = before; t < terms.size(); ++t) {
                if (!(prefix && t + 1 == terms.size())) {
                    const std::string_view stem = stemmer->stem(terms[t]);
                    if (!stem.empty()) terms[t] = std::string(stem);
                }
                fold_dotless(terms[t]);
            }
        }
        word_end(before, terms.size(), prefix);
        word.clear();
    };
    int32_t i = 0;
    while (i < n) {
        const int32_t start = i;
        UChar32 c = 0;
        U8_NEXT(s, i, n, c);
        const CharClass cls = c < 0 ? CharClass::separator : classify(c);
        switch (cls) {
            case CharClass::separator:
                flush();
                break;
            case CharClass::mark:  // joins the character before it; alone, it separates
                if (word.empty()) break;
                word.back().end = i;
                break;
            case CharClass::word:
                if (!word.empty() && !word.back().cjk) {
                    word.back().end = i;
                } else {
                    word.push_back(Unit{start, i, false});
                }
                break;
            case CharClass::cjk:
                word.push_back(Unit{start, i, true});
                break;
        }
    }
    flush();
    return terms;
}

}  // namespace

std::vector<std::string> tokenize(std::string_view utf8, Stemmer* stemmer) {
    return split(
        utf8, stemmer, [](int32_t) { return false; }, [](size_t, size_t, bool) {});
}

std::vector<QueryTerm> tokenize_query(std::string_view utf8, Stemmer* stemmer) {
    std::vector<size_t> prefixes;  // indexes of the terms a `*` follows
    auto star_after = [&](int32_t end) {
        const auto at = static_cast<size_t>(end);
        return at < utf8.size() && utf8[at] == '*';
    };
    std::vector<std::string> terms =
        split(utf8, stemmer, star_after, [&](size_t before, size_t after, bool prefix) {
            if (prefix && after > before) prefixes.push_back(after - 1);
        });
    std::vector<QueryTerm> out;
    out.reserve(terms.size());
    for (std::string& t : terms) out.push_back(QueryTerm{std::move(t), false});
    for (size_t i : prefixes) out[i].prefix = true;
    return out;
}

}  // namespace fenec::index
