// tools/progress.h: a progress bar for a long copy (an image fetched, sent, verified): what moves,
// bytes done of the total, the share and the rate, redrawn in place on stderr.
//
// Drawn only when stderr is a terminal, and only once the work has run for a little while
// (progress_delay_ms), so a script's output and a quick command's stay clean; redrawn at most
// every progress_redraw_ms, and erased when the work ends. Not thread-safe: one thread moves it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace fenec::tools {

// A bar appears only for work still running this long: a copy of a small tenant says nothing.
inline constexpr int64_t progress_delay_ms = 300;
// Redraws at most this often: a terminal kept busy redrawing slows the copy it reports.
inline constexpr int64_t progress_redraw_ms = 100;

class Progress {
  public:
    // `label` names the work ("fetch acme"); `total` its bytes, 0 when unknown.
    Progress(std::string label, uint64_t total);
    ~Progress();  // erases the bar
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;

    void add(uint64_t bytes);
    uint64_t done() const { return done_; }

    // "12.5 MiB", "800 B": a byte count as the bar and the commands' lines print it.
    static std::string bytes_text(uint64_t bytes);

  private:
    void draw();

    using Clock = std::chrono::steady_clock;
    std::string label_;
    uint64_t total_ = 0;
    uint64_t done_ = 0;
    bool terminal_ = false;
    bool drawn_ = false;
    Clock::time_point start_;
    Clock::time_point last_draw_;
};

}  // namespace fenec::tools
