// json/timestamp.h: timestamps as text, both ways (fenecql.md §11, spec README decision 7). A
// timestamp is UTC milliseconds since 1970-01-01T00:00:00Z in an int64, confined to the years
// 0000 to 9999 of the proleptic Gregorian calendar. The one reader and the one writer of ISO
// text in Fenec; no libc time zone function is involved, so the result never depends on TZ. It
// sits beside the JSON writer, in the leaf every layer links, because that is the text a timestamp
// travels as: FenecQL's answers and literals, the router's merges, the logs' times.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fenec::json {

// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z.
inline constexpr int64_t timestamp_ms_min = -62'167'219'200'000;
inline constexpr int64_t timestamp_ms_max = 253'402'300'799'999;

inline constexpr bool timestamp_in_range(int64_t ms) {
    return ms >= timestamp_ms_min && ms <= timestamp_ms_max;
}

// Reads §11's text: `YYYY-MM-DD`, then optionally a separator (`T`, `t` or one space) and
// `HH:MM`, `HH:MM:SS` or `HH:MM:SS.f` (1 to 9 fraction digits, cut to milliseconds), then
// optionally a zone: `Z`, `z`, `±HH:MM`, `±HHMM` or `±HH` (hours 0 to 23, minutes 0 to 59). No
// zone is UTC. The date must exist; hours 0 to 23, minutes and seconds 0 to 59. nullopt for
// anything else, including an instant outside the years 0000 to 9999 once the zone is applied.
std::optional<int64_t> parse_timestamp(std::string_view text);

// `YYYY-MM-DDTHH:MM:SSZ`, with `.mmm` before the Z only when the milliseconds are not 0. `ms`
// should be in range; one outside it is a programmer error (asserted in debug) and still gives
// well-formed text, its year signed or wider than four digits.
std::string format_timestamp(int64_t ms);

}  // namespace fenec::json
