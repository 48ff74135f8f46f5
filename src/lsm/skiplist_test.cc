// The Arena (lsm/arena.h), the SkipList (lsm/skiplist.h) and the MemTable
// on them (lsm/memtable.h): allocations aligned, disjoint and accounted for;
// the list against a std::set model over random inserts and at its edges;
// the MemTable's reads at every snapshot of a much-rewritten key and its
// iterator against a model; and readers racing one writer seeing only
// sorted lists that hold every key inserted before they started.
#include "lsm/skiplist.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/random.h"
#include "lsm/arena.h"
#include "lsm/memtable.h"

namespace slip::lsm {
namespace {

struct U64Order {
  int operator()(uint64_t a, uint64_t b) const { return a < b ? -1 : a > b ? 1 : 0; }
};
using U64List = SkipList<uint64_t, U64Order>;

TEST(ArenaTest, AllocationsAreAlignedDisjointAndAccounted) {
  Arena arena;
  EXPECT_EQ(arena.MemoryUsage(), 0u);
  Random rng(3);
  std::vector<std::pair<char*, size_t>> allocs;
  size_t requested = 0;
  for (int i = 0; i < 5000; ++i) {
    const size_t bytes = 1 + rng.Uniform(i % 100 == 0 ? 6000 : 200);  // now and then a large one
    char* p;
    if (rng.Uniform(2) == 0) {
      const size_t align = size_t{1} << rng.Uniform(5);  // 1..16
      p = arena.AllocateAligned(bytes, align);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << "align " << align;
    } else {
      p = arena.Allocate(bytes);
    }
    std::memset(p, static_cast<int>(i & 0xff), bytes);
    allocs.emplace_back(p, bytes);
    requested += bytes;
    ASSERT_GE(arena.MemoryUsage(), requested);
  }
  // Nothing overlapped: each allocation still holds its own byte.
  for (size_t i = 0; i < allocs.size(); ++i) {
    for (size_t j = 0; j < allocs[i].second; ++j) {
      ASSERT_EQ(static_cast<uint8_t>(allocs[i].first[j]), i & 0xff) << "allocation " << i << " overwritten";
    }
  }
  // Small blocks waste under a quarter each, large requests nothing but
  // slack: usage stays within a small factor of what was asked.
  EXPECT_LT(arena.MemoryUsage(), requested * 3 / 2 + 2 * Arena::kBlockSize);
}

TEST(ArenaTest, LargeAllocationsGetTheirOwnBlock) {
  Arena arena;
  arena.Allocate(10);
  const size_t one_block = arena.MemoryUsage();
  EXPECT_GE(one_block, Arena::kBlockSize);
  EXPECT_LT(one_block, Arena::kBlockSize + 64) << "a block and its bookkeeping";
  char* big = arena.AllocateAligned(1 << 20, 64);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % 64, 0u);
  EXPECT_GE(arena.MemoryUsage(), one_block + (1 << 20));
  const size_t after_big = arena.MemoryUsage();
  // The current block was kept: small requests still fit it.
  for (int i = 0; i < 100; ++i) arena.Allocate(16);
  EXPECT_EQ(arena.MemoryUsage(), after_big);
}

TEST(SkipListTest, EmptyList) {
  Arena arena;
  U64List list(U64Order{}, &arena);
  EXPECT_FALSE(list.Contains(0));
  EXPECT_FALSE(list.Contains(42));
  U64List::Iterator it(&list);
  EXPECT_FALSE(it.Valid());
  it.SeekToFirst();
  EXPECT_FALSE(it.Valid());
  it.SeekToLast();
  EXPECT_FALSE(it.Valid());
  it.Seek(0);
  EXPECT_FALSE(it.Valid());
  it.Seek(UINT64_MAX);
  EXPECT_FALSE(it.Valid());
}

TEST(SkipListTest, MatchesASetModelOverRandomInserts) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    Arena arena;
    U64List list(U64Order{}, &arena, seed);
    std::set<uint64_t> model;
    Random rng(seed * 1000);
    const uint64_t range = seed % 2 == 0 ? 5000 : UINT64_MAX;  // dense (many duplicates drawn) and sparse
    for (int i = 0; i < 3000; ++i) {
      const uint64_t k = rng.Uniform(range);
      if (model.insert(k).second) list.Insert(k);
    }
    // Forwards and backwards, exactly the model.
    U64List::Iterator it(&list);
    it.SeekToFirst();
    for (uint64_t k : model) {
      ASSERT_TRUE(it.Valid());
      ASSERT_EQ(it.key(), k);
      it.Next();
    }
    EXPECT_FALSE(it.Valid());
    it.SeekToLast();
    for (auto m = model.rbegin(); m != model.rend(); ++m) {
      ASSERT_TRUE(it.Valid());
      ASSERT_EQ(it.key(), *m);
      it.Prev();
    }
    EXPECT_FALSE(it.Valid());
    // Seek and Contains at present and absent keys.
    for (int probe = 0; probe < 2000; ++probe) {
      const uint64_t t = probe % 3 == 0 ? *std::next(model.begin(), rng.Uniform(model.size())) : rng.Uniform(range);
      ASSERT_EQ(list.Contains(t), model.count(t) == 1) << t;
      it.Seek(t);
      const auto want = model.lower_bound(t);
      ASSERT_EQ(it.Valid(), want != model.end()) << t;
      if (it.Valid()) {
        ASSERT_EQ(it.key(), *want) << t;
      }
    }
  }
}

