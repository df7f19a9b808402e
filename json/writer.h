// json/writer.h: Fenec's one JSON writer (one codec per format): FenecQL's answers, the node's and
// the router's bodies and log lines are all written through it. A leaf: it includes nothing of
// the project, so every layer can link it (the JSON form of an engine value, fenecql.md §12.2,
// is ql's: ql/value_json.h). It appends to a caller's std::string.
//
// Invariants of the output:
// - It is valid RFC 8259 JSON whenever the calls nest properly (begin/end matched, a key before
//   every member of an object, none in an array); commas are placed by the writer.
// - Strings are valid UTF-8: `"`, `\` and control characters are escaped (\b \f \n \r \t, the
//   others as \u00XX); other characters pass as UTF-8; an ill-formed byte sequence, which is a
//   programmer error upstream (the engine validates text), is written as U+FFFD.
// - A float always shows `.` or an exponent, an int never does, so readers keep the kinds apart.
//   Floats are the shortest decimal reading back as the same double (float32 for vectors).
//   A non-finite float never enters Fenec (§5.1): writing one is a programmer error, asserted in
//   debug and written as null otherwise.
//
// Not thread-safe; one writer per output string. The string must outlive the writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fenec::json {

class Writer {
  public:
    explicit Writer(std::string& out) : out_(out) {}

    void begin_object();
    void end_object();
    void begin_array();
    void end_array();
    // The name of the next member; the next call writes its value.
    void key(std::string_view name);

    void string(std::string_view utf8);
    void int64(int64_t v);
    void uint64(uint64_t v);
    void float64(double v);  // shortest round trip; `.0` when neither `.` nor `e` shows
    void float32(float v);   // shortest reading back as the same float; same `.0` rule
    void boolean(bool v);
    void null();
    // A value already encoded as JSON (a row cached as text); written as is.
    void raw(std::string_view json);

    // Containers opened and not yet closed; 0 once a whole value is written.
    size_t depth() const { return open_.size(); }

  private:
    void before_value();

    std::string& out_;
    std::string open_;         // '{' or '[' per open container, for the debug checks
    bool need_comma_ = false;  // a value or member was written at this level
    bool after_key_ = false;   // a key was written; its value comes next
};

}  // namespace fenec::json
