// shard/node_tokens.cc: a node's admin token read where its row says (shard/node_tokens.h), and
// the sidecar `<directory>.tokens`, written through the engine's Fs by its one durable replace,
// so it is created 0600 and a crash leaves the old content or the new one whole.
#include "shard/node_tokens.h"

#include <cstdlib>

#include "engine/io.h"

namespace fenec::shard {

namespace {

using engine::Code;
using engine::Status;

bool has_line_break(std::string_view s) {
    return s.find_first_of("\r\n") != std::string_view::npos;
}

}  // namespace

bool valid_env_name(std::string_view name) {
    if (name.empty() || name.size() > 255) return false;
    for (size_t i = 0; i < name.size(); ++i) {
        const char c = name[i];
        const bool letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
    }
    return true;
}

engine::Result<std::string> read_node_token(std::string_view token_env,
                                            std::string_view token_file) {
    std::string token;
    std::string where;
    if (!token_env.empty()) {
        where = "environment variable " + std::string(token_env);
        const char* v = std::getenv(std::string(token_env).c_str());
        if (v == nullptr) {
            return Status::error(Code::invalid_argument,
                                 where + " is not set in this router's environment");
        }
        token = v;
    } else {
        where = "token file " + std::string(token_file);
        auto text = engine::read_small(engine::posix_fs(), token_file, token_file_bytes_max);
        if (!text.is_ok()) {
            return Status::error(Code::invalid_argument,
                                 where + " cannot be read: " + text.status().to_string());
        }
        token = std::move(text.value());
        if (token.ends_with('\n')) token.pop_back();  // as `echo` writes it
        if (token.ends_with('\r')) token.pop_back();
    }
    if (token.empty()) return Status::error(Code::invalid_argument, where + " is empty");
    if (has_line_break(token)) {
        return Status::error(Code::invalid_argument, where + " holds a line break");
    }
    return token;
}

Status TokenSidecar::load() {
    tokens_.clear();
    auto text = engine::read_small(engine::posix_fs(), path_, token_sidecar_bytes_max);
    if (!text.is_ok())
        return text.status().code() == Code::not_found ? Status::ok() : text.status();
    std::string_view rest = *text;
    for (size_t line = 1; !rest.empty(); ++line) {
        const size_t end = rest.find('\n');
        const std::string_view l = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
        const size_t space = l.find(' ');
        if (space == 0 || space == std::string_view::npos || space + 1 == l.size()) {
            return Status::error(Code::corruption, path_ + ": line " + std::to_string(line) +
                                                       " is not `<node> <token>`");
        }
        tokens_[std::string(l.substr(0, space))] = std::string(l.substr(space + 1));
    }
    return Status::ok();
}

std::optional<std::string> TokenSidecar::get(std::string_view node) const {
    auto it = tokens_.find(node);
    if (it == tokens_.end()) return std::nullopt;
    return it->second;
}

Status TokenSidecar::put(std::string_view node, std::string_view token) {
    if (token.empty() || has_line_break(token)) {
        return Status::error(Code::invalid_argument,
                             "a node's token is empty or holds a line break");
    }
    auto it = tokens_.find(node);
    if (it != tokens_.end() && it->second == token) return Status::ok();
    auto next = tokens_;
    next[std::string(node)] = std::string(token);
    return write(next);
}

Status TokenSidecar::remove(std::string_view node) {
    if (tokens_.find(node) == tokens_.end()) return Status::ok();
    auto next = tokens_;
    next.erase(next.find(node));
    return write(next);
}

Status TokenSidecar::replace(const Tokens& tokens) {
    for (const auto& [node, token] : tokens) {
        if (token.empty() || has_line_break(token) || node.empty() ||
            node.find_first_of(" \r\n") != std::string::npos) {
            return Status::error(Code::invalid_argument,
                                 "a node's name or token is empty or holds a space or line break");
        }
    }
    if (tokens == tokens_) return Status::ok();
    return write(tokens);
}

// The map is taken only once the file holds it durably.
Status TokenSidecar::write(const Tokens& tokens) {
    Status st = Status::ok();
    if (tokens.empty()) {
        st = engine::remove_durably(engine::posix_fs(), path_);
    } else {
        std::string text;
        for (const auto& [node, token] : tokens) text += node + " " + token + "\n";
        st = engine::replace_durably(engine::posix_fs(), path_, text);
    }
    if (!st.is_ok()) return st;
    tokens_ = tokens;
    return Status::ok();
}

}  // namespace fenec::shard
