// index/collation.cc: text rules over ICU (index/collation.h). ICU is reached through its UTF-8
// entry points (ucol_strcollUTF8, CaseMap::utf8Fold); only ucol_getSortKey needs UTF-16, so
// sort_key converts, substituting U+FFFD for ill-formed bytes as ucol_strcollUTF8 reads them.
#include "index/collation.h"

#include <unicode/casemap.h>
#include <unicode/uchar.h>
#include <unicode/ucol.h>
#include <unicode/ustring.h>

#include <cassert>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace fenec::index {
namespace {

using engine::Collation;

// ICU measures strings in int32_t. A document is at most 16 MiB (engine/limits.h), so a text
// past this is a programmer error; such a text is ordered by bytes alone.
constexpr size_t kIcuBytesMax = static_cast<size_t>(std::numeric_limits<int32_t>::max()) / 2;

struct CollatorCloser {
    void operator()(UCollator* c) const { ucol_close(c); }
};
using CollatorPtr = std::unique_ptr<UCollator, CollatorCloser>;

// Opens `locale` at tertiary strength with normalization on (§6.3); null when ICU fails. A
// fallback warning (U_USING_DEFAULT_WARNING) is not a failure.
CollatorPtr open_collator(const char* locale) {
    UErrorCode err = U_ZERO_ERROR;
    CollatorPtr c(ucol_open(locale, &err));
    if (U_FAILURE(err) || c == nullptr) return nullptr;
    ucol_setStrength(c.get(), UCOL_TERTIARY);
    ucol_setAttribute(c.get(), UCOL_NORMALIZATION_MODE, UCOL_ON, &err);
    if (U_FAILURE(err)) return nullptr;
    return c;
}

// This thread's collators, each opened on first use and tried once: a failed open leaves it null
// for the thread's life, so the thread orders by bytes consistently.
struct ThreadCollators {
    CollatorPtr root;
    CollatorPtr turkish;
    bool root_tried = false;
    bool turkish_tried = false;
};

const UCollator* collator(Collation c) {
    thread_local ThreadCollators t;
    if (c == Collation::tr) {
        if (!t.turkish_tried) {
            t.turkish = open_collator("tr");
            t.turkish_tried = true;
        }
        return t.turkish.get();
    }
    assert(c == Collation::und);
    if (!t.root_tried) {
        t.root = open_collator("");
        t.root_tried = true;
    }
    return t.root.get();
}

// The collator of `c`, or null when the texts order by bytes alone.
const UCollator* collator_for(Collation c, std::string_view a, std::string_view b = {}) {
    if (c == Collation::bytes) return nullptr;
    if (a.size() > kIcuBytesMax || b.size() > kIcuBytesMax) {
        assert(false && "text longer than any document");
        return nullptr;
    }
    return collator(c);
}

int sign(int v) { return (v > 0) - (v < 0); }

int compare_bytes(std::string_view a, std::string_view b) { return sign(a.compare(b)); }

// Collates `a` and `b` under `c`, their bytes deciding where ICU ties (§6.3).
int compare_collated(std::string_view a, std::string_view b, Collation c) {
    if (a == b) return 0;
    if (const UCollator* coll = collator_for(c, a, b)) {
        UErrorCode err = U_ZERO_ERROR;
        const UCollationResult r = ucol_strcollUTF8(coll, a.data(), static_cast<int32_t>(a.size()),
                                                    b.data(), static_cast<int32_t>(b.size()), &err);
        if (U_SUCCESS(err) && r != UCOL_EQUAL) return r == UCOL_LESS ? -1 : 1;
    }
    return compare_bytes(a, b);
}

// What a thread reuses from one sort key to the next: the fold and the UTF-16 text, so a key costs
// no allocation of its own once they have grown to the texts at hand. A buffer past
// kScratchBytesMax is given back after its key, so one long text does not pin its size for the
// thread's life.
struct SortKeyScratch {
    std::string folded;
    std::vector<UChar> utf16;
    std::string key;  // sort_key's, copied out at its exact size
};
constexpr size_t kScratchBytesMax = 64 * 1024;

SortKeyScratch& sort_key_scratch() {
    thread_local SortKeyScratch s;
    return s;
}

void trim_scratch(SortKeyScratch& s) {
    if (s.folded.capacity() > kScratchBytesMax) std::string().swap(s.folded);
    if (s.utf16.capacity() * sizeof(UChar) > kScratchBytesMax) std::vector<UChar>().swap(s.utf16);
}

// UTF-16 for ucol_getSortKey. A UTF-8 byte never yields more than one UTF-16 unit (a 4-byte
// sequence gives two, a bad byte one U+FFFD), so `utf8.size()` units always suffice.
bool to_utf16(std::string_view utf8, std::vector<UChar>& out) {
    out.resize(utf8.size());
    int32_t length = 0;
    UErrorCode err = U_ZERO_ERROR;
    u_strFromUTF8WithSub(out.data(), static_cast<int32_t>(out.size()), &length, utf8.data(),
                         static_cast<int32_t>(utf8.size()), 0xFFFD, nullptr, &err);
    if (U_FAILURE(err)) return false;
    out.resize(static_cast<size_t>(length));
    return true;
}

// Appends ICU's sort key of `text` without its 0x00 terminator; false (nothing appended) on
// failure. `utf16` is scratch. The key is written straight into `out`, into the room its
// capacity already has when that is enough (ICU's key is rarely longer than 2 bytes a unit).
bool append_icu_key(const UCollator* coll, std::string_view text, std::vector<UChar>& utf16,
                    std::string& out) {
    if (!to_utf16(text, utf16)) return false;
    const auto units = static_cast<int32_t>(utf16.size());
    const size_t start = out.size();
    int32_t capacity = 2 * units + 16;
    for (int attempt = 0; attempt < 2; ++attempt) {
        out.resize(start + static_cast<size_t>(capacity));
        auto* dest = reinterpret_cast<uint8_t*>(out.data() + start);
        const int32_t needed = ucol_getSortKey(coll, utf16.data(), units, dest, capacity);
        if (needed <= 0) break;  // ICU failed
        if (needed <= capacity) {
            out.resize(start + static_cast<size_t>(needed) - 1);  // drop the terminator
            return true;
        }
        capacity = needed;
    }
    out.resize(start);
    return false;
}

// Runs an ICU UTF-8 to UTF-8 mapping (fold, upper, lower) into `out`, growing it once if ICU
// asks for more. On any ICU failure the text stands for itself.
template <class Map>
void map_utf8_into(std::string_view utf8, Map&& map, std::string& out) {
    if (utf8.size() > kIcuBytesMax) {
        assert(false && "text longer than any document");
        out.assign(utf8);
        return;
    }
    const auto length = static_cast<int32_t>(utf8.size());
    out.resize(utf8.size() + 16);
    for (int attempt = 0; attempt < 2; ++attempt) {
        UErrorCode err = U_ZERO_ERROR;
        const int32_t needed = map(utf8.data(), length, out.data(), static_cast<int32_t>(out.size()), err);
        if (err == U_BUFFER_OVERFLOW_ERROR) {
            out.resize(static_cast<size_t>(needed));
            continue;
        }
        if (U_FAILURE(err)) break;
        out.resize(static_cast<size_t>(needed));
        return;
    }
    out.assign(utf8);
}

template <class Map>
std::string map_utf8(std::string_view utf8, Map&& map) {
    std::string out;
    map_utf8_into(utf8, map, out);
    return out;
}

void fold_into(std::string_view utf8, bool turkish, std::string& out) {
    const uint32_t options = turkish ? U_FOLD_CASE_EXCLUDE_SPECIAL_I : U_FOLD_CASE_DEFAULT;
    map_utf8_into(
        utf8,
        [&](const char* src, int32_t n, char* dst, int32_t cap, UErrorCode& err) {
            return icu::CaseMap::utf8Fold(options, src, n, dst, cap, nullptr, err);
        },
        out);
}

// sort_key(text, rule) appended to `out` (which `text` must not lie in). Once this thread's scratch
// has grown to the texts at hand, a key allocates only what `out` needs to grow by.
void append_text_sort_key(std::string_view text, const TextRule& rule, std::string& out) {
    SortKeyScratch& scratch = sort_key_scratch();
    std::string_view tie = text;
    if (rule.nocase) {
        fold_into(text, rule.fold == Collation::tr, scratch.folded);
        tie = scratch.folded;
    }
    if (const UCollator* coll = collator_for(rule.collation, tie)) {
        if (append_icu_key(coll, tie, scratch.utf16, out)) out.push_back('\0');
    }
    out.append(tie);
    trim_scratch(scratch);
}

}  // namespace

