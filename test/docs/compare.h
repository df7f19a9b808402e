// test/docs/compare.h: how an answer is held against the answer a page shows (the rules every
// page's opening comment states, test/docs/README.md). Each function answers nullopt when the
// answer is as shown, else one line saying where it differs and how, for the failure message.
//
//   JSON      objects key by key in order (key order included), lists element by element,
//             ints exactly, a float against a float within 1e-9 relative (an int never equals a
//             float: `25` is not `25.0`), the string "…" as a value matches anything. An error
//             answer (status 400 and up) is checked on the members the page lists only, each
//             present and equal by the same rules; "error", text for people, is never compared.
//   text      line by line; `…` inside a line matches any run of characters, a line that is
//             `…` alone any run of lines (none included). Trailing newlines are not compared.
//   events    event by event, line by line: the field names equal; a value `…` matches any; a
//             `data:` value holding JSON compares as JSON (above), any other as text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fenec::test::docs {

// `expected` and `actual` are JSON texts; `members_only` for an error answer.
std::optional<std::string> json_differs(std::string_view expected, std::string_view actual,
                                        bool members_only);

std::optional<std::string> text_differs(std::string_view expected, std::string_view actual);

// `events`: the events read, each its lines joined by '\n' (no blank line after it).
std::optional<std::string> events_differ(std::string_view expected,
                                         const std::vector<std::string>& events);

// An HTTP answer as read.
struct Answer {
    int status = 0;
    std::string reason;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
};

// The body after a ```json status=NNN block: NNN against the status, the body by the JSON rules
// (an empty block matches an empty body only).
std::optional<std::string> json_answer_differs(int status, std::string_view expected_body,
                                               const Answer& got);

// An ```http-response block: `HTTP/1.1 NNN Reason`, the headers that must be present (a value
// `…` is any value; others are not looked at), a blank line, the body (JSON rules when it parses
// as JSON, else text).
std::optional<std::string> response_differs(std::string_view expected_block, const Answer& got);

}  // namespace fenec::test::docs
