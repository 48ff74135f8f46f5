// SkipList: an ordered set of keys in an Arena that one writer extends
// while any number of readers search and iterate it without locks.
//
// Why this shape: the MemTable is read far more than it is written, and
// readers (Get, scans, a flush) must not wait for the engine's mutex. A
// skiplist only ever grows by linking a fully built node in, so a reader
// needs no lock if every link is published with a release store and read
// with an acquire load; it then sees each node either not at all or
// complete. Nothing is ever removed: nodes live until the arena goes.
//
// Invariants:
//  1. Level 0 links every node in ascending key order; level i > 0 links a
//     subsequence of level i - 1 (an express lane).
//  2. A node's key and its own next links are written before any
//     predecessor links to it (release), so a reader that reaches a node
//     (acquire) sees them.
//  3. A node is linked level 0 first, upwards. A reader may meet it on a low
//     level and not yet on a higher one; either way the list it walks is a
//     valid skiplist (an old or a newer one).
//  4. max_height_ only grows. A reader that sees a new height before the
//     head's links at that height simply finds nullptr there and descends.
//
// Thread-safety: Insert needs external synchronisation among writers (one
// at a time). Contains and Iterator may run concurrently with one Insert.
// The Arena and the list must outlive every iterator.
//
// `Comparator` is a copyable function object: int operator()(const Key& a,
// const Key& b) const, <0, 0, >0 as a is before, equal to, after b. `Key`
// is small and trivially copyable (an integer, a pointer to an encoded
// record): it is copied into each node. Iterator::Seek also takes any
// `Target` for which the comparator has int operator()(const Key& node_key,
// const Target& target) const, ordered consistently with the keys: a
// search then compares against a target decoded once, not re-encoded as a
// Key.
#pragma once

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <new>

#include "common/random.h"
#include "lsm/arena.h"

namespace slip::lsm {

template <typename Key, class Comparator>
class SkipList {
  struct Node;

 public:
  static constexpr int kMaxHeight = 12;
  // A node reaching level i also reaches level i + 1 with probability
  // 1/kBranching: ~4^12 = 16M entries before the top lane thins out, well
  // past any MemTable.
  static constexpr unsigned kBranching = 4;
  static constexpr uint64_t kDefaultSeed = 0x5eed;

  // `seed` fixes the node heights, so a test replays the same shape.
  SkipList(Comparator cmp, Arena* arena, uint64_t seed = kDefaultSeed)
      : cmp_(cmp), arena_(arena), head_(NewNode(Key{}, kMaxHeight)), rng_(seed) {}
  SkipList(const SkipList&) = delete;
  SkipList& operator=(const SkipList&) = delete;

  // REQUIRES: nothing equal to `key` in the list; no concurrent Insert.
  void Insert(const Key& key) {
    Node* prev[kMaxHeight];
    Node* x = FindGreaterOrEqual(key, prev);
    assert(x == nullptr || cmp_(key, x->key) != 0);
    (void)x;

    const int height = RandomHeight();
    const int old_height = max_height_.load(std::memory_order_relaxed);
    if (height > old_height) {
      for (int i = old_height; i < height; ++i) prev[i] = head_;
      // Relaxed is enough (invariant 4): a reader that sees the new height
      // early finds head_'s link there still nullptr.
      max_height_.store(height, std::memory_order_relaxed);
    }

    Node* n = NewNode(key, height);
    for (int i = 0; i < height; ++i) {
      // n is not yet reachable, so its own links need no ordering; the
      // release store into prev[i] publishes them with the key.
      n->RelaxedSetNext(i, prev[i]->RelaxedNext(i));
      prev[i]->SetNext(i, n);
    }
  }

  bool Contains(const Key& key) const {
    Node* x = FindGreaterOrEqual(key, nullptr);
    return x != nullptr && cmp_(key, x->key) == 0;
  }

  // A position in the list. Copyable; it holds no lock and no reference
  // count, so it stays valid (and sees later inserts ahead of it) as long
  // as the list lives.
  class Iterator {
   public:
    explicit Iterator(const SkipList* list) : list_(list) {}