std::string fold(std::string_view utf8, bool turkish) {
    std::string out;
    fold_into(utf8, turkish, out);
    return out;
}

int compare_text(std::string_view a, std::string_view b, const TextRule& rule) {
    if (!rule.nocase) return compare_collated(a, b, rule.collation);
    if (a == b) return 0;
    const bool turkish = rule.fold == Collation::tr;
    return compare_collated(fold(a, turkish), fold(b, turkish), rule.collation);
}

bool equal_text(std::string_view a, std::string_view b, const TextRule& rule) {
    if (a == b) return true;
    if (!rule.nocase) return false;
    const bool turkish = rule.fold == Collation::tr;
    return fold(a, turkish) == fold(b, turkish);
}

std::string sort_key(std::string_view text, const TextRule& rule) {
    if (rule.collation == Collation::bytes && !rule.nocase) return std::string(text);
    // Built where ICU's room to write in is already there, then copied out at its size: one
    // allocation of the key's size, none for a short key.
    std::string& key = sort_key_scratch().key;
    key.clear();
    append_text_sort_key(text, rule, key);
    std::string out(key);
    if (key.capacity() > kScratchBytesMax) std::string().swap(key);
    return out;
}

std::string change_case(std::string_view utf8, bool upper) {
    // The root locale: Unicode's default mapping, the same on every node (§6.5).
    return map_utf8(utf8, [&](const char* src, int32_t n, char* dst, int32_t cap, UErrorCode& err) {
        return upper ? icu::CaseMap::utf8ToUpper("", 0, src, n, dst, cap, nullptr, err)
                     : icu::CaseMap::utf8ToLower("", 0, src, n, dst, cap, nullptr, err);
    });
}

bool contains_folded(std::string_view hay, std::string_view needle, bool turkish) {
    if (needle.empty()) return true;
    return fold(hay, turkish).find(fold(needle, turkish)) != std::string::npos;
}

}  // namespace fenec::index
