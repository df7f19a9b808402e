// server/obs/audit.cc: the line logs, their lines, request ids and trace context
// (server/obs/audit.h).
#include "server/obs/audit.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

#include "engine/format.h"
#include "json/timestamp.h"
#include "json/writer.h"

namespace fenec::obs {
namespace {

using engine::Code;
using engine::Status;

// Bytes handed to one write(2): large enough that a full queue takes a handful of calls.
constexpr size_t kWriteChunkBytes = 1u << 20;

Status io_error(std::string message, int err_no) {
    engine::Detail detail;
    detail.err_no = err_no;
    return Status::error(Code::io_error, std::move(message) + ": " + std::strerror(err_no), detail);
}

// Writes all of `bytes`, retrying short writes and EINTR. 0, or the errno that stopped it.
int write_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        bytes.remove_prefix(static_cast<size_t>(n));
    }
    return 0;
}

bool is_lower_hex(std::string_view s) {
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool all_zero(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c == '0'; });
}

void write_scalar(json::Writer& w, const JsonScalar& v) {
    struct Visit {
        json::Writer& w;
        void operator()(std::monostate) { w.null(); }
        void operator()(bool b) { w.boolean(b); }
        void operator()(int64_t i) { w.int64(i); }
        void operator()(uint64_t u) { w.uint64(u); }
        void operator()(double d) { w.float64(d); }
        void operator()(const std::string& s) { w.string(s); }
    };
    std::visit(Visit{w}, v.rep());
}

