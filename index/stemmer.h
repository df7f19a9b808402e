// index/stemmer.h: Snowball stemming for a field declared `@text(stem <language>)`, through
// libstemmer (Debian's libstemmer-dev), the one file that includes it. The tokenizer stems a
// stemmed field's terms at index and at query time alike (index/tokenizer.h), so a document
// term and a query term meet exactly when their stems are equal.
//
// A language is named as libstemmer names its algorithms: the English name or an ISO 639 code
// (`en`, `eng`, `english`; `tr`, `tur`, `turkish`), in lower case. Which ones exist is
// libstemmer's list, read at run time, never a copy of it here.
#pragma once

#include <memory>
#include <string>
#include <string_view>

struct sb_stemmer;

namespace fenec::index {

// libstemmer's algorithms, as it lists them (canonical names, comma separated): for messages.
std::string stem_languages();

// Whether libstemmer has an algorithm for `language`.
bool stem_language_known(std::string_view language);

// One stemmer of one language. Not thread-safe (libstemmer keeps the last stem in it): a field
// keeps one for its writes, which the engine's writer lock serializes, and a query makes its own.
class Stemmer {
public:
    // The stemmer of `language`; null when libstemmer has none of that name.
    static std::unique_ptr<Stemmer> make(std::string_view language);
    ~Stemmer();
    Stemmer(const Stemmer&) = delete;
    Stemmer& operator=(const Stemmer&) = delete;

    // The stem of `term` (UTF-8, folded by the tokenizer); valid until the next call.
    std::string_view stem(std::string_view term);
    // Turkish: the tokenizer lowercases I as ı (and İ as i) before it stems, as Turkish does, so
    // the suffixes' vowel harmony is read right; the stem is folded as every term is after.
    bool turkish() const { return turkish_; }

private:
    Stemmer(sb_stemmer* s, bool turkish) : s_(s), turkish_(turkish) {}
    sb_stemmer* s_;
    bool turkish_;
};

}  // namespace fenec::index
