// index/text_index.h: BM25 text search (fenecql.md §8): per @text field an inverted index kept
// current through the engine's IndexHook, and the exact score the spec gives.
//
// Invariant: for every (collection, slot) of a live @text field, the postings, N (live rows whose
// text yields at least one term) and the total of their lengths are exactly what tokenizing every
// live row of the collection now would give; a deleted row leaves them at once. The field is
// rebuilt from the rows whenever on_schema is heard for its collection, and each write (and its
// undo) applies the difference. Thread-safety: like IndexSet, the engine calls the hook under its
// writer lock and readers call match() under a ReadView (the shared lock); no lock of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/hooks.h"

namespace fenec::index {

class Stemmer;

// A field's corpus statistics (fenecql.md §8).
struct TextStats {
    uint64_t rows = 0;          // N
    uint64_t total_length = 0;  // sum of dl over those rows; avgdl = total_length / rows
    size_t terms = 0;           // distinct terms held
};

// One @text field's inverted index.
class TextField {
public:
  // k1 and b as the schema keeps them, in hundredths (engine.md §2.4); `params.stem` names
  // the stemmer of its terms (index/stemmer.h), empty for none.
  TextField(uint16_t slot, const engine::TextParams& params);
  ~TextField();

  // The terms of a row's text, as the field makes them (stemmed under `stem`).
  std::vector<std::string> terms(std::string_view text) const;

  uint16_t slot() const { return slot_; }
  // `terms` are the row's tokens (index/tokenizer.h); a row with none is not counted.
  void add(uint64_t id, std::vector<std::string> terms);
  // Takes back an add of the same id and terms.
  void remove(uint64_t id, std::vector<std::string> terms);
  TextStats stats() const { return TextStats{rows_, total_length_, postings_.size()}; }
  // The heap its postings hold (index/memory.h), kept as rows are added and removed.
  uint64_t memory_bytes() const { return bytes_; }

  // See TextIndexes::match.
  engine::Result<std::vector<std::pair<uint64_t, double>>> match(
      std::string_view query, const std::function<bool(uint64_t)>& keep, size_t k) const;

private:
  struct Posting {
      uint64_t id = 0;
      uint32_t tf = 0;  // the term's count in the row
      uint32_t dl = 0;  // the row's count of terms (a row of 16 MiB holds fewer than 2^32)
    };
    using Postings = std::vector<Posting>;  // ascending by id

    // The query's distinct terms in order of first appearance, each prefix replaced by the
    // terms it stands for in byte order, with their counts; refused past
    // limits::match_prefix_terms_max.
    engine::Result<std::vector<std::pair<std::string_view, uint32_t>>> query_terms(
        std::string_view query) const;

    uint16_t slot_;
    double k1_;
    double b_;
    std::string stem_;  // the language, empty for none
    // The stemmer of the rows' terms, used under the engine's writer lock only; a query makes
    // its own (a stemmer is not thread-safe). Null when the field is not stemmed, or when this
    // build's libstemmer lacks `stem_` (a file from another build): then the field holds no
    // postings and a match on it is refused, never answered unstemmed.
    std::unique_ptr<Stemmer> stemmer_;
    bool stem_missing_ = false;
    std::unordered_map<std::string, Postings> postings_;
    // postings_'s keys in byte order (views of them: a node's key never moves), so a prefix
    // finds its terms as one range.
    std::set<std::string_view> dictionary_;
    uint64_t rows_ = 0;
    uint64_t total_length_ = 0;
    uint64_t bytes_ = 0;
};

class TextIndexes final : public engine::IndexHook {
public:
    // engine::IndexHook. Never refuses a write.
    engine::Status on_write(const engine::WriteEvent& ev) override;
    void on_undo(const engine::WriteEvent& ev) override;
    void on_schema(engine::CollectionId c, const engine::Schema* schema,
                   const engine::DocSource* docs) override;
    void on_open(engine::OpenReport& report) override;
    // No graph is kept for text: always not_found.
    engine::Result<std::vector<std::byte>> encode_graph(engine::CollectionId c, uint16_t slot,
                                                        engine::Seq at,
                                                        uint64_t durable_end) override;
    uint64_t memory_bytes() const override;

    // Whether (c, slot) is a live @text field.
    bool has(engine::CollectionId c, uint16_t slot) const;
    // The field's statistics, or nullopt if it is not a @text field.
    std::optional<TextStats> stats(engine::CollectionId c, uint16_t slot) const;

    // The rows holding at least one term of `query` that `keep` accepts, scored by BM25 over the
    // whole collection's statistics (fenecql.md §8), best first, equal scores by lower id, at
    // most `k`. Empty if (c, slot) is not a @text field or the query has no terms. `keep` is
    // called at most once per row holding a query term. A prefix term (`search*`,
    // index/tokenizer.h) counts as every term of the field starting with it, each once; more
    // than limits::match_prefix_terms_max of them in one query is invalid_argument.
    engine::Result<std::vector<std::pair<uint64_t, double>>> match(
        engine::CollectionId c, uint16_t slot, std::string_view query,
        const std::function<bool(uint64_t)>& keep, size_t k) const;

  private:
    const TextField* find(engine::CollectionId c, uint16_t slot) const;
    void apply(const engine::WriteEvent& ev, bool undo);

    std::map<uint32_t, std::vector<std::unique_ptr<TextField>>> colls_;
};

}  // namespace fenec::index
