// fuzz/parse_fuzz.cc: fuzz_parse, arbitrary bytes parsed as one FenecQL statement (ql/lexer.cc,
// ql/parser.cc, ql/parse_*.cc). Seeds: fuzz/corpus/parse/, one file per example statement of
// fenecql.md §16.
//
// Beyond "never crash, never leak, never read out of bounds, never overflow the stack", each
// answer must keep the contract of ql/parser.h and ql/error.h; a broken one traps, so libFuzzer
// keeps the input:
//   - a refusal is a 400 carrying a position, or a 413 naming a limit with its maximum (only
//     statement_bytes and ranked_rows may come without a position);
//   - a position is a code point offset inside the text: at most its length;
//   - a statement parses the same way twice (the parser keeps no state between calls);
//   - an accepted statement uses parameters $1..$65535 only.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ql/lexer.h"
#include "ql/parser.h"

namespace {

void check(bool ok) {
    if (!ok) __builtin_trap();
}

void check_refusal(std::string_view text, const fenec::ql::Error& e) {
    using fenec::ql::Limit;
    check(e.status() == 400 || e.status() == 413);
    check(!e.message.empty());
    if (e.limit == Limit::none) check(e.position.has_value());
    if (e.limit != Limit::none) check(e.max > 0 && !fenec::ql::limit_name(e.limit).empty());
    bool unplaced = e.limit == Limit::statement_bytes || e.limit == Limit::ranked_rows;
    if (!unplaced) check(e.position.has_value());
    if (e.position && !fenec::ql::first_invalid_utf8(text)) {
        check(*e.position <= fenec::ql::code_points(text, text.size()));
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    fenec::ql::QlResult<fenec::ql::ParsedStatement> first = fenec::ql::parse(text);
    fenec::ql::QlResult<fenec::ql::ParsedStatement> again = fenec::ql::parse(text);
    check(first.is_ok() == again.is_ok());
    if (!first.is_ok()) {
        check_refusal(text, first.error());
        check(first.error().position == again.error().position);
        check(first.error().message == again.error().message);
        return 0;
    }
    const fenec::ql::ParsedStatement& p = first.value();
    check(p.params_max <= 65535);
    check(p.params_max == again.value().params_max);
    check(p.statement.kind() == again.value().statement.kind());
    check(!p.statement.first_word().empty());
    return 0;
}