TEST(SkipListTest, IteratorEdges) {
  Arena arena;
  U64List list(U64Order{}, &arena);
  for (uint64_t k : {10, 20, 30}) list.Insert(k);
  U64List::Iterator it(&list);
  it.Seek(0);  // before the first
  ASSERT_TRUE(it.Valid());
  EXPECT_EQ(it.key(), 10u);
  it.Prev();  // before the first: off the front
  EXPECT_FALSE(it.Valid());
  it.Seek(10);  // exactly a key
  EXPECT_EQ(it.key(), 10u);
  it.Seek(11);  // between keys
  EXPECT_EQ(it.key(), 20u);
  it.Prev();
  EXPECT_EQ(it.key(), 10u);
  it.Seek(30);  // the last
  EXPECT_EQ(it.key(), 30u);
  it.Next();
  EXPECT_FALSE(it.Valid());
  it.Seek(31);  // past the last
  EXPECT_FALSE(it.Valid());
  it.SeekToLast();
  EXPECT_EQ(it.key(), 30u);
  it.Prev();
  EXPECT_EQ(it.key(), 20u);
  it.SeekToFirst();
  EXPECT_EQ(it.key(), 10u);
  // A positioned iterator sees keys inserted ahead of it.
  list.Insert(15);
  it.Next();
  EXPECT_EQ(it.key(), 15u);
}

TEST(SkipListTest, TheSeedFixesTheShape) {
  // Node sizes follow their heights, so equal seeds give equal arenas.
  auto usage = [](uint64_t seed) {
    Arena arena;
    U64List list(U64Order{}, &arena, seed);
    for (uint64_t k = 0; k < 20000; ++k) list.Insert(k * 7919 % 20011);
    return arena.MemoryUsage();
  };
  EXPECT_EQ(usage(5), usage(5));
  EXPECT_EQ(usage(U64List::kDefaultSeed), usage(U64List::kDefaultSeed));
}

TEST(MemTableSkipListTest, GetAtEverySnapshotOfAMuchRewrittenKey) {
  MemTable mem;
  // "k" rewritten 600 times at even sequences, every third a deletion, and
  // neighbours that a wrong seek would land on: "j" before, "k\0" and "kk"
  // after (a lookup of "k" below its oldest version lands on "k\0").
  std::map<uint64_t, std::pair<ValueType, std::string>> versions;
  uint64_t seq = 100;
  mem.Add(1, ValueType::kValue, "j", "jv");
  mem.Add(2, ValueType::kValue, std::string_view("k\0", 2), "k0v");
  mem.Add(3, ValueType::kValue, "kk", "kkv");
  for (int i = 0; i < 600; ++i) {
    seq += 2;
    const bool del = i % 3 == 2;
    const std::string v = del ? "" : "value-" + std::to_string(i) + std::string(i % 200, 'x');  // some > 127 bytes
    mem.Add(seq, del ? ValueType::kDeletion : ValueType::kValue, "k", v);
    versions[seq] = {del ? ValueType::kDeletion : ValueType::kValue, v};
  }
  EXPECT_EQ(mem.entries(), 603u);
  EXPECT_EQ(mem.smallest_sequence(), 1u);
  EXPECT_EQ(mem.largest_sequence(), seq);
  for (uint64_t snap = 0; snap <= seq + 2; ++snap) {
    const auto got = mem.Get("k", snap);
    auto v = versions.upper_bound(snap);
    if (v == versions.begin()) {
      EXPECT_FALSE(got.has_value()) << snap;
      continue;
    }
    --v;
    ASSERT_TRUE(got.has_value()) << snap;
    EXPECT_EQ(got->sequence, v->first);
    EXPECT_EQ(got->type, v->second.first);
    EXPECT_EQ(got->value, v->second.second);
  }
  EXPECT_EQ(mem.Get("k")->sequence, seq) << "the default snapshot is the newest";
  EXPECT_FALSE(mem.Get("j", 0).has_value());
  EXPECT_EQ(mem.Get("j")->value, "jv");
  EXPECT_EQ(mem.Get("kk")->value, "kkv");
  EXPECT_FALSE(mem.Get("kj").has_value());
  EXPECT_FALSE(mem.Get("l").has_value());
  EXPECT_FALSE(mem.Get("").has_value());
  // A user key longer than Get's stack buffer.
  const std::string long_key(1000, 'z');
  mem.Add(seq + 1, ValueType::kValue, long_key, "long");
  EXPECT_EQ(mem.Get(long_key)->value, "long");
  EXPECT_FALSE(mem.Get(long_key, seq).has_value());
}