void write_fields(json::Writer& w, const std::vector<JsonField>& fields) {
    for (const JsonField& f : fields) {
        w.key(f.key);
        write_scalar(w, f.value);
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// LineLog

engine::Result<std::unique_ptr<LineLog>> LineLog::open(const std::string& path,
                                                       LineLogOptions options) {
    if (options.queue_lines_max == 0 || options.queue_bytes_max == 0 ||
        options.flush_interval_ms == 0 || options.flush_interval_ms > 1000) {
        return Status::error(Code::invalid_argument, "line log: options out of range");
    }
    if (path == "-") {
        // stderr is shared. A pipe is written through a description of the log's own,
        // non-blocking (O_NONBLOCK set on fd 2 would hold for every holder of that description,
        // the parent's among them); a socket with send(MSG_DONTWAIT); a file or a terminal as it
        // is, looked at with poll before each write.
        struct stat st {};
        const bool known = ::fstat(STDERR_FILENO, &st) == 0;
        if (known && S_ISFIFO(st.st_mode)) {
            const int fd = ::open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
            if (fd >= 0)
                return std::unique_ptr<LineLog>(new LineLog(fd, true, true, false, options));
        }
        const bool socket = known && S_ISSOCK(st.st_mode);
        return std::unique_ptr<LineLog>(new LineLog(STDERR_FILENO, false, true, socket, options));
    }
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return io_error("line log: cannot open " + path, errno);
    return std::unique_ptr<LineLog>(new LineLog(fd, true, false, false, options));
}

LineLog::LineLog(int fd, bool owns_fd, bool on_stderr, bool is_socket, LineLogOptions options)
    : fd_(fd),
      owns_fd_(owns_fd),
      stderr_(on_stderr),
      socket_(is_socket),
      nonblocking_(is_socket || (on_stderr && owns_fd)),
      options_(options) {
    writer_ = std::thread([this] { run(); });
}

LineLog::~LineLog() { close(); }

bool LineLog::write(std::string line) {
    bool was_empty;
    {
        const std::lock_guard lock(mu_);
        const size_t bytes = line.size() + 1;
        if (closing_ || queue_.size() >= options_.queue_lines_max ||
            bytes > options_.queue_bytes_max - queue_bytes_) {
            dropped_.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
        was_empty = queue_.empty();
        queue_bytes_ += bytes;
        queue_.push_back(std::move(line));
    }
    // Only the first line of a batch wakes the writer; it then waits the flush interval for
    // more, so a busy log costs a notify per batch, not per line.
    if (was_empty) wake_.notify_one();
    return true;
}

Status LineLog::write_synced(std::string line) {
    const std::lock_guard io(io_mu_);
    std::deque<std::string> queued;
    {
        const std::lock_guard lock(mu_);
        if (closing_) {
            dropped_.fetch_add(1, std::memory_order_relaxed);
            return Status::error(Code::io_error, "line log: closed");
        }
        queued.swap(queue_);
        queue_bytes_ = 0;
    }
    write_lines(queued);  // a failure there is counted; this line's own result is what we report
    std::deque<std::string> own;
    own.push_back(std::move(line));
    if (!write_lines(own)) return io_error("line log: write", last_errno());
    // stderr is not ours to sync (a pipe or a terminal would refuse it anyway).
    if (!stderr_ && ::fsync(fd_) != 0) {
        const int err = errno;
        last_errno_.store(err, std::memory_order_relaxed);
        return io_error("line log: fsync", err);
    }
    return Status::ok();
}

void LineLog::close() {
    {
        const std::lock_guard lock(mu_);
        if (closed_) return;
        closed_ = true;
        closing_ = true;
        give_up_at_ =
            std::chrono::steady_clock::now() + std::chrono::milliseconds(kStderrCloseGraceMs);
    }
    wake_.notify_all();
    writer_.join();
    if (owns_fd_) ::close(fd_);
}

void LineLog::run() {
    const auto interval = std::chrono::milliseconds(options_.flush_interval_ms);
    std::unique_lock lock(mu_);
    for (;;) {
        wake_.wait(lock, [this] { return closing_ || !queue_.empty(); });
        if (!closing_) wake_.wait_for(lock, interval, [this] { return closing_; });
        const bool last = closing_;  // once set, no line is accepted: this drain is the last
        lock.unlock();
        {
            const std::lock_guard io(io_mu_);
            std::deque<std::string> batch;
            {
                const std::lock_guard again(mu_);
                batch.swap(queue_);
                queue_bytes_ = 0;
            }
            write_lines(batch);
        }
        if (last) return;
        lock.lock();
    }
}

bool LineLog::wait_writable() {
    for (;;) {
        pollfd p{fd_, POLLOUT, 0};
        const int r = ::poll(&p, 1, 0);
        if (r > 0 || (r < 0 && errno != EINTR)) return true;  // room, or an error write reports
        {
            const std::lock_guard lock(mu_);
            if (closing_ && std::chrono::steady_clock::now() >= give_up_at_) return false;
        }
        p.revents = 0;
        (void)::poll(&p, 1, kStderrPollMs);  // room, or the next look at the close
    }
}

int LineLog::write_stderr(std::string_view bytes) {
    while (!bytes.empty()) {
        if (!nonblocking_ && !wait_writable()) return EAGAIN;  // fd 2 itself: looked at first
        const ssize_t n = socket_
                              ? ::send(fd_, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL)
                              : ::write(fd_, bytes.data(), bytes.size());
        if (n >= 0) {
            bytes.remove_prefix(static_cast<size_t>(n));
            continue;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return errno;
        if (!wait_writable()) return EAGAIN;
    }
    return 0;
}

bool LineLog::write_lines(std::deque<std::string>& lines) {
    bool ok = true;
    std::string chunk;
    uint64_t in_chunk = 0;
    const auto flush = [&] {
        if (in_chunk == 0) return;
        if (const int err = stderr_ ? write_stderr(chunk) : write_all(fd_, chunk); err != 0) {
            last_errno_.store(err, std::memory_order_relaxed);
            failed_.fetch_add(in_chunk, std::memory_order_relaxed);
            ok = false;
        } else {
            written_.fetch_add(in_chunk, std::memory_order_relaxed);
        }
        chunk.clear();
        in_chunk = 0;
    };
    // stderr is shared (several logs, the process's own messages) and often a pipe: there each
    // write(2) holds whole lines within PIPE_BUF, which a pipe writes at once, so no other
    // writer's bytes land inside a line (one longer than PIPE_BUF is written alone).
    const size_t chunk_max = stderr_ ? PIPE_BUF : kWriteChunkBytes;
    for (std::string& line : lines) {
        if (chunk.size() + line.size() + 1 > chunk_max) flush();
        chunk += line;
        chunk.push_back('\n');
        ++in_chunk;
        if (chunk.size() >= chunk_max) flush();
    }
    flush();
    lines.clear();
    return ok;
}

// ---------------------------------------------------------------------------------------------
// Lines

void string_or_null(json::Writer& w, std::string_view key, std::string_view value) {
    w.key(key);
    if (value.empty()) {
        w.null();
    } else {
        w.string(value);
    }
}

std::string iso_time_ms(int64_t ms) {
    ms = std::clamp(ms, json::timestamp_ms_min, json::timestamp_ms_max);
    std::string text = json::format_timestamp(ms);
    // format_timestamp leaves out a zero millisecond part; a log's times always show it.
    if (text.find('.') == std::string::npos) text.insert(text.size() - 1, ".000");
    return text;
}

std::string_view credential_name(Credential c) {
    switch (c) {
        case Credential::none:
            return "none";
        case Credential::data:
            return "data";
        case Credential::admin:
            return "admin";
        case Credential::replication:
            return "replication";
        case Credential::jwt:
            return "jwt";
    }
    return "none";
}

std::string_view audit_event_name(AuditEvent e) {
    switch (e) {
        case AuditEvent::refused:
            return "refused";
        case AuditEvent::admin:
            return "admin";
        case AuditEvent::lease:
            return "lease";
        case AuditEvent::promote:
            return "promote";
        case AuditEvent::schema:
            return "schema";
        case AuditEvent::query:
            return "query";
        case AuditEvent::failover:
            return "failover";
        case AuditEvent::force:
            return "force";
        case AuditEvent::lease_record:
            return "lease_record";
        case AuditEvent::fenced:
            return "fenced";
        case AuditEvent::compact:
            return "compact";
    }
    return "refused";
}

std::string audit_line(const AuditLine& line) {
    std::string out;
    json::Writer w(out);
    w.begin_object();
    w.key("at");
    w.string(iso_time_ms(line.at_ms));
    w.key("event");
    w.string(audit_event_name(line.event));
    if (line.who) {
        w.key("who");
        w.begin_object();
        w.key("credential");
        w.string(credential_name(line.who->credential));
        if (!line.who->sub.empty()) {
            w.key("sub");
            w.string(line.who->sub);
        }
        if (!line.who->tenant.empty()) {
            w.key("tenant");
            w.string(line.who->tenant);
        }
        w.end_object();
    }
    w.key("peer");
    w.string(line.peer);
    string_or_null(w, "via", line.via);
    w.key("request_id");
    w.string(line.request_id);
    write_fields(w, line.fields);
    w.end_object();
    return out;
}

std::string slow_line(const SlowRequest& r) {
    std::string out;
    json::Writer w(out);
    w.begin_object();
    w.key("at");
    w.string(iso_time_ms(r.at_ms));
    w.key("event");
    w.string("slow");
    w.key("request_id");
    w.string(r.request_id);
    w.key("peer");
    w.string(r.peer);
    w.key("route");
    w.string(r.route);
    string_or_null(w, "tenant", r.tenant);
    w.key("status");
    w.int64(r.status);
    w.key("ms");
    w.int64(r.ms);
    string_or_null(w, "statement", r.statement);
    w.end_object();
    return out;
}

// ---------------------------------------------------------------------------------------------
// Request ids and trace context

std::string request_id(std::optional<std::string_view> sent, uint64_t random) {
    if (sent && !sent->empty() && sent->size() <= request_id_bytes_max &&
        std::all_of(sent->begin(), sent->end(), [](char c) { return c >= 0x20 && c <= 0x7E; })) {
        return std::string(*sent);
    }
    return engine::format::hex16(random);
}

std::optional<TraceParent> parse_traceparent(std::string_view h) {
    // 00-<32>-<16>-<2>: 2 + 1 + 32 + 1 + 16 + 1 + 2.
    if (h.size() != 55 || h[2] != '-' || h[35] != '-' || h[52] != '-') return std::nullopt;
    const std::string_view version = h.substr(0, 2);
    const std::string_view trace = h.substr(3, 32);
    const std::string_view parent = h.substr(36, 16);
    const std::string_view flags = h.substr(53, 2);
    if (version != "00" || !is_lower_hex(trace) || !is_lower_hex(parent) || !is_lower_hex(flags)) {
        return std::nullopt;
    }
    if (all_zero(trace) || all_zero(parent)) return std::nullopt;
    const char low = flags[1];
    const int low_bits = low <= '9' ? low - '0' : low - 'a' + 10;
    return TraceParent{std::string(trace), std::string(parent), (low_bits & 1) != 0};
}

std::string format_traceparent(const TraceParent& t) {
    std::string out = "00-";
    out += t.trace_id;
    out.push_back('-');
    out += t.parent_id;
    out += t.sampled ? "-01" : "-00";
    return out;
}

std::optional<std::string_view> pass_tracestate(std::string_view header) {
    if (header.size() > tracestate_bytes_max) return std::nullopt;
    return header;
}

std::string span_id(uint64_t random) { return engine::format::hex16(random == 0 ? 1 : random); }

std::string trace_id(uint64_t hi, uint64_t lo) {
    return engine::format::hex16(hi) + engine::format::hex16(hi == 0 && lo == 0 ? 1 : lo);
}

bool should_trace(const std::optional<TraceParent>& parent, double sample, uint64_t random) {
    if (parent && parent->sampled) return true;
    if (!(sample > 0)) return false;
    if (sample >= 1) return true;
    // The top 53 bits as a uniform double in [0, 1).
    return static_cast<double>(random >> 11) * 0x1p-53 < sample;
}

std::string span_line(const Span& s) {
    std::string out;
    json::Writer w(out);
    w.begin_object();
    w.key("trace");
    w.string(s.trace_id);
    w.key("span");
    w.string(s.span_id);
    if (!s.parent_id.empty()) {
        w.key("parent");
        w.string(s.parent_id);
    }
    w.key("name");
    w.string(s.name);
    w.key("start");
    w.string(iso_time_ms(s.start_ms));
    w.key("us");
    w.int64(s.us);
    w.key("request_id");
    w.string(s.request_id);
    w.key("attrs");
    w.begin_object();
    write_fields(w, s.attrs);
    w.end_object();
    w.end_object();
    return out;
}

}  // namespace fenec::obs
