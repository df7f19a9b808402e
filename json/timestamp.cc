// json/timestamp.cc: ISO text <-> UTC milliseconds (json/timestamp.h). Calendar arithmetic is
// Howard Hinnant's days-from-civil / civil-from-days over the proleptic Gregorian calendar, exact
// for every int64 millisecond; nothing reads the process's time zone.
#include "json/timestamp.h"

#include <cassert>
#include <charconv>

namespace fenec::json {
namespace {

constexpr int64_t kMsPerDay = 86'400'000;
constexpr int64_t kMsPerMinute = 60'000;

struct Civil {
    int64_t year;
    int month;  // 1..12
    int day;    // 1..31
};

// Days since 1970-01-01 of a proleptic Gregorian date.
constexpr int64_t days_from_civil(Civil c) {
    const int64_t y = c.year - (c.month <= 2);
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t yoe = y - era * 400;  // [0, 399]
    const int64_t doy = (153 * (c.month > 2 ? c.month - 3 : c.month + 9) + 2) / 5 + c.day - 1;
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;  // [0, 146096]
    return era * 146097 + doe - 719468;
}

constexpr Civil civil_from_days(int64_t z) {
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const int64_t doe = z - era * 146097;                                       // [0, 146096]
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                // [0, 365]
    const int64_t mp = (5 * doy + 2) / 153;                                     // [0, 11]
    const int day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
    const int month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
    return Civil{yoe + era * 400 + (month <= 2), month, day};
}

static_assert(days_from_civil({1970, 1, 1}) == 0);
static_assert(days_from_civil({0, 1, 1}) * kMsPerDay == timestamp_ms_min);
static_assert(civil_from_days(-719528).year == 0);

constexpr bool is_leap(int64_t y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); }

constexpr int days_in_month(int64_t year, int month) {
    constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return month == 2 && is_leap(year) ? 29 : kDays[month - 1];
}

// A left-to-right reader over the text; every read either consumes exactly what it names or
// fails without a partial meaning.
class Cursor {
  public:
    explicit Cursor(std::string_view s) : s_(s) {}
    bool at_end() const { return pos_ == s_.size(); }
    bool eat(char c) {
        if (at_end() || s_[pos_] != c) return false;
        ++pos_;
        return true;
    }
    bool eat_any(std::string_view chars, char* which = nullptr) {
        if (at_end() || chars.find(s_[pos_]) == std::string_view::npos) return false;
        if (which != nullptr) *which = s_[pos_];
        ++pos_;
        return true;
    }
    bool digit_next() const { return !at_end() && s_[pos_] >= '0' && s_[pos_] <= '9'; }
    // Exactly `n` digits as a number; nullopt (nothing consumed) when fewer are there.
    std::optional<int> digits(int n) {
        int v = 0;
        for (int i = 0; i < n; ++i) {
            const size_t at = pos_ + static_cast<size_t>(i);
            if (at >= s_.size() || s_[at] < '0' || s_[at] > '9') return std::nullopt;
            v = v * 10 + (s_[at] - '0');
        }
        pos_ += static_cast<size_t>(n);
        return v;
    }

