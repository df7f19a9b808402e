// shard/cow_map.h: an ordered map from names whose copies share their entries. The directory's
// maps are copied whole at every change (shard/directory.h: each change publishes a new snapshot,
// so reads never wait), and a std::map of 100,000 tenant rows took 84 ms to copy: a router of
// that many tenants could make about a dozen changes a second. CowMap keeps its entries in chunks
// of at most chunk_max, each a std::map held by a shared_ptr, ordered by key range; a copy copies
// the chunks' pointers, and a change clones only the chunk it touches (the first time a copy
// shares it). Iteration is in key order, as std::map's.
//
// The interface is the part of std::map the router uses. Mutable access (operator[], a
// non-const find, at or begin, a mutable iterator stepping into the next chunk) makes the chunks
// it reaches this map's own first, so a snapshot a reader holds never changes under it. Not
// thread-safe for writers, as std::map is not; copies may be taken on any thread while the map is
// not being written.
//
// Unlike std::map's, iterators and references are good only until the map is next copied, moved
// or reached mutably (any of the above, or an insert or erase, which may split, clone or drop a
// chunk): take them after the copy a change edits, and use them before the next mutable access.
// One taken mutably and kept across a copy would write into the chunk the copy shares. The
// directory takes each change's copy first, then edits it (Directory::change).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fenec::shard {

template <class V>
class CowMap {
    using Inner = std::map<std::string, V, std::less<>>;
    using Chunks = std::vector<std::shared_ptr<Inner>>;

  public:
    using key_type = std::string;
    using mapped_type = V;
    using value_type = typename Inner::value_type;
    using size_type = std::size_t;
    static constexpr std::size_t chunk_max = 512;

    template <bool Const>
    class Iter {
        using InnerIt =
            std::conditional_t<Const, typename Inner::const_iterator, typename Inner::iterator>;

      public:
        using iterator_category = std::forward_iterator_tag;
        using value_type = CowMap::value_type;
        using difference_type = std::ptrdiff_t;
        using pointer = std::conditional_t<Const, const value_type*, value_type*>;
        using reference = std::conditional_t<Const, const value_type&, value_type&>;

        Iter() = default;
        // A mutable iterator is a const one too.
        template <bool C = Const, class = std::enable_if_t<C>>
        Iter(const Iter<false>& o) : map_(o.map_), i_(o.i_), it_(o.it_) {}

        reference operator*() const { return *it_; }
        pointer operator->() const { return &*it_; }
        Iter& operator++() {
            if (++it_ == map_->chunks_[i_]->end()) {
                ++i_;
                if (i_ < map_->chunks_.size()) {
                    if constexpr (!Const) map_->own(i_);  // written through next: this map's
                    it_ = InnerIt(map_->chunks_[i_]->begin());
                } else {
                    it_ = InnerIt();
                }
            }
            return *this;
        }
        Iter operator++(int) {
            Iter was = *this;
            ++*this;
            return was;
        }
        friend bool operator==(const Iter& a, const Iter& b) { return a.same(b); }

      private:
        friend class CowMap;
        template <bool>
        friend class Iter;
        using Map = std::conditional_t<Const, const CowMap, CowMap>;
        bool same(const Iter& b) const {
            return i_ == b.i_ && (map_ == nullptr || i_ >= map_->chunks_.size() || it_ == b.it_);
        }
        Iter(Map* map, std::size_t i, InnerIt it) : map_(map), i_(i), it_(it) {}
        Map* map_ = nullptr;
        std::size_t i_ = 0;
        InnerIt it_{};
    };
    using iterator = Iter<false>;
    using const_iterator = Iter<true>;

