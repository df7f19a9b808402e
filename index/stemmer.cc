// index/stemmer.cc: index/stemmer.h over libstemmer's C API (sb_stemmer_*), UTF-8 throughout.
#include "index/stemmer.h"

#include <libstemmer.h>

#include <cassert>
#include <climits>
#include <cstdlib>

namespace fenec::index {
namespace {

// libstemmer's names of its Turkish algorithm: the name and the ISO 639-1 and -2 codes.
bool is_turkish(std::string_view language) {
    return language == "tr" || language == "tur" || language == "turkish";
}

}  // namespace

std::string stem_languages() {
    std::string out;
    for (const char** name = sb_stemmer_list(); *name != nullptr; ++name) {
        if (!out.empty()) out += ", ";
        out += *name;
    }
    return out;
}

bool stem_language_known(std::string_view language) { return Stemmer::make(language) != nullptr; }

std::unique_ptr<Stemmer> Stemmer::make(std::string_view language) {
    const std::string name(language);  // libstemmer takes a C string
    sb_stemmer* s = sb_stemmer_new(name.c_str(), nullptr);  // nullptr: UTF-8
    if (s == nullptr) return nullptr;
    return std::unique_ptr<Stemmer>(new Stemmer(s, is_turkish(language)));
}

Stemmer::~Stemmer() { sb_stemmer_delete(s_); }

std::string_view Stemmer::stem(std::string_view term) {
    // A term is at most a document's 16 MiB (engine/limits.h), far below INT_MAX.
    assert(term.size() <= static_cast<size_t>(INT_MAX));
    const sb_symbol* out = sb_stemmer_stem(s_, reinterpret_cast<const sb_symbol*>(term.data()),
                                           static_cast<int>(term.size()));
    // Null only when libstemmer cannot allocate: the process is out of memory, and a term left
    // unstemmed would sit in the index where no query finds it.
    if (out == nullptr) std::abort();
    return std::string_view(reinterpret_cast<const char*>(out),
                            static_cast<size_t>(sb_stemmer_length(s_)));
}

}  // namespace fenec::index
