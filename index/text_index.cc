// index/text_index.cc: maintaining and querying the BM25 indexes of index/text_index.h. A query
// walks the postings of its distinct terms together in id order (each list is sorted by id), so
// a row's score is summed in query-term order without a hash table, and keeps the best k in a
// heap whose top is the worst kept.
#include "index/text_index.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "index/limits.h"
#include "index/memory.h"
#include "index/stemmer.h"
#include "index/tokenizer.h"

namespace fenec::index {
namespace {

using engine::Status;

// The row's text in `slot`, or nullopt when it holds none (null, or a non-text value).
std::optional<std::string> text_of(const engine::DocView& doc, uint16_t slot) {
    engine::Value v = doc.get(slot);
    if (auto* s = std::get_if<std::string>(&v.rep)) return std::move(*s);
    return std::nullopt;
}

std::vector<std::string> terms_of(const TextField& field, const engine::DocView& doc) {
    std::optional<std::string> text = text_of(doc, field.slot());
    return text ? field.terms(*text) : std::vector<std::string>{};
}

bool same_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

struct Ranked {
    uint64_t id;
    double score;
};
// Higher score first, then lower id.
bool better(const Ranked& a, const Ranked& b) {
    return a.score > b.score || (a.score == b.score && a.id < b.id);
}

}  // namespace

TextField::TextField(uint16_t slot, const engine::TextParams& params)
    : slot_(slot),
      k1_(params.k1_hundredths / 100.0),
      b_(params.b_hundredths / 100.0),
      stem_(params.stem) {
    if (stem_.empty()) return;
    stemmer_ = Stemmer::make(stem_);
    stem_missing_ = stemmer_ == nullptr;
}

TextField::~TextField() = default;

std::vector<std::string> TextField::terms(std::string_view text) const {
    if (stem_missing_) return {};  // nothing is indexed that no query could find
    return tokenize(text, stemmer_.get());
}

void TextField::add(uint64_t id, std::vector<std::string> terms) {
    if (terms.empty()) return;
    const auto dl = static_cast<uint32_t>(terms.size());
    std::sort(terms.begin(), terms.end());
    for (size_t i = 0; i < terms.size();) {
        size_t j = i + 1;
        while (j < terms.size() && terms[j] == terms[i]) ++j;
        auto [it, fresh] = postings_.try_emplace(std::move(terms[i]));
        if (fresh) {
            dictionary_.insert(it->first);
            bytes_ += memory::hash_node_bytes<Postings> + memory::string_heap(it->first) +
                      memory::tree_node_bytes<std::string_view>;
        }
        Postings& list = it->second;
        const size_t capacity = list.capacity();
        const Posting p{id, static_cast<uint32_t>(j - i), dl};
        if (list.empty() || list.back().id < id) {
            list.push_back(p);  // ids mostly arrive ascending
        } else {
            auto at = std::lower_bound(list.begin(), list.end(), id,
                                       [](const Posting& q, uint64_t v) { return q.id < v; });
            assert(at == list.end() || at->id != id);  // a row is added once
            list.insert(at, p);
        }
        bytes_ += (list.capacity() - capacity) * sizeof(Posting);
        i = j;
    }
    ++rows_;
    total_length_ += dl;
}

void TextField::remove(uint64_t id, std::vector<std::string> terms) {
    if (terms.empty()) return;
    std::sort(terms.begin(), terms.end());
    for (size_t i = 0; i < terms.size();) {
        size_t j = i + 1;
        while (j < terms.size() && terms[j] == terms[i]) ++j;
        auto it = postings_.find(terms[i]);
        assert(it != postings_.end());  // the engine removes only what it added
        if (it != postings_.end()) {
            Postings& list = it->second;
            auto at = std::lower_bound(list.begin(), list.end(), id,
                                       [](const Posting& q, uint64_t v) { return q.id < v; });
            assert(at != list.end() && at->id == id);
            if (at != list.end() && at->id == id) list.erase(at);
            if (list.empty()) {
                bytes_ -= memory::hash_node_bytes<Postings> + memory::string_heap(it->first) +
                          memory::tree_node_bytes<std::string_view> +
                          list.capacity() * sizeof(Posting);
                dictionary_.erase(it->first);
                postings_.erase(it);
            }
        }
        i = j;
    }
    assert(rows_ > 0 && total_length_ >= terms.size());
    --rows_;
    total_length_ -= terms.size();
}

engine::Result<std::vector<std::pair<std::string_view, uint32_t>>> TextField::query_terms(
    std::string_view query) const {
    std::unique_ptr<Stemmer> stemmer;
    if (!stem_.empty()) {
        stemmer = Stemmer::make(stem_);
        if (!stemmer) {
            return Status::error(engine::Code::invalid_argument,
                                 "the field is stemmed `" + stem_ +
                                     "`, which this build's "
                                     "libstemmer does not have (it has: " +
                                     stem_languages() + ")");
        }
    }
    // Views of the query's own terms until the end of this call, of dictionary_'s keys after:
    // a prefix's terms are the dictionary's, and a whole term the dictionary lacks scores
    // nothing, so only terms the dictionary holds are kept.
    std::vector<QueryTerm> words = tokenize_query(query, stemmer.get());
    std::vector<std::pair<std::string_view, uint32_t>> distinct;
    std::unordered_map<std::string_view, size_t> seen;
    auto count = [&](std::string_view term) {
        auto [it, fresh] = seen.emplace(term, distinct.size());
        if (fresh) distinct.emplace_back(term, 0);
        ++distinct[it->second].second;
    };
    size_t expanded = 0;
    for (const QueryTerm& w : words) {
        if (!w.prefix) {
            auto at = dictionary_.find(w.text);
            if (at != dictionary_.end()) count(*at);
            continue;
        }
        for (auto at = dictionary_.lower_bound(w.text);
             at != dictionary_.end() && at->starts_with(w.text); ++at) {
            if (++expanded > limits::match_prefix_terms_max) {
                return Status::error(engine::Code::invalid_argument,
                                     "the prefix `" + w.text + "*` takes the query past " +
                                         std::to_string(limits::match_prefix_terms_max) +
                                         " terms (match_prefix_terms_max): make it longer");
            }
            count(*at);
        }
    }
    return distinct;
}

engine::Result<std::vector<std::pair<uint64_t, double>>> TextField::match(
    std::string_view query, const std::function<bool(uint64_t)>& keep, size_t k) const {
    std::vector<std::pair<uint64_t, double>> out;
    engine::Result<std::vector<std::pair<std::string_view, uint32_t>>> terms = query_terms(query);
    if (!terms.is_ok()) return terms.status();
    const std::vector<std::pair<std::string_view, uint32_t>>& distinct = terms.value();
    if (k == 0 || rows_ == 0) return out;

    struct Cursor {
        const Posting* at;
        const Posting* end;
        double weight;  // qtf * idf
    };
    const auto n = static_cast<double>(rows_);
    const double avgdl = static_cast<double>(total_length_) / n;
    std::vector<Cursor> cursors;  // in query-term order
    for (const auto& [term, qtf] : distinct) {
        auto it = postings_.find(std::string(term));
        assert(it != postings_.end());  // query_terms keeps the dictionary's terms only
        const auto df = static_cast<double>(it->second.size());
        const double idf = std::log(1 + (n - df + 0.5) / (df + 0.5));
        cursors.push_back(
            Cursor{it->second.data(), it->second.data() + it->second.size(), qtf * idf});
    }

    const double k1 = k1_;
    const double b = b_;
    std::vector<Ranked> heap;  // the best so far; front is the worst of them
    while (true) {
        uint64_t id = UINT64_MAX;
        bool any = false;
        for (const Cursor& c : cursors) {
            if (c.at != c.end && (!any || c.at->id < id)) id = c.at->id, any = true;
        }
        if (!any) break;
        const bool kept = keep(id);
        double score = 0;
        for (Cursor& c : cursors) {
            if (c.at == c.end || c.at->id != id) continue;
            if (kept) {
                const double tf = c.at->tf;
                const double dl = c.at->dl;
                score += c.weight * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * dl / avgdl));
            }
            ++c.at;
        }
        if (!kept) continue;
        const Ranked r{id, score};
        if (heap.size() < k) {
            heap.push_back(r);
            std::push_heap(heap.begin(), heap.end(), better);
        } else if (better(r, heap.front())) {
            std::pop_heap(heap.begin(), heap.end(), better);
            heap.back() = r;
            std::push_heap(heap.begin(), heap.end(), better);
        }
    }
    std::sort(heap.begin(), heap.end(), better);
    out.reserve(heap.size());
    for (const Ranked& r : heap) out.emplace_back(r.id, r.score);
    return out;
}