TEST(MemTableSkipListTest, IteratorSeeksAndWalksAsTheModel) {
  MemTable mem(7);
  std::map<std::string, std::string, bool (*)(const std::string&, const std::string&)> model(
      [](const std::string& a, const std::string& b) { return CompareInternalKeys(a, b) < 0; });
  Random rng(11);
  // Half the keys from bytes that trip signed compares and prefixes.
  auto odd_key = [&] {
    static constexpr char kBytes[] = {'\0', 'a', '\x7f', '\x80', '\xff'};
    std::string k(rng.Uniform(4), ' ');
    for (char& c : k) c = kBytes[rng.Uniform(sizeof(kBytes))];
    return k;
  };
  for (uint64_t seq = 1; seq <= 2000; ++seq) {
    const std::string k = seq % 2 == 0 ? odd_key() : "key" + std::to_string(rng.Uniform(200));
    const bool del = rng.Uniform(5) == 0;
    const std::string v = del ? "" : std::string(rng.Uniform(300), static_cast<char>('a' + seq % 26));
    mem.Add(seq, del ? ValueType::kDeletion : ValueType::kValue, k, v);
    model.emplace(InternalKey(k, seq, del ? ValueType::kDeletion : ValueType::kValue), v);
  }
  size_t bytes = 0;
  for (const auto& [k, v] : model) bytes += k.size() + v.size();
  EXPECT_GE(mem.ApproximateBytes(), bytes) << "the arena holds every key and value";

  MemTable::Iterator it(mem);
  EXPECT_FALSE(it.Valid());
  it.SeekToFirst();
  for (const auto& [k, v] : model) {
    ASSERT_TRUE(it.Valid());
    ASSERT_EQ(it.key(), k);
    ASSERT_EQ(it.value(), v);
    it.Next();
  }
  EXPECT_FALSE(it.Valid());
  it.SeekToLast();
  EXPECT_EQ(it.key(), model.rbegin()->first);
  it.Prev();
  EXPECT_EQ(it.key(), std::next(model.rbegin())->first);

  size_t n = 0;
  auto m = model.begin();
  mem.ForEach([&](std::string_view k, std::string_view v) {
    ASSERT_EQ(k, m->first);
    ASSERT_EQ(v, m->second);
    ++m, ++n;
  });
  EXPECT_EQ(n, model.size());

  for (int probe = 0; probe < 2000; ++probe) {
    const std::string target =
        InternalKey(probe % 2 == 0 ? odd_key() : "key" + std::to_string(rng.Uniform(220)), rng.Uniform(2100),
                    probe % 3 == 0 ? ValueType::kDeletion : ValueType::kValue);
    it.Seek(target);
    const auto want = model.lower_bound(target);
    // Get agrees: the entry a seek to (user key, snapshot) finds, if of that key.
    const auto parsed = ParseInternalKey(target);
    const auto at_snapshot = model.lower_bound(InternalKey(parsed->user_key, parsed->sequence, ValueType::kValue));
    const auto got = mem.Get(parsed->user_key, parsed->sequence);
    const bool hit = at_snapshot != model.end() && ParseInternalKey(at_snapshot->first)->user_key == parsed->user_key;
    ASSERT_EQ(got.has_value(), hit);
    if (hit) {
      ASSERT_EQ(InternalKey(parsed->user_key, got->sequence, got->type), at_snapshot->first);
      ASSERT_EQ(got->value, at_snapshot->second);
    }
    ASSERT_EQ(it.Valid(), want != model.end());
    if (it.Valid()) {
      ASSERT_EQ(it.key(), want->first);
      ASSERT_EQ(it.value(), want->second);
    }
  }
  it.Seek(InternalKey("", kMaxSequence, ValueType::kValue));
  EXPECT_EQ(it.key(), model.begin()->first);
  it.Seek(InternalKey("\xff\xff\xff\xff", 0, ValueType::kDeletion));
  EXPECT_FALSE(it.Valid());
}