  private:
    std::string_view s_;
    size_t pos_ = 0;
};

// `YYYY-MM-DD` as days since the epoch.
std::optional<int64_t> read_date(Cursor& in) {
    const auto year = in.digits(4);
    if (!year || !in.eat('-')) return std::nullopt;
    const auto month = in.digits(2);
    if (!month || !in.eat('-')) return std::nullopt;
    const auto day = in.digits(2);
    if (!day || *month < 1 || *month > 12 || *day < 1 || *day > days_in_month(*year, *month)) {
        return std::nullopt;
    }
    return days_from_civil({*year, *month, *day});
}

// `.f` with 1 to 9 digits, cut (not rounded) to milliseconds.
std::optional<int64_t> read_fraction_ms(Cursor& in) {
    int64_t ms = 0;
    int count = 0;
    while (in.digit_next()) {
        const int d = *in.digits(1);
        if (++count > 9) return std::nullopt;
        if (count <= 3) ms = ms * 10 + d;
    }
    if (count == 0) return std::nullopt;
    for (; count < 3; ++count) ms *= 10;
    return ms;
}

// `HH:MM[:SS[.f]]` as milliseconds into the day.
std::optional<int64_t> read_time_ms(Cursor& in) {
    const auto hour = in.digits(2);
    if (!hour || !in.eat(':')) return std::nullopt;
    const auto minute = in.digits(2);
    if (!minute) return std::nullopt;
    int second = 0;
    int64_t fraction_ms = 0;
    if (in.eat(':')) {
        const auto s = in.digits(2);
        if (!s) return std::nullopt;
        second = *s;
        if (in.eat('.')) {
            const auto f = read_fraction_ms(in);
            if (!f) return std::nullopt;
            fraction_ms = *f;
        }
    }
    if (*hour > 23 || *minute > 59 || second > 59) return std::nullopt;
    return ((*hour * 60 + *minute) * 60 + second) * int64_t{1000} + fraction_ms;
}

// The zone's offset east of UTC in milliseconds; 0 when the text ends here (UTC).
std::optional<int64_t> read_offset_ms(Cursor& in) {
    if (in.at_end() || in.eat_any("Zz")) return 0;
    char sign = 0;
    if (!in.eat_any("+-", &sign)) return std::nullopt;
    const auto hours = in.digits(2);
    if (!hours) return std::nullopt;
    int minutes = 0;
    if (!in.at_end()) {
        const bool colon = in.eat(':');
        const auto m = in.digits(2);
        if (!m || (!colon && !in.at_end())) return std::nullopt;
        minutes = *m;
    }
    if (*hours > 23 || minutes > 59) return std::nullopt;
    const int64_t offset = (*hours * 60 + minutes) * kMsPerMinute;
    return sign == '-' ? -offset : offset;
}

// Appends `v` (>= 0) with at least `width` digits, zero-padded.
void put_padded(std::string& out, int64_t v, int width) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    for (auto n = r.ptr - buf; n < width; ++n) out.push_back('0');
    out.append(buf, r.ptr);
}

void put_year(std::string& out, int64_t year) {
    if (year < 0) {
        out.push_back('-');
        put_padded(out, -year, 4);
    } else {
        put_padded(out, year, 4);
    }
}

}  // namespace

std::optional<int64_t> parse_timestamp(std::string_view text) {
    Cursor in(text);
    const auto days = read_date(in);
    if (!days) return std::nullopt;
    int64_t ms = *days * kMsPerDay;
    if (!in.at_end()) {
        if (!in.eat_any("Tt ")) return std::nullopt;
        const auto time_ms = read_time_ms(in);
        const auto offset_ms = time_ms ? read_offset_ms(in) : std::nullopt;
        if (!offset_ms || !in.at_end()) return std::nullopt;
        ms += *time_ms - *offset_ms;
    }
    if (!timestamp_in_range(ms)) return std::nullopt;
    return ms;
}

std::string format_timestamp(int64_t ms) {
    assert(timestamp_in_range(ms));
    int64_t days = ms / kMsPerDay;
    int64_t in_day = ms % kMsPerDay;
    if (in_day < 0) {  // floor, so instants before 1970 count back from their own midnight
        in_day += kMsPerDay;
        --days;
    }
    const Civil c = civil_from_days(days);
    std::string out;
    out.reserve(24);
    put_year(out, c.year);
    out.push_back('-');
    put_padded(out, c.month, 2);
    out.push_back('-');
    put_padded(out, c.day, 2);
    out.push_back('T');
    put_padded(out, in_day / 3'600'000, 2);
    out.push_back(':');
    put_padded(out, in_day / kMsPerMinute % 60, 2);
    out.push_back(':');
    put_padded(out, in_day / 1000 % 60, 2);
    if (const int64_t milli = in_day % 1000; milli != 0) {
        out.push_back('.');
        put_padded(out, milli, 3);
    }
    out.push_back('Z');
    return out;
}

}  // namespace fenec::json