const TextField* TextIndexes::find(engine::CollectionId c, uint16_t slot) const {
    auto it = colls_.find(c.v);
    if (it == colls_.end()) return nullptr;
    for (const auto& f : it->second) {
        if (f->slot() == slot) return f.get();
    }
    return nullptr;
}

uint64_t TextIndexes::memory_bytes() const {
    uint64_t bytes = 0;
    for (const auto& [c, fields] : colls_) {
        for (const auto& f : fields) bytes += sizeof(TextField) + f->memory_bytes();
    }
    return bytes;
}

bool TextIndexes::has(engine::CollectionId c, uint16_t slot) const { return find(c, slot); }

std::optional<TextStats> TextIndexes::stats(engine::CollectionId c, uint16_t slot) const {
    const TextField* f = find(c, slot);
    return f ? std::optional<TextStats>(f->stats()) : std::nullopt;
}

engine::Result<std::vector<std::pair<uint64_t, double>>> TextIndexes::match(
    engine::CollectionId c, uint16_t slot, std::string_view query,
    const std::function<bool(uint64_t)>& keep, size_t k) const {
    const TextField* f = find(c, slot);
    if (!f) return std::vector<std::pair<uint64_t, double>>{};
    return f->match(query, keep, k);
}

// A write replaces `before` by `after`; its undo replaces `after` by `before`.
void TextIndexes::apply(const engine::WriteEvent& ev, bool undo) {
    auto it = colls_.find(ev.collection.v);
    if (it == colls_.end()) return;
    const std::optional<engine::DocView>& gone = undo ? ev.after : ev.before;
    const std::optional<engine::DocView>& comes = undo ? ev.before : ev.after;
    for (const auto& f : it->second) {
        const uint16_t slot = f->slot();
        if (gone && comes && same_bytes(gone->raw(slot), comes->raw(slot))) continue;
        if (gone) f->remove(ev.id.v, terms_of(*f, *gone));
        if (comes) f->add(ev.id.v, terms_of(*f, *comes));
    }
}

