// server/runtime/flags.h: the one command-line reader of fenec-node and fenec-shard (node-http.md
// §1.1, router.md §2.2). A binary lists its flags in one table, which drives both the reading and
// --help, so a flag cannot be read without being documented; the table stays with the binary's
// options (server/node/options.cc, shard/options.cc), the reading is here.
//
// Flags are read left to right, `--name value` or `--name=value`; `--help` (or `-h`) and
// `--version` stop the read at once. The first problem ends it with one message that names the
// flag: an unknown flag, a missing value, a value given to a switch, a value its setter refuses. A
// refused value may leave its field as it was; the caller exits 2 with the message either way.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fenec::server::flags {

// Reads one value's text into the options it was made for; false refuses the value.
using Setter = std::function<bool(const std::string& value)>;

struct Flag {
    const char* name;   // "--listen"
    const char* value;  // "<host:port>" for --help and messages; nullptr: a switch, no value
    const char* help;
    Setter set;
};

struct Outcome {
    bool help = false;     // --help or -h: print help_text, exit 0
    bool version = false;  // --version: print the binary's name and version, exit 0
    std::string error;     // non-empty: print it, exit 2
};

// Reads `args` (argv without argv[0]) against `table`.
Outcome parse(const std::vector<Flag>& table, const std::vector<std::string>& args);

// A binary's options as read from its command line.
template <class Options>
struct Parsed {
    Options options;
    bool help = false;     // --help or -h: print help_text, exit 0
    bool version = false;  // --version: print the binary's name and version, exit 0
    std::string error;     // non-empty: print it, exit 2
};

// Reads `args` into `defaults` through the table `table_of` makes for them (its setters write the
// options they were made for, so one table serves the read and, made for scratch options, --help).
template <class Options>
Parsed<Options> parse(Options defaults, std::vector<Flag> (*table_of)(Options&),
                      const std::vector<std::string>& args) {
    Parsed<Options> out;
    out.options = std::move(defaults);
    Outcome read = parse(table_of(out.options), args);
    out.help = read.help;
    out.version = read.version;
    out.error = std::move(read.error);
    return out;
}

// `preamble`, then a line per flag: "  <name> <value>" padded to `column` and its help (a name
// that reaches the column puts its help on the next line, indented to the column), then --help
// and --version.
std::string help_text(std::string_view preamble, const std::vector<Flag>& table, size_t column);

// A whole unsigned decimal of at most `max` (no sign, no space, no empty text).
bool read_u64(const std::string& text, uint64_t& out, uint64_t max = UINT64_MAX);

// Setters for the common kinds of value.
Setter text(std::string& field);                 // any non-empty text
Setter text(std::optional<std::string>& field);  // any non-empty text
Setter on(bool& field);                          // a switch: sets true
// A whole decimal from `min` to `max`.
Setter number(uint32_t& field, uint64_t max, uint64_t min = 0);
Setter number(uint64_t& field, uint64_t max, uint64_t min = 0);
// A size: bytes, or a k, m or g suffix (KiB, MiB, GiB, either case); from 1 byte to 1 TiB.
Setter size_bytes(uint64_t& field);
// Decimal seconds (`2.5`) kept as milliseconds: more than 0 and at most a day, and at least 1 ms
// once rounded.
Setter seconds_as_ms(uint64_t& field);

// Whether a --listen value's host is loopback: 127.0.0.0/8, ::1 (bracketed) or localhost.
bool is_loopback(const std::string& listen);

}  // namespace fenec::server::flags
