// bench/room_probe.cc: what a log's fdatasync costs when its appends grow the file, against
// appends that overwrite blocks written and synced before (a log zero-filled ahead, as
// PostgreSQL's WAL segments are), and against appends into blocks fallocate reserved past the
// end (FALLOC_FL_KEEP_SIZE: allocated, the size still growing). Eight writer threads each write a
// 200-byte record at the log's end and wait until a sync covers it; SYNCERS threads (1) run
// fdatasync whenever something is not yet covered, so each sync carries what landed while the
// last ran, as the node's group commit does. Prints records made durable a second, records a
// sync and µs a sync for each way, in rounds that alternate the ways.
//
// Build and run: c++ -O2 -pthread -o build/room_probe bench/room_probe.cc &&
//                build/room_probe [dir, default /tmp]
// Environment: PROBE_SECONDS (3), PROBE_ROUNDS (3), PROBE_SYNCERS (1), PROBE_WRITERS (8).
// Run it on the file system a node's data dir lives on, with nothing else writing there.
#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

int env_int(const char* name, int fallback) {
    const char* v = std::getenv(name);
    return v ? std::atoi(v) : fallback;
}

enum class Way { append, overwrite, keep_size };
const char* name_of(Way w) {
    return w == Way::append ? "append (grows)" : w == Way::overwrite ? "overwrite" : "keep_size";
}

void run(const std::string& dir, Way way, int writers, int syncers, double seconds) {
    const std::string path = dir + "/room_probe.dat";
    ::unlink(path.c_str());
    const int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        std::perror(path.c_str());
        std::exit(1);
    }
    const off_t region = off_t{256} << 20;
    if (way == Way::overwrite) {
        std::vector<char> zeros(1 << 20, 0);
        for (off_t at = 0; at < region; at += static_cast<off_t>(zeros.size())) {
            if (::pwrite(fd, zeros.data(), zeros.size(), at) < 0) std::perror("pwrite");
        }
    } else if (way == Way::keep_size) {
        if (::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, region) != 0) std::perror("fallocate");
    }
    ::fsync(fd);

    std::mutex mu;
    std::condition_variable covered, waiting;
    long written = 0, started_to = 0, durable = 0, syncs = 0;
    off_t end = 0;
    std::atomic<long> records{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < syncers; ++i) {
        threads.emplace_back([&] {
            std::unique_lock l(mu);
            while (!stop) {
                if (written <= started_to) {
                    waiting.wait_for(l, std::chrono::milliseconds(10));
                    continue;
                }
                const long target = written;
                started_to = target;
                ++syncs;
                l.unlock();
                if (::fdatasync(fd) != 0) std::perror("fdatasync");
                l.lock();
                if (target > durable) {
                    durable = target;
                    covered.notify_all();
                }
            }
        });
    }
    for (int i = 0; i < writers; ++i) {
        threads.emplace_back([&] {
            char record[200];
            std::memset(record, 'r', sizeof record);
            while (!stop) {
                std::unique_lock l(mu);
                if (::pwrite(fd, record, sizeof record, end) != sizeof record) std::perror("pwrite");
                end += sizeof record;
                const long mine = ++written;
                waiting.notify_one();
                while (durable < mine && !stop) covered.wait(l);
                ++records;
            }
        });
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
    {
        std::lock_guard l(mu);
        covered.notify_all();
        waiting.notify_all();
    }
    for (std::thread& t : threads) t.join();
    ::close(fd);
    ::unlink(path.c_str());
    std::printf("%-16s %9.0f records/s %6.1f records a sync %7.0f us a sync\n", name_of(way),
                static_cast<double>(records) / seconds,
                syncs ? static_cast<double>(records) / static_cast<double>(syncs) : 0.0,
                syncs ? seconds * 1e6 / static_cast<double>(syncs) : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
    const std::string dir = argc > 1 ? argv[1] : "/tmp";
    const int rounds = env_int("PROBE_ROUNDS", 3);
    const int writers = env_int("PROBE_WRITERS", 8);
    const int syncers = env_int("PROBE_SYNCERS", 1);
    const double seconds = env_int("PROBE_SECONDS", 3);
    std::printf("room_probe: %d writers, %d syncer(s), %.0f s a way, %d rounds, in %s\n", writers,
                syncers, seconds, rounds, dir.c_str());
    for (int r = 1; r <= rounds; ++r) {
        std::printf("round %d\n", r);
        for (Way w : {Way::append, Way::overwrite, Way::keep_size}) {
            run(dir, w, writers, syncers, seconds);
        }
    }
}
