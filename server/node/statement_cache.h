// server/node/statement_cache.h: parsed statements kept by their text, so a statement sent again
// (every REST read of a collection, a client's prepared-style `/query`) is not lexed and parsed
// again. A parsed statement is immutable and holds no view into its text, so threads share it.
// Bounded: past statements_max entries the cache starts over (a workload of ever-new texts pays
// a parse each, as without it). Refusals are not kept.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ql/parser.h"

namespace fenec::node {

class StatementCache {
public:
    static constexpr size_t statements_max = 4096;  // distinct texts kept
    static constexpr size_t text_bytes_max = 4096;  // longer texts are parsed each time

    // The statement for `text`, parsed now or earlier; the error when it does not parse.
    std::shared_ptr<const ql::ParsedStatement> get(std::string_view text, ql::Error& error) {
        if (text.size() <= text_bytes_max) {
            std::lock_guard lock(mu_);
            auto it = map_.find(text);  // no key string built on a hit
            if (it != map_.end()) return it->second;
        }
        ql::QlResult<ql::ParsedStatement> parsed = ql::parse(text);
        if (!parsed) {
            error = parsed.error();
            return nullptr;
        }
        auto p = std::make_shared<const ql::ParsedStatement>(std::move(parsed.value()));
        if (text.size() <= text_bytes_max) {
            std::lock_guard lock(mu_);
            if (map_.size() >= statements_max) map_.clear();
            map_.emplace(std::string(text), p);
        }
        return p;
    }

private:
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::mutex mu_;
    std::unordered_map<std::string, std::shared_ptr<const ql::ParsedStatement>, Hash, std::equal_to<>>
        map_;
};

}  // namespace fenec::node
