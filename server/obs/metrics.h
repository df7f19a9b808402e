// server/obs/metrics.h: a small Prometheus registry (node-http.md §13.1), shared by fenec-node and
// fenec-shard. It owns the metric families and renders them as text format 0.0.4; what is counted
// is the caller's.
//
// Model: a Registry holds families in registration order; a family has a name, a help text, a
// type and fixed label names; a child is one combination of label values. Hot paths look a child
// up once (`with`, under the family's mutex) and keep the reference: a child lives as long as the
// registry and never moves, and its updates are lock-free relaxed atomics. A scrape (`render`)
// reads every child without stopping writers, so a histogram's `_sum` may trail its buckets by the
// observations in flight; `_count` is always the `+Inf` bucket.
//
// Every histogram is a duration family in seconds, observed in whole microseconds: its `_sum` is
// an integer count of microseconds, printed as exact decimal seconds (`0.034`, never the
// `0.03400000000000002` a sum of doubles gathers), and its bounds are whole microseconds too.
//
// Programmer errors (an invalid or repeated name, a label count that does not match, buckets not
// strictly increasing) abort with a message, in every build: they are found by the first test.
//
// Thread-safe: every member of Registry and of the families and children may be called from any
// thread. No metric may carry a tenant, user or token label (§13.1): the registry cannot tell,
// callers keep to it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace fenec::obs {

// The spec's duration buckets, in seconds (§13.1): 100 µs to 10 s.
inline constexpr std::array<double, 16> duration_buckets_s = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

// A monotonic count. Lock-free.
class Counter {
  public:
    void inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
    uint64_t value() const { return value_.load(std::memory_order_relaxed); }

  private:
    std::atomic<uint64_t> value_{0};
};

// A value that goes up and down. Lock-free (add is a compare-and-swap loop).
class Gauge {
  public:
    void set(double v) { value_.store(v, std::memory_order_relaxed); }
    void add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
    double value() const { return value_.load(std::memory_order_relaxed); }

  private:
    std::atomic<double> value_{0};
};

// Durations counted into fixed buckets (upper bounds inclusive, as `le` says) and summed in
// whole microseconds. Lock-free.
class Histogram {
  public:
    // `bounds_us` strictly increasing; it must outlive the histogram (its family's).
    explicit Histogram(const std::vector<uint64_t>& bounds_us);

    // One observation, in microseconds. The sum wraps only past 584,000 years of observed time.
    void observe_us(uint64_t us);

    // Observations in bucket i alone (not cumulative); index bounds.size() is past the last bound.
    uint64_t bucket_count(size_t i) const { return counts_[i].load(std::memory_order_relaxed); }
    uint64_t sum_us() const { return sum_us_.load(std::memory_order_relaxed); }
    const std::vector<uint64_t>& bounds_us() const { return bounds_us_; }

  private:
    const std::vector<uint64_t>& bounds_us_;
    std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_us_.size() + 1 slots
    std::atomic<uint64_t> sum_us_{0};
};

enum class MetricType : uint8_t { counter, gauge, histogram };

// What every family shares: its name, help, type and label names, and its two header lines.
class Family {
  public:
    Family(std::string name, std::string help, MetricType type, std::vector<std::string> labels);
    virtual ~Family() = default;
    Family(const Family&) = delete;
    Family& operator=(const Family&) = delete;

    const std::string& name() const { return name_; }
    MetricType type() const { return type_; }
    const std::vector<std::string>& label_names() const { return label_names_; }
    // Appends `# HELP`, `# TYPE` and the samples.
    void render(std::string& out) const;

  protected:
    virtual void render_samples(std::string& out) const = 0;

  private:
    const std::string name_;
    const std::string help_;
    const MetricType type_;
    const std::vector<std::string> label_names_;
};

// A family whose children are made on first use of their label values.
template <class Child>
class ChildFamily : public Family {
  public:
    using Family::Family;
    // The child for these label values, in the order of the family's label names (a count that
    // differs aborts). The reference stays valid as long as the registry: look it up once, keep
    // it; a family without labels has its one child from the start (`with({})`).
    Child& with(std::initializer_list<std::string_view> label_values);

