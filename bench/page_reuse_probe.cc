// bench/page_reuse_probe.cc: what fresh memory costs on this host, the question behind the
// node's pool of freed huge pages (engine/huge_pages.h, --huge-pool).
//
// On a host that takes a guest's free memory back (free page reporting, balloons), memory the
// process frees and maps again costs differently depending on how long it sat free. Two probes:
//   1. first writes: 256 MiB mapped and written once per 4 KiB, in huge pages and in 4 KiB
//      pages, three times each, the next mapping at once and then after a 5 s pause;
//   2. the page cache: a 69 MiB file read from disk (dropped from the cache first), right after
//      78 MiB of huge pages were written and either unmapped (as the node does without the pool)
//      or kept (as the pool keeps them), with a 4 s pause before each try.
// Prints GB/s for 1 and the read's ms for 2. No baseline beyond itself: each line is held
// against the other lines of the same run.
//
// Usage: c++ -O2 -o build/page_reuse_probe bench/page_reuse_probe.cc
//        build/page_reuse_probe [dir for the 69 MiB file, default /tmp]
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kHuge = size_t{2} << 20;

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// `bytes` mapped 2 MiB aligned, advised huge or not; the mapping's start in `raw`.
char* map(size_t bytes, bool huge, void*& raw) {
    raw = mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        std::perror("mmap");
        std::exit(1);
    }
    auto* a =
        reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + kHuge - 1) & ~(kHuge - 1));
    madvise(a, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    return a;
}

void first_writes() {
    const size_t bytes = size_t{256} << 20;
    for (int pause_s : {0, 5}) {
        for (bool huge : {true, false}) {
            std::printf("first writes, %s pages, %s:", huge ? "huge" : "4 KiB",
                        pause_s ? "5 s after the last unmap" : "right after the last unmap");
            for (int i = 0; i < 3; ++i) {
                void* raw = nullptr;
                char* a = map(bytes, huge, raw);
                const auto t0 = std::chrono::steady_clock::now();
                for (size_t at = 0; at < bytes; at += 4096) a[at] = 1;
                std::printf(" %.2f GB/s", bytes / 1e6 / ms_since(t0));
                munmap(raw, bytes + kHuge);
                std::this_thread::sleep_for(std::chrono::seconds(pause_s));
            }
            std::printf("\n");
        }
    }
}

void page_cache(const std::string& dir) {
    const std::string path = dir + "/page_reuse_probe.bin";
    {
        std::vector<char> chunk(1 << 20);
        for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<char>(i * 131 + 7);
        FILE* f = std::fopen(path.c_str(), "wb");
        if (!f) {
            std::perror(path.c_str());
            std::exit(1);
        }
        for (int i = 0; i < 69; ++i) std::fwrite(chunk.data(), 1, chunk.size(), f);
        std::fclose(f);
    }
    const size_t bytes = size_t{78} << 20;
    static char buf[1 << 20];
    for (int round = 0; round < 3; ++round) {
        for (bool keep : {false, true}) {
            const int fd = open(path.c_str(), O_RDONLY);
            fdatasync(fd);
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            std::this_thread::sleep_for(std::chrono::seconds(4));
            void* raw = nullptr;
            char* a = map(bytes, true, raw);
            std::memset(a, 1, bytes);
            if (!keep) munmap(raw, bytes + kHuge);
            const auto t0 = std::chrono::steady_clock::now();
            size_t total = 0;
            for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) total += static_cast<size_t>(n);
            std::printf(
                "round %d: 78 MiB of huge pages written and %s, then %zu bytes read from "
                "disk in %.1f ms\n",
                round + 1, keep ? "kept" : "unmapped", total, ms_since(t0));
            if (keep) munmap(raw, bytes + kHuge);
            close(fd);
        }
    }
    unlink(path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
    first_writes();
    page_cache(argc > 1 ? argv[1] : "/tmp");
}
