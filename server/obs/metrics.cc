// server/obs/metrics.cc: the Prometheus registry and its text rendering (server/obs/metrics.h).
#include "server/obs/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace fenec::obs {
namespace {

// A programmer error: say what and stop, in every build (metrics.h).
[[noreturn]] void die(std::string_view what, std::string_view name) {
    std::fprintf(stderr, "fenec metrics: %.*s: %.*s\n", static_cast<int>(what.size()), what.data(),
                 static_cast<int>(name.size()), name.data());
    std::abort();
}

void check(bool ok, std::string_view what, std::string_view name) {
    if (!ok) die(what, name);
}

bool is_alpha_(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool valid_metric_name(std::string_view s) {
    if (s.empty() || !(is_alpha_(s[0]) || s[0] == ':')) return false;
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return is_alpha_(c) || is_digit(c) || c == ':'; });
}

bool valid_label_name(std::string_view s) {
    if (s.empty() || !is_alpha_(s[0]) || s.starts_with("__")) return false;
    return std::all_of(s.begin(), s.end(), [](char c) { return is_alpha_(c) || is_digit(c); });
}

// Help text: `\` and line feeds escaped (format 0.0.4).
void append_help(std::string& out, std::string_view help) {
    for (char c : help) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out.push_back(c);
        }
    }
}

// A label value: `\`, `"` and line feeds escaped.
void append_label_value(std::string& out, std::string_view value) {
    for (char c : value) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '"') {
            out += "\\\"";
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out.push_back(c);
        }
    }
}

// A sample value or an `le` bound: the shortest text reading back as the same double, in plain
// decimals for everyday magnitudes (`le="0.0001"` as people write buckets, not `1e-04`) and with
// an exponent outside them; `+Inf`, `-Inf` and `NaN` as Prometheus spells them.
void append_double(std::string& out, double v) {
    if (std::isnan(v)) {
        out += "NaN";
    } else if (std::isinf(v)) {
        out += v > 0 ? "+Inf" : "-Inf";
    } else {
        char buf[64];  // fixed notation below 1e15 and above 1e-6: at most ~40 characters
        const double magnitude = std::fabs(v);
        const bool plain = magnitude == 0 || (magnitude >= 1e-6 && magnitude < 1e15);
        const auto r = plain ? std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed)
                             : std::to_chars(buf, buf + sizeof buf, v);
        out.append(buf, r.ptr);
    }
}

void append_uint(std::string& out, uint64_t v) {
    char buf[24];
    out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

constexpr uint64_t us_per_s = 1'000'000;

// Microseconds as exact decimal seconds: `0.034`, `2.5`, `10`; the fraction without its trailing
// zeros, no point when there is none. Made from the integer, so no float rounding enters.
void append_micros_as_seconds(std::string& out, uint64_t us) {
    append_uint(out, us / us_per_s);
    uint64_t frac = us % us_per_s;
    if (frac == 0) return;
    char digits[6];
    for (int i = 5; i >= 0; --i) {
        digits[i] = static_cast<char>('0' + frac % 10);
        frac /= 10;
    }
    size_t n = 6;
    while (digits[n - 1] == '0') --n;
    out.push_back('.');
    out.append(digits, n);
}

// A bucket bound in seconds as whole microseconds; a bound finer than a microsecond, not finite
// or not positive is a programmer error.
uint64_t bound_us(double seconds, std::string_view name) {
    check(std::isfinite(seconds) && seconds > 0 && seconds < 1e12,
          "a bucket bound is not a finite positive number of seconds", name);
    const double us = seconds * static_cast<double>(us_per_s);
    const double whole = std::round(us);
    check(std::fabs(us - whole) <= whole * 1e-9, "a bucket bound is not whole microseconds", name);
    return static_cast<uint64_t>(whole);
}

// `name{labels} value\n`, or `name value\n` without labels.
void append_sample_head(std::string& out, std::string_view name, std::string_view suffix,
                        std::string_view labels) {
    out.append(name);
    out.append(suffix);
    if (!labels.empty()) {
        out.push_back('{');
        out.append(labels);
        out.push_back('}');
    }
    out.push_back(' ');
}

std::string_view type_name(MetricType t) {
    switch (t) {
        case MetricType::counter:
            return "counter";
        case MetricType::gauge:
            return "gauge";
        case MetricType::histogram:
            return "histogram";
    }
    return "untyped";
}

}  // namespace

