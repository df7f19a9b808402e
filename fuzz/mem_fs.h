// fuzz/mem_fs.h: MemFs, the smallest engine::Fs that holds files in memory, for the fuzz targets
// and the corpus generator. Unlike test/support/fault_fs.h it models no crash, injects no fault
// and needs no GoogleTest: every call does what a healthy disk would, at once. A file is a
// shared byte vector; a File keeps its vector alive, so a rename or remove under an open handle
// never leaves the handle dangling. Single-threaded use only (the fuzz loop and the generator).
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/io.h"

namespace fenec::fuzz {

class MemFs final : public engine::Fs {
  public:
    using Bytes = std::vector<std::byte>;

    // Creates or replaces the file at `path` with `bytes`.
    void put(std::string_view path, std::span<const std::byte> bytes) {
        files_[std::string(path)] = std::make_shared<Bytes>(bytes.begin(), bytes.end());
    }
    // The file's bytes; empty when there is none.
    Bytes get(std::string_view path) const {
        auto it = files_.find(path);
        return it == files_.end() ? Bytes{} : *it->second;
    }

    engine::Result<std::unique_ptr<engine::File>> open(std::string_view path,
                                                       engine::OpenMode mode) override {
        using engine::OpenMode;
        auto it = files_.find(path);
        switch (mode) {
            case OpenMode::read_only:
            case OpenMode::read_write:
                if (it == files_.end()) return missing(path);
                break;
            case OpenMode::create_new:
                if (it != files_.end()) {
                    return engine::Status::error(engine::Code::already_exists,
                                                 "memfs: " + std::string(path) + " exists");
                }
                it = files_.emplace(std::string(path), std::make_shared<Bytes>()).first;
                break;
            case OpenMode::create_truncate:
                if (it == files_.end()) {
                    it = files_.emplace(std::string(path), std::make_shared<Bytes>()).first;
                }
                it->second->clear();
                break;
        }
        return std::unique_ptr<engine::File>(new MemFile(it->second, mode == OpenMode::read_only));
    }
    engine::Status lock(engine::File&) override { return engine::Status::ok(); }
    engine::Status rename(std::string_view from, std::string_view to, bool replace) override {
        auto it = files_.find(from);
        if (it == files_.end()) return missing(from);
        if (!replace && files_.count(to)) {
            return engine::Status::error(engine::Code::already_exists,
                                         "memfs: " + std::string(to) + " exists");
        }
        std::shared_ptr<Bytes> node = it->second;
        files_.erase(it);
        files_[std::string(to)] = std::move(node);
        return engine::Status::ok();
    }
    engine::Status sync_dir(std::string_view) override { return engine::Status::ok(); }
    engine::Status sync_fs(std::string_view) override { return engine::Status::ok(); }
    engine::Status remove(std::string_view path) override {
        auto it = files_.find(path);
        if (it == files_.end()) return missing(path);
        files_.erase(it);
        return engine::Status::ok();
    }
    engine::Result<bool> exists(std::string_view path) override {
        return files_.find(path) != files_.end();
    }
    engine::Result<uint64_t> file_size(std::string_view path) override {
        auto it = files_.find(path);
        if (it == files_.end()) return missing(path);
        return uint64_t{it->second->size()};
    }
    // Directories are not modelled: a directory lists the files whose path has it as dir_of.
    engine::Result<std::vector<std::string>> list(std::string_view dir) override {
        std::vector<std::string> names;
        for (const auto& [path, bytes] : files_) {
            if (engine::dir_of(path) == dir) names.push_back(path.substr(path.rfind('/') + 1));
        }
        return names;
    }
    engine::Status make_dirs(std::string_view) override { return engine::Status::ok(); }

  private:
    class MemFile final : public engine::File {
      public:
        MemFile(std::shared_ptr<Bytes> bytes, bool read_only)
            : bytes_(std::move(bytes)), read_only_(read_only) {}
        engine::Result<uint64_t> size() override { return uint64_t{bytes_->size()}; }
        engine::Status read_at(uint64_t offset, std::span<std::byte> out) override {
            if (offset > bytes_->size() || out.size() > bytes_->size() - offset) {
                return engine::Status::error(engine::Code::io_error, "memfs: short read");
            }
            std::copy_n(bytes_->begin() + static_cast<std::ptrdiff_t>(offset), out.size(),
                        out.begin());
            return engine::Status::ok();
        }
        engine::Status append(std::span<const std::byte> data) override {
            if (read_only_) return read_only_error();
            bytes_->insert(bytes_->end(), data.begin(), data.end());
            return engine::Status::ok();
        }
        engine::Status sync() override { return engine::Status::ok(); }
        engine::Status truncate(uint64_t size) override {
            if (read_only_) return read_only_error();
            if (size < bytes_->size()) bytes_->resize(size);
            return engine::Status::ok();
        }

      private:
        static engine::Status read_only_error() {
            return engine::Status::error(engine::Code::io_error, "memfs: file opened read-only");
        }
        std::shared_ptr<Bytes> bytes_;
        bool read_only_;
    };

    static engine::Status missing(std::string_view path) {
        return engine::Status::error(engine::Code::not_found,
                                     "memfs: no file " + std::string(path));
    }

    std::map<std::string, std::shared_ptr<Bytes>, std::less<>> files_;
};

}  // namespace fenec::fuzz