  protected:
    virtual std::unique_ptr<Child> make_child() const = 0;
    // Appends one child's sample lines; `labels` is `a="x",b="y"` (escaped), empty without labels.
    virtual void render_child(std::string& out, const Child& child,
                              std::string_view labels) const = 0;
    void render_samples(std::string& out) const final;

  private:
    mutable std::mutex mu_;  // guards children_ (the map; the values are atomics)
    std::map<std::vector<std::string>, std::unique_ptr<Child>> children_;  // render order
};

extern template class ChildFamily<Counter>;
extern template class ChildFamily<Gauge>;
extern template class ChildFamily<Histogram>;

class CounterFamily final : public ChildFamily<Counter> {
  public:
    CounterFamily(std::string name, std::string help, std::vector<std::string> labels);

  private:
    std::unique_ptr<Counter> make_child() const override;
    void render_child(std::string& out, const Counter& child,
                      std::string_view labels) const override;
};

class GaugeFamily final : public ChildFamily<Gauge> {
  public:
    GaugeFamily(std::string name, std::string help, std::vector<std::string> labels);

  private:
    std::unique_ptr<Gauge> make_child() const override;
    void render_child(std::string& out, const Gauge& child, std::string_view labels) const override;
};

class HistogramFamily final : public ChildFamily<Histogram> {
  public:
    HistogramFamily(std::string name, std::string help, std::vector<std::string> labels,
                    std::vector<double> bounds);

  private:
    std::unique_ptr<Histogram> make_child() const override;
    void render_child(std::string& out, const Histogram& child,
                      std::string_view labels) const override;
    const std::vector<uint64_t> bounds_us_;  // children keep a reference to it
};

// A value read when scraped, through a function (a counter or a gauge, without labels). The
// function runs on the scraping thread with no registry lock held; it must be thread-safe.
class FunctionFamily final : public Family {
  public:
    FunctionFamily(std::string name, std::string help, MetricType type,
                   std::function<double()> read);

  private:
    void render_samples(std::string& out) const override;
    const std::function<double()> read_;
};

class Registry {
  public:
    Registry() = default;
    Registry(const Registry&) = delete;
    Registry& operator=(const Registry&) = delete;

    // Registers a family; the reference lives as long as the registry. A name already registered,
    // or one that is not [a-zA-Z_:][a-zA-Z0-9_:]*, aborts; so does a label name that is not
    // [a-zA-Z_][a-zA-Z0-9_]*, starts with `__`, repeats, or is `le` on a histogram.
    CounterFamily& counter(std::string name, std::string help,
                           std::vector<std::string> labels = {});
    GaugeFamily& gauge(std::string name, std::string help, std::vector<std::string> labels = {});
    // `buckets`: upper bounds in seconds, strictly increasing, each a whole number of microseconds
    // (anything else aborts); `+Inf` is added by the registry.
    HistogramFamily& histogram(std::string name, std::string help, std::vector<std::string> labels,
                               std::vector<double> buckets = {duration_buckets_s.begin(),
                                                              duration_buckets_s.end()});
    // Values read at scrape time (uptime, open tenants, a LineLog's counters).
    void gauge_fn(std::string name, std::string help, std::function<double()> read);
    void counter_fn(std::string name, std::string help, std::function<double()> read);

    // Text format 0.0.4: families in registration order, each `# HELP`, `# TYPE`, then its
    // samples by label values; label values escaped (\\ \" \n), help text escaped (\\ \n).
    std::string render() const;

  private:
    template <class F, class... Args>
    F& add(Args&&... args);

    mutable std::mutex mu_;                          // guards families_ (the vector, not a family)
    std::vector<std::unique_ptr<Family>> families_;  // registration order
};

// The content type of render()'s text, for the `/_metrics` answer.
inline constexpr std::string_view metrics_content_type = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace fenec::obs
