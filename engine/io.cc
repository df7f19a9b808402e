// engine/io.cc: what is built on the seam of io.h for any Fs, the POSIX one and the test doubles
// alike: the one durable replace of a small file, its removal, and reading one whole. Invariant:
// each goes through Fs and File only, so a fault injected under them reaches these too.
#include "engine/io.h"

#include <span>
#include <string>

namespace fenec::engine {

Status replace_durably(Fs& fs, std::string_view path, std::span<const std::byte> bytes) {
    const std::string temp = std::string(path) + std::string(replace_temp_suffix);
    {
        auto f = fs.open(temp, OpenMode::create_truncate);
        if (!f.is_ok()) return f.status();
        Status st = (*f)->append(bytes);
        if (st.is_ok()) st = (*f)->sync();
        if (!st.is_ok()) {
            f.value().reset();
            // Only tidiness: `path` is untouched, and a leftover temp is emptied by the next try.
            fs.remove(temp).ignore();
            return st;
        }
    }
    if (Status st = fs.rename(temp, path, true); !st.is_ok()) {
        fs.remove(temp).ignore();
        return st;
    }
    return fs.sync_dir(dir_of(path));
}

Status replace_durably(Fs& fs, std::string_view path, std::string_view text) {
    return replace_durably(fs, path, std::as_bytes(std::span(text.data(), text.size())));
}

Status remove_durably(Fs& fs, std::string_view path) {
    if (Status st = fs.remove(path); !st.is_ok() && st.code() != Code::not_found) return st;
    return fs.sync_dir(dir_of(path));
}

Result<std::string> read_small(Fs& fs, std::string_view path, uint64_t bytes_max) {
    auto f = fs.open(path, OpenMode::read_only);
    if (!f.is_ok()) return f.status();
    auto size = (*f)->size();
    if (!size.is_ok()) return size.status();
    if (*size > bytes_max) {
        return Status::error(Code::limit_exceeded, std::string(path) + " is " +
                                                       std::to_string(*size) + " bytes, over " +
                                                       std::to_string(bytes_max));
    }
    std::string text(*size, '\0');
    FENEC_RETURN_IF_ERROR(
        (*f)->read_at(0, std::span(reinterpret_cast<std::byte*>(text.data()), text.size())));
    return text;
}

}  // namespace fenec::engine
