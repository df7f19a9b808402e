// tools/shell_backend.h: what the shell runs statements on — a tenant file opened in this process
// (tools/shell_file.h) or a tenant of a running node or router over HTTP (tools/shell_remote.h) —
// behind one interface, so both are typed at, shown and scripted alike. Each says what a
// statement came to as the node's JSON body, so the two answer the same bytes for the same
// statement on the same data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fenec::tools {

// What one statement came to.
struct Outcome {
    bool ok = false;      // the statement ran
    std::string body;     // its answer, or its refusal (`{"error": …}`), as the node's JSON body
    std::string failure;  // no answer at all (a node not reached): said for people, body empty
};

// A collection as `.collections` and `.describe` print it.
struct CollectionText {
    std::string name;
    std::optional<uint64_t> rows;
    std::vector<std::string> definitions;  // each live field's FenecQL definition, in order
};

class Backend {
  public:
    virtual ~Backend() = default;
    virtual Outcome run(const std::string& statement) = 0;
    // The tenant's collections, or false with `failure` said.
    virtual bool collections(std::vector<CollectionText>& out, std::string& failure) = 0;
};

}  // namespace fenec::tools