Histogram::Histogram(const std::vector<uint64_t>& bounds_us)
    : bounds_us_(bounds_us), counts_(new std::atomic<uint64_t>[bounds_us.size() + 1]) {
    for (size_t i = 0; i <= bounds_us_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::observe_us(uint64_t us) {
    // The first bound at or above us (`le` is inclusive); past every bound is the +Inf slot.
    const size_t i = static_cast<size_t>(
        std::lower_bound(bounds_us_.begin(), bounds_us_.end(), us) - bounds_us_.begin());
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_us_.fetch_add(us, std::memory_order_relaxed);
}

Family::Family(std::string name, std::string help, MetricType type, std::vector<std::string> labels)
    : name_(std::move(name)), help_(std::move(help)), type_(type), label_names_(std::move(labels)) {
    check(valid_metric_name(name_), "invalid metric name", name_);
    std::set<std::string_view> seen;
    for (const std::string& label : label_names_) {
        check(valid_label_name(label), "invalid label name", label);
        check(seen.insert(label).second, "repeated label name", label);
        check(!(type_ == MetricType::histogram && label == "le"), "`le` on a histogram", name_);
    }
}

void Family::render(std::string& out) const {
    out += "# HELP ";
    out += name_;
    out.push_back(' ');
    append_help(out, help_);
    out += "\n# TYPE ";
    out += name_;
    out.push_back(' ');
    out += type_name(type_);
    out.push_back('\n');
    render_samples(out);
}

template <class Child>
Child& ChildFamily<Child>::with(std::initializer_list<std::string_view> label_values) {
    check(label_values.size() == label_names().size(), "label values do not match the names",
          name());
    std::vector<std::string> key(label_values.begin(), label_values.end());
    const std::lock_guard lock(mu_);
    auto it = children_.find(key);
    if (it == children_.end()) it = children_.emplace(std::move(key), make_child()).first;
    return *it->second;
}

template <class Child>
void ChildFamily<Child>::render_samples(std::string& out) const {
    std::string labels;
    const std::lock_guard lock(mu_);
    for (const auto& [values, child] : children_) {
        labels.clear();
        for (size_t i = 0; i < values.size(); ++i) {
            if (i > 0) labels.push_back(',');
            labels += label_names()[i];
            labels += "=\"";
            append_label_value(labels, values[i]);
            labels.push_back('"');
        }
        render_child(out, *child, labels);
    }
}

template class ChildFamily<Counter>;
template class ChildFamily<Gauge>;
template class ChildFamily<Histogram>;

CounterFamily::CounterFamily(std::string name, std::string help, std::vector<std::string> labels)
    : ChildFamily(std::move(name), std::move(help), MetricType::counter, std::move(labels)) {
    if (this->label_names().empty()) with({});
}

std::unique_ptr<Counter> CounterFamily::make_child() const { return std::make_unique<Counter>(); }

void CounterFamily::render_child(std::string& out, const Counter& child,
                                 std::string_view labels) const {
    append_sample_head(out, name(), "", labels);
    append_uint(out, child.value());
    out.push_back('\n');
}

GaugeFamily::GaugeFamily(std::string name, std::string help, std::vector<std::string> labels)
    : ChildFamily(std::move(name), std::move(help), MetricType::gauge, std::move(labels)) {
    if (this->label_names().empty()) with({});
}

std::unique_ptr<Gauge> GaugeFamily::make_child() const { return std::make_unique<Gauge>(); }

void GaugeFamily::render_child(std::string& out, const Gauge& child,
                               std::string_view labels) const {
    append_sample_head(out, name(), "", labels);
    append_double(out, child.value());
    out.push_back('\n');
}

namespace {
std::vector<uint64_t> bounds_in_us(const std::vector<double>& bounds_s, std::string_view name) {
    check(!bounds_s.empty(), "a histogram needs buckets", name);
    std::vector<uint64_t> out;
    for (double b : bounds_s) {
        out.push_back(bound_us(b, name));
        check(out.size() == 1 || out[out.size() - 2] < out.back(),
              "buckets not strictly increasing", name);
    }
    return out;
}
}  // namespace

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> labels, std::vector<double> bounds)
    : ChildFamily(std::move(name), std::move(help), MetricType::histogram, std::move(labels)),
      bounds_us_(bounds_in_us(bounds, this->name())) {
    if (this->label_names().empty()) with({});
}

std::unique_ptr<Histogram> HistogramFamily::make_child() const {
    return std::make_unique<Histogram>(bounds_us_);
}

void HistogramFamily::render_child(std::string& out, const Histogram& child,
                                   std::string_view labels) const {
    // Cumulative buckets; `_count` is the +Inf bucket so the two always agree within a scrape.
    std::string bucket_labels;
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_us_.size(); ++i) {
        cumulative += child.bucket_count(i);
        bucket_labels.assign(labels);
        if (!bucket_labels.empty()) bucket_labels.push_back(',');
        bucket_labels += "le=\"";
        if (i < bounds_us_.size()) {
            append_micros_as_seconds(bucket_labels, bounds_us_[i]);
        } else {
            bucket_labels += "+Inf";
        }
        bucket_labels.push_back('"');
        append_sample_head(out, name(), "_bucket", bucket_labels);
        append_uint(out, cumulative);
        out.push_back('\n');
    }
    append_sample_head(out, name(), "_sum", labels);
    append_micros_as_seconds(out, child.sum_us());
    out.push_back('\n');
    append_sample_head(out, name(), "_count", labels);
    append_uint(out, cumulative);
    out.push_back('\n');
}