    CowMap() = default;
    CowMap(std::initializer_list<value_type> init) {
        for (const auto& [k, v] : init) emplace(k, v);  // the first of a key kept, as std::map
    }
    CowMap(const CowMap&) = default;  // shares every chunk
    CowMap& operator=(const CowMap&) = default;
    CowMap(CowMap&& o) noexcept : chunks_(std::move(o.chunks_)), size_(std::exchange(o.size_, 0)) {
        o.chunks_.clear();
    }
    CowMap& operator=(CowMap&& o) noexcept {
        if (this == &o) return *this;
        chunks_ = std::move(o.chunks_);
        size_ = std::exchange(o.size_, 0);
        o.chunks_.clear();
        return *this;
    }

    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }

    const_iterator begin() const {
        return chunks_.empty() ? end() : const_iterator(this, 0, chunks_[0]->cbegin());
    }
    const_iterator end() const { return const_iterator(this, chunks_.size(), {}); }
    const_iterator cbegin() const { return begin(); }
    const_iterator cend() const { return end(); }
    // Every chunk made this map's own: iterating to change entries.
    iterator begin() {
        for (std::size_t i = 0; i < chunks_.size(); ++i) own(i);
        return chunks_.empty() ? end() : iterator(this, 0, chunks_[0]->begin());
    }
    iterator end() { return iterator(this, chunks_.size(), {}); }

    const_iterator find(std::string_view k) const {
        const std::size_t i = chunk_of(k);
        if (i == npos) return end();
        auto it = chunks_[i]->find(k);
        return it == chunks_[i]->end() ? end() : const_iterator(this, i, it);
    }
    iterator find(std::string_view k) {
        const std::size_t i = chunk_of(k);
        if (i == npos || !chunks_[i]->contains(k)) return end();
        own(i);
        return iterator(this, i, chunks_[i]->find(k));
    }
    bool contains(std::string_view k) const { return find(k) != end(); }
    std::size_t count(std::string_view k) const { return contains(k) ? 1 : 0; }
    const V& at(std::string_view k) const {
        auto it = find(k);
        if (it == end()) throw std::out_of_range("CowMap::at: no entry " + std::string(k));
        return it->second;
    }
    V& at(std::string_view k) {
        auto it = find(k);
        if (it == end()) throw std::out_of_range("CowMap::at: no entry " + std::string(k));
        return it->second;
    }

    V& operator[](const std::string& k) { return emplace(k, V{}).first->second; }
    // Inserted when absent, as std::map's; the bool says whether it was.
    std::pair<iterator, bool> emplace(const std::string& k, V v) {
        return emplace_in(k, std::move(v));
    }
    std::pair<iterator, bool> insert(const value_type& kv) { return emplace(kv.first, kv.second); }
    std::pair<iterator, bool> insert_or_assign(const std::string& k, V v) {
        auto [it, made] = emplace(k, V{});
        it->second = std::move(v);
        return {it, made};
    }

    std::size_t erase(std::string_view k) {
        const std::size_t i = chunk_of(k);
        if (i == npos || !chunks_[i]->contains(k)) return 0;
        own(i);
        chunks_[i]->erase(chunks_[i]->find(k));
        drop_if_empty(i);
        --size_;
        return 1;
    }
    void erase(const_iterator pos) { (void)erase(std::string(pos->first)); }
    void erase(iterator pos) { (void)erase(std::string(pos->first)); }
    void clear() {
        chunks_.clear();
        size_ = 0;
    }

    // The entries `pred` holds for, erased (as std::erase_if does for a std::map); how many.
    template <class Pred>
    friend std::size_t erase_if(CowMap& m, Pred pred) {
        std::vector<std::string> gone;
        for (const value_type& kv : std::as_const(m)) {
            if (pred(kv)) gone.push_back(kv.first);
        }
        for (const std::string& k : gone) (void)m.erase(k);
        return gone.size();
    }

    // Whether the two hold the very same chunks: equal without a look at an entry (a copy not
    // reached mutably since, or the map it was copied from).
    bool shares_all(const CowMap& o) const { return chunks_ == o.chunks_; }
    // Calls fn(key, before's entry or null, after's or null) for each key of an entry in a chunk
    // the two maps do not share, in key order: a superset of the keys whose entries differ (a key
    // of a chunk both hold is in both, the same), at the cost of the chunks not shared, not of
    // the maps. Between a map and a copy of it changed since, that is the chunks the changes
    // touched (or reached mutably, entries unchanged).
    template <class F>
    friend void each_unshared(const CowMap& before, const CowMap& after, F fn) {
        const std::vector<const Inner*> b = before.unshared_with(after);
        const std::vector<const Inner*> a = after.unshared_with(before);
        struct Cursor {
            const std::vector<const Inner*>& chunks;
            std::size_t i = 0;
            typename Inner::const_iterator it{};
            explicit Cursor(const std::vector<const Inner*>& c) : chunks(c) {
                if (!chunks.empty()) it = chunks[0]->begin();  // chunks are never empty
            }
            bool done() const { return i >= chunks.size(); }
            void next() {
                if (++it == chunks[i]->end() && ++i < chunks.size()) it = chunks[i]->begin();
            }
        };
        Cursor x(b), y(a);
        while (!x.done() || !y.done()) {
            if (y.done() || (!x.done() && x.it->first < y.it->first)) {
                fn(x.it->first, &x.it->second, static_cast<const V*>(nullptr));
                x.next();
            } else if (x.done() || y.it->first < x.it->first) {
                fn(y.it->first, static_cast<const V*>(nullptr), &y.it->second);
                y.next();
            } else {
                fn(x.it->first, &x.it->second, &y.it->second);
                x.next();
                y.next();
            }
        }
    }

    friend bool operator==(const CowMap& a, const CowMap& b) {
        return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
    }

  private:
    static constexpr std::size_t npos = static_cast<std::size_t>(-1);

    // The chunk whose range holds `k`: the last whose first key is not above it; npos when `k`
    // is below every chunk (or there is none).
    std::size_t chunk_of(std::string_view k) const {
        auto it = std::upper_bound(chunks_.begin(), chunks_.end(), k,
                                   [](std::string_view key, const std::shared_ptr<Inner>& c) {
                                       return key < std::string_view(c->begin()->first);
                                   });
        return it == chunks_.begin() ? npos : static_cast<std::size_t>(it - chunks_.begin()) - 1;
    }
    // Chunk i this map's alone before it changes: cloned while another copy shares it. A count of
    // one can only be this map's own (no other copy can take it meanwhile: copies are not taken
    // of a map being written), and the fence orders this write after any reads made through a
    // copy since released.
    void own(std::size_t i) {
        if (chunks_[i].use_count() == 1) {
            std::atomic_thread_fence(std::memory_order_acquire);
            return;
        }
        chunks_[i] = std::make_shared<Inner>(*chunks_[i]);
    }
    // This map's chunks `other` does not hold, in order.
    std::vector<const Inner*> unshared_with(const CowMap& other) const {
        std::vector<const Inner*> theirs;
        theirs.reserve(other.chunks_.size());
        for (const auto& c : other.chunks_) theirs.push_back(c.get());
        std::sort(theirs.begin(), theirs.end(), std::less<const Inner*>());
        std::vector<const Inner*> out;
        for (const auto& c : chunks_) {
            if (!std::binary_search(theirs.begin(), theirs.end(), c.get(),
                                    std::less<const Inner*>())) {
                out.push_back(c.get());
            }
        }
        return out;
    }
    void drop_if_empty(std::size_t i) {
        if (chunks_[i]->empty()) chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    std::pair<iterator, bool> emplace_in(const std::string& k, V&& v) {
        if (chunks_.empty()) {
            auto first = std::make_shared<Inner>();
            auto it = first->try_emplace(k, std::move(v)).first;
            chunks_.push_back(std::move(first));
            size_ = 1;
            return {iterator(this, 0, it), true};
        }
        std::size_t i = chunk_of(k);
        if (i == npos) i = 0;  // below every key: the first chunk's
        own(i);
        // A split's allocations before the entry goes in: what may throw changes nothing.
        std::shared_ptr<Inner> right;
        if (chunks_[i]->size() >= chunk_max && !chunks_[i]->contains(k)) {
            right = std::make_shared<Inner>();
            if (chunks_.size() == chunks_.capacity()) chunks_.reserve(2 * chunks_.size());
        }
        auto [it, made] = chunks_[i]->try_emplace(k, std::move(v));
        if (!made) return {iterator(this, i, it), false};
        ++size_;
        if (right) {
            // Split in halves: extract and insert of node handles allocate nothing, and keep
            // each entry where it is.
            auto mid = std::next(chunks_[i]->begin(), static_cast<std::ptrdiff_t>(chunk_max / 2));
            while (mid != chunks_[i]->end()) right->insert(chunks_[i]->extract(mid++));
            chunks_.insert(chunks_.begin() + static_cast<std::ptrdiff_t>(i) + 1, std::move(right));
            if (k >= chunks_[i + 1]->begin()->first) ++i;
            it = chunks_[i]->find(k);
        }
        return {iterator(this, i, it), true};
    }

    Chunks chunks_;  // by key range, each non-empty; chunks_[i]'s keys below chunks_[i+1]'s
    std::size_t size_ = 0;
};

}  // namespace fenec::shard