    bool Valid() const { return node_ != nullptr; }
    // REQUIRES: Valid().
    const Key& key() const {
      assert(Valid());
      return node_->key;
    }
    // REQUIRES: Valid().
    void Next() {
      assert(Valid());
      node_ = node_->Next(0);
    }
    // REQUIRES: Valid(). The links run forwards only, so this searches for
    // the last key before this one: O(log n), not O(1).
    void Prev() {
      assert(Valid());
      node_ = list_->FindLessThan(node_->key);
      if (node_ == list_->head_) node_ = nullptr;
    }
    // The first key at or after `target` (a Key, or a Target the
    // comparator knows).
    template <typename Target>
    void Seek(const Target& target) {
      node_ = list_->FindGreaterOrEqual(target, nullptr);
    }
    void SeekToFirst() { node_ = list_->head_->Next(0); }
    void SeekToLast() {
      node_ = list_->FindLast();
      if (node_ == list_->head_) node_ = nullptr;
    }

   private:
    const SkipList* list_;
    Node* node_ = nullptr;
  };

 private:
  // A node is this header followed, in the same arena allocation, by its
  // `height` links. alignas keeps the links that follow aligned.
  struct alignas(std::atomic<Node*>) Node {
    explicit Node(const Key& k) : key(k) {}
    const Key key;

    std::atomic<Node*>* links() {
      return std::launder(reinterpret_cast<std::atomic<Node*>*>(reinterpret_cast<char*>(this) + sizeof(Node)));
    }
    Node* Next(int level) { return links()[level].load(std::memory_order_acquire); }
    void SetNext(int level, Node* n) { links()[level].store(n, std::memory_order_release); }
    // Only where no reader can race (the writer's own view, unpublished nodes).
    Node* RelaxedNext(int level) { return links()[level].load(std::memory_order_relaxed); }
    void RelaxedSetNext(int level, Node* n) { links()[level].store(n, std::memory_order_relaxed); }
  };

  Node* NewNode(const Key& key, int height) {
    static_assert(sizeof(Node) % alignof(std::atomic<Node*>) == 0);
    char* mem = arena_->AllocateAligned(sizeof(Node) + sizeof(std::atomic<Node*>) * height, alignof(Node));
    Node* n = new (mem) Node(key);
    for (int i = 0; i < height; ++i)
      new (mem + sizeof(Node) + i * sizeof(std::atomic<Node*>)) std::atomic<Node*>(nullptr);
    return n;
  }

  int RandomHeight() {
    int height = 1;
    while (height < kMaxHeight && rng_.Uniform(kBranching) == 0) ++height;
    return height;
  }

  int MaxHeight() const { return max_height_.load(std::memory_order_relaxed); }

  // The first node at or after `target` (nullptr if none). When `prev` is
  // given, fills prev[i] with the last node before `target` on level i, for
  // every level below MaxHeight().
  template <typename Target>
  Node* FindGreaterOrEqual(const Target& target, Node** prev) const {
    Node* x = head_;
    int level = MaxHeight() - 1;
    // The node that ended the level above is often next on this one too;
    // it is known not before `target`, so it is not compared again.
    const Node* known_not_before = nullptr;
    while (true) {
      Node* next = x->Next(level);
      if (next != nullptr && next != known_not_before && cmp_(next->key, target) < 0) {
        x = next;  // still before target: run along this level
      } else {
        known_not_before = next;
        if (prev != nullptr) prev[level] = x;
        if (level == 0) return next;
        --level;
      }
    }
  }

  // The last node before `key`, or head_.
  Node* FindLessThan(const Key& key) const {
    Node* x = head_;
    int level = MaxHeight() - 1;
    const Node* known_not_before = nullptr;  // as in FindGreaterOrEqual
    while (true) {
      Node* next = x->Next(level);
      if (next != nullptr && next != known_not_before && cmp_(next->key, key) < 0) {
        x = next;
      } else {
        known_not_before = next;
        if (level == 0) return x;
        --level;
      }
    }
  }

  // The last node, or head_ when empty.
  Node* FindLast() const {
    Node* x = head_;
    int level = MaxHeight() - 1;
    while (true) {
      Node* next = x->Next(level);
      if (next != nullptr) {
        x = next;
      } else {
        if (level == 0) return x;
        --level;
      }
    }
  }

  const Comparator cmp_;
  Arena* const arena_;
  Node* const head_;  // a sentinel of full height whose key is never compared
  std::atomic<int> max_height_{1};
  Random rng_;  // the writer's alone
};

}  // namespace slip::lsm
