// tools/progress.cc: the progress bar (tools/progress.h).
#include "tools/progress.h"

#include <unistd.h>

#include <cstdio>

namespace fenec::tools {

Progress::Progress(std::string label, uint64_t total)
    : label_(std::move(label)),
      total_(total),
      terminal_(::isatty(STDERR_FILENO) == 1),
      start_(Clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
    if (drawn_) std::fputs("\r\033[K", stderr);
}

std::string Progress::bytes_text(uint64_t bytes) {
    static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024;
        ++u;
    }
    char out[32];
    if (u == 0) {
        std::snprintf(out, sizeof out, "%llu B", static_cast<unsigned long long>(bytes));
    } else {
        std::snprintf(out, sizeof out, "%.1f %s", v, units[u]);
    }
    return out;
}

void Progress::add(uint64_t bytes) {
    done_ += bytes;
    if (!terminal_) return;
    const Clock::time_point now = Clock::now();
    const auto ms = [](Clock::duration d) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
    };
    if (ms(now - start_) < progress_delay_ms) return;
    if (drawn_ && ms(now - last_draw_) < progress_redraw_ms && done_ != total_) return;
    last_draw_ = now;
    draw();
}

void Progress::draw() {
    constexpr int width = 24;
    const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    const uint64_t rate = seconds > 0 ? static_cast<uint64_t>(done_ / seconds) : 0;
    std::string line = "\r" + label_ + " ";
    if (total_ > 0) {
        const double share = done_ >= total_ ? 1.0 : static_cast<double>(done_) / total_;
        const int filled = static_cast<int>(share * width);
        line += "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] ";
        char pct[8];
        std::snprintf(pct, sizeof pct, "%3d%% ", static_cast<int>(share * 100));
        line += pct;
        line += bytes_text(done_) + " / " + bytes_text(total_);
    } else {
        line += bytes_text(done_);
    }
    line += "  " + bytes_text(rate) + "/s\033[K";
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
    drawn_ = true;
}

}  // namespace fenec::tools