FunctionFamily::FunctionFamily(std::string name, std::string help, MetricType type,
                               std::function<double()> read)
    : Family(std::move(name), std::move(help), type, {}), read_(std::move(read)) {
    check(type != MetricType::histogram, "a function family is a counter or a gauge", this->name());
    check(static_cast<bool>(read_), "a function family needs a function", this->name());
}

void FunctionFamily::render_samples(std::string& out) const {
    append_sample_head(out, name(), "", "");
    append_double(out, read_());
    out.push_back('\n');
}

template <class F, class... Args>
F& Registry::add(Args&&... args) {
    auto family = std::make_unique<F>(std::forward<Args>(args)...);
    F& ref = *family;
    const std::lock_guard lock(mu_);
    for (const auto& f : families_)
        check(f->name() != ref.name(), "metric registered twice", ref.name());
    families_.push_back(std::move(family));
    return ref;
}

CounterFamily& Registry::counter(std::string name, std::string help,
                                 std::vector<std::string> labels) {
    return add<CounterFamily>(std::move(name), std::move(help), std::move(labels));
}

GaugeFamily& Registry::gauge(std::string name, std::string help, std::vector<std::string> labels) {
    return add<GaugeFamily>(std::move(name), std::move(help), std::move(labels));
}

HistogramFamily& Registry::histogram(std::string name, std::string help,
                                     std::vector<std::string> labels, std::vector<double> buckets) {
    return add<HistogramFamily>(std::move(name), std::move(help), std::move(labels),
                                std::move(buckets));
}

void Registry::gauge_fn(std::string name, std::string help, std::function<double()> read) {
    add<FunctionFamily>(std::move(name), std::move(help), MetricType::gauge, std::move(read));
}

void Registry::counter_fn(std::string name, std::string help, std::function<double()> read) {
    add<FunctionFamily>(std::move(name), std::move(help), MetricType::counter, std::move(read));
}

std::string Registry::render() const {
    // Families are never removed, so the pointers stay good once the lock is let go; rendering
    // without it keeps a scrape's function reads from ever running under the registry's lock.
    std::vector<const Family*> families;
    {
        const std::lock_guard lock(mu_);
        families.reserve(families_.size());
        for (const auto& f : families_) families.push_back(f.get());
    }
    std::string out;
    for (const Family* f : families) f->render(out);
    return out;
}

}  // namespace fenec::obs