Status TextIndexes::on_write(const engine::WriteEvent& ev) {
    apply(ev, false);
    return Status::ok();
}

void TextIndexes::on_undo(const engine::WriteEvent& ev) { apply(ev, true); }

void TextIndexes::on_schema(engine::CollectionId c, const engine::Schema* schema,
                            const engine::DocSource* docs) {
    colls_.erase(c.v);
    if (!schema) return;
    std::vector<std::unique_ptr<TextField>> fields;
    for (size_t slot = 0; slot < schema->fields.size(); ++slot) {
        const engine::FieldDesc& f = schema->fields[slot];
        if (f.dropped || f.index.kind != engine::IndexKind::text) continue;
        fields.push_back(std::make_unique<TextField>(static_cast<uint16_t>(slot), f.index.text));
    }
    if (fields.empty()) return;
    if (docs) {
        docs->each([&](engine::DocId id, engine::DocView doc) {
            for (const auto& f : fields) f->add(id.v, terms_of(*f, doc));
            return true;
        });
    }
    colls_[c.v] = std::move(fields);
}

void TextIndexes::on_open(engine::OpenReport&) {}

engine::Result<std::vector<std::byte>> TextIndexes::encode_graph(engine::CollectionId, uint16_t,
                                                                 engine::Seq, uint64_t) {
    return Status::error(engine::Code::not_found, "no graph is kept for a text index");
}

}  // namespace fenec::index