// One writer inserts keys in a fixed random order while readers walk the
// list over and over: every walk is strictly sorted, and holds every key
// the writer had finished inserting when the walk began.
TEST(SkipListTest, ReadersRaceOneWriter) {
  constexpr int kKeys = 20000, kReaders = 3;
  std::vector<uint64_t> order(kKeys);
  std::iota(order.begin(), order.end(), 0);
  Random rng(17);
  for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.Uniform(i + 1)]);
  for (auto& k : order) k = k * 2 + 1;  // odd keys; even ones never inserted

  Arena arena;
  U64List list(U64Order{}, &arena);
  std::atomic<int> inserted{0};  // order[0, inserted) are in the list
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::atomic<int> walks{0}, raced{0};  // raced: walks begun mid-insertion
  std::atomic<int> started{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);

  auto reader = [&] {
    started.fetch_add(1);
    std::vector<uint64_t> seen;
    U64List::Iterator it(&list);
    // Walk at least once after the writer is done, so the full list is checked.
    bool last = false;
    while (!last) {
      last = done.load(std::memory_order_acquire) || std::chrono::steady_clock::now() > deadline;
      const int known = inserted.load(std::memory_order_acquire);
      seen.clear();
      for (it.SeekToFirst(); it.Valid(); it.Next()) {
        if (!seen.empty() && seen.back() >= it.key()) failures.fetch_add(1);
        seen.push_back(it.key());
      }
      for (int i = 0; i < known; i += 1 + i % 7) {  // a spread of the known keys
        if (!std::binary_search(seen.begin(), seen.end(), order[i])) failures.fetch_add(1);
        if (!list.Contains(order[i])) failures.fetch_add(1);
      }
      it.Seek(order[known / 2] - 1);  // an even (never inserted) target lands on a key after it
      if (known > 0 && (!it.Valid() || it.key() < order[known / 2])) failures.fetch_add(1);
      walks.fetch_add(1);
      if (known > 0 && known < kKeys) raced.fetch_add(1);
    }
  };
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) readers.emplace_back(reader);
  while (started.load() < kReaders) std::this_thread::yield();
  for (int i = 0; i < kKeys; ++i) {
    list.Insert(order[i]);
    inserted.store(i + 1, std::memory_order_release);
    // Spread the inserts over ~20 ms so walks overlap them even on few cores.
    if (i % 500 == 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  done.store(true, std::memory_order_release);
  for (auto& t : readers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(walks.load(), kReaders);
  EXPECT_GT(raced.load(), 0) << "no walk overlapped the writer";
  for (int i = 0; i < kKeys; ++i) ASSERT_TRUE(list.Contains(order[i]));
}

// The same through the MemTable: Get of an added key returns its value
// while Adds go on.
TEST(MemTableSkipListTest, GetsRaceOneAdder) {
  constexpr int kKeys = 10000, kReaders = 3;
  MemTable mem;
  std::atomic<int> added{0};
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  auto key = [](int i) { return "key" + std::to_string(i * 7919 % kKeys); };
  auto reader = [&](int r) {
    Random rng(100 + r);
    MemTable::Iterator it(&mem);
    bool last = false;
    while (!last) {
      last = done.load(std::memory_order_acquire);
      const int known = added.load(std::memory_order_acquire);
      for (int probe = 0; probe < 50 && known > 0; ++probe) {
        const int i = static_cast<int>(rng.Uniform(known));
        const auto f = mem.Get(key(i));
        if (!f || f->sequence != static_cast<uint64_t>(i + 1) || f->value != "v" + std::to_string(i)) {
          failures.fetch_add(1);
        }
      }
      std::string prev;
      for (it.SeekToFirst(); it.Valid(); it.Next()) {
        if (!prev.empty() && CompareInternalKeys(prev, it.key()) >= 0) failures.fetch_add(1);
        prev.assign(it.key());
      }
    }
  };
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) readers.emplace_back(reader, r);
  for (int i = 0; i < kKeys; ++i) {
    mem.Add(i + 1, ValueType::kValue, key(i), "v" + std::to_string(i));
    added.store(i + 1, std::memory_order_release);
    if (i % 500 == 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  done.store(true, std::memory_order_release);
  for (auto& t : readers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mem.entries(), static_cast<size_t>(kKeys));
}

}  // namespace
}  // namespace slip::lsm
