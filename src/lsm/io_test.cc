// Files on disk (lsm/posix_file.h), the block cache (lsm/cache.h) and a
// Table reading through it: bytes round-trip at every size with and without
// O_DIRECT (and through its fallback), a Sync mid-block loses nothing after
// it, damaged blocks are never cached, and Seek agrees with a sorted model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

#include "common/random.h"
#include "lsm/cache.h"
#include "lsm/posix_file.h"
#include "lsm/table.h"
#include "lsm/testing/temp_dir.h"

namespace slip::lsm {
namespace {

using testing::TempDir;

std::string Bytes(Random* rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng->Uniform(256));
  return s;
}

bool IsDirect(const WritableFile& f) { return static_cast<const PosixWritableFile&>(f).direct(); }
bool IsDirect(const RandomAccessFile& f) { return static_cast<const PosixRandomAccessFile&>(f).direct(); }

// Writes `data` in random pieces (syncing now and then), reads it back in
// random ranges, and checks the size on disk is the logical one.
void RoundTrip(const std::string& path, const FileOptions& options, const std::string& data, Random* rng,
               bool expect_direct) {
  {
    auto w = NewWritableFile(path, options);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    EXPECT_EQ(IsDirect(**w), expect_direct);
    size_t at = 0;
    while (at < data.size()) {
      const size_t n = std::min<size_t>(data.size() - at, 1 + rng->Uniform(rng->Bernoulli(0.1) ? 200000 : 5000));
      ASSERT_TRUE((*w)->Append(std::string_view(data).substr(at, n)).ok());
      at += n;
      if (rng->Bernoulli(0.2)) {
        ASSERT_TRUE((*w)->Sync().ok());
      }
      ASSERT_EQ((*w)->size(), at);
    }
    ASSERT_TRUE(static_cast<PosixWritableFile&>(**w).Close().ok());
  }
  auto size = FileSize(path);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, data.size()) << "padding trimmed";
  auto r = NewRandomAccessFile(path, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(IsDirect(**r), expect_direct);
  ASSERT_EQ((*r)->size(), data.size());
  std::string scratch;
  auto whole = (*r)->Read(0, data.size(), &scratch);
  ASSERT_TRUE(whole.ok());
  ASSERT_TRUE(*whole == data) << data.size() << " bytes";
  for (int i = 0; i < 50 && !data.empty(); ++i) {
    const uint64_t off = rng->Uniform(data.size());
    const size_t n = rng->Uniform(std::min<uint64_t>(data.size() - off, 20000) + 1);
    auto got = (*r)->Read(off, n, &scratch);
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(*got, std::string_view(data).substr(off, n)) << "at " << off << " + " << n;
  }
  EXPECT_TRUE((*r)->Read(data.size(), 1, &scratch).status().Is(Code::kCorruption));
  EXPECT_TRUE((*r)->Read(data.size() + 4096, 0, &scratch).status().Is(Code::kCorruption));
  EXPECT_TRUE((*r)->Read(0, data.size() + 1, &scratch).status().Is(Code::kCorruption));
}

void RoundTripManySizes(const std::string& dir, bool direct_io, bool expect_direct) {
  Random rng(direct_io ? 11 : 12);
  IoCounters counters;
  FileOptions options{direct_io, &counters};
  int i = 0;
  for (size_t n : {size_t{0}, size_t{1}, size_t{100}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{65535},
                   size_t{65536}, size_t{65537}, size_t{200000}, size_t{1} << 20, (size_t{1} << 20) + 3}) {
    SCOPED_TRACE(n);
    RoundTrip(dir + "/f" + std::to_string(i++), options, Bytes(&rng, n), &rng, expect_direct);
  }
  EXPECT_GT(counters.bytes_written.load(), 2u << 20);
  EXPECT_GT(counters.bytes_read.load(), 2u << 20);
  EXPECT_GT(counters.syncs.load(), 0u);
}

TEST(PosixFileTest, RoundTripsBuffered) {
  TempDir dir("/tmp");
  ASSERT_TRUE(dir.ok());
  RoundTripManySizes(dir.path(), false, false);
}

TEST(PosixFileTest, RoundTripsDirectOnExt4) {
  TempDir dir("/tmp");
  ASSERT_TRUE(dir.ok());
  const bool supported = DirectIoSupported(dir.path());
  if (!supported) GTEST_SKIP() << "O_DIRECT is not supported under /tmp here";
  RoundTripManySizes(dir.path(), true, true);
}

TEST(PosixFileTest, RoundTripsDirectUnderDevShm) {
  TempDir dir("/dev/shm");
  if (!dir.ok()) GTEST_SKIP() << "no /dev/shm";
  // tmpfs refuses O_DIRECT before Linux 6.6 and takes it since: either way
  // the bytes round-trip, and direct() says which happened.
  RoundTripManySizes(dir.path(), true, DirectIoSupported(dir.path()));
}

TEST(PosixFileTest, FallsBackToBufferedWhereRefused) {
  TempDir dir("/tmp");
  ASSERT_TRUE(dir.ok());
  SimulateDirectIoRefusedForTesting(true);
  EXPECT_FALSE(DirectIoSupported(dir.path()));
  RoundTripManySizes(dir.path(), true, false);
  SimulateDirectIoRefusedForTesting(false);
}

// A Sync in the middle of a block, then more appends, then reopening for
// append (twice, at unaligned sizes): every byte reads back.
void SyncMidBlockAndReopen(const std::string& dir, bool direct_io) {
  const std::string path = dir + "/wal";
  Random rng(21);
  const FileOptions options{direct_io, nullptr};
  std::string model;
  auto append = [&](WritableFile* f, size_t n) {
    const std::string s = Bytes(&rng, n);
    ASSERT_TRUE(f->Append(s).ok());
    model += s;
  };
  {
    auto w = NewWritableFile(path, options);
    ASSERT_TRUE(w.ok());
    append(w->get(), 100);
    ASSERT_TRUE((*w)->Sync().ok());
    auto mid = FileSize(path);
    ASSERT_TRUE(mid.ok());
    EXPECT_EQ(*mid, 100u) << "a synced file has no padding";
    append(w->get(), 5000);  // rewrites the first block, crosses into the second
    ASSERT_TRUE((*w)->Sync().ok());
    append(w->get(), 3);
    ASSERT_TRUE((*w)->Sync().ok());
    ASSERT_TRUE((*w)->Sync().ok());  // nothing new
    append(w->get(), 70000);         // past a whole buffer
    // Destroyed without Close: it flushes and trims.
  }
  for (int round = 0; round < 2; ++round) {
    auto a = NewAppendableFile(path, options);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ((*a)->size(), model.size());
    append(a->get(), 777 + round);
    ASSERT_TRUE((*a)->Sync().ok());
    append(a->get(), 10);
  }
  auto size = FileSize(path);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, model.size());
  auto r = NewRandomAccessFile(path, options);
  ASSERT_TRUE(r.ok());
  std::string scratch;
  auto got = (*r)->Read(0, model.size(), &scratch);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got == model);
  // Appending to a missing file creates it.
  auto fresh = NewAppendableFile(dir + "/fresh", options);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->size(), 0u);
}

TEST(PosixFileTest, SyncMidBlockThenAppendAndReopenBuffered) {
  TempDir dir("/tmp");
  ASSERT_TRUE(dir.ok());
  SyncMidBlockAndReopen(dir.path(), false);
}

TEST(PosixFileTest, SyncMidBlockThenAppendAndReopenDirect) {
  TempDir dir("/tmp");
  ASSERT_TRUE(dir.ok());
  SyncMidBlockAndReopen(dir.path(), true);
}

TEST(PosixFileTest, NamesAndDirectories) {
  TempDir dir("/tmp");
  ASSERT_TRUE(dir.ok());
  const std::string sub = dir.File("db");
  ASSERT_TRUE(CreateDir(sub).ok());
  EXPECT_TRUE(CreateDir(sub).ok()) << "exists already";
  for (const char* name : {"MANIFEST-000002.tmp", "000005.sst", "000004.log"}) {
    auto w = NewWritableFile(sub + "/" + name);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(name).ok());
  }
  ASSERT_TRUE(RenameFile(sub + "/MANIFEST-000002.tmp", sub + "/MANIFEST-000002").ok());
  ASSERT_TRUE(SyncDir(sub).ok());
  auto names = ListDir(sub);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"000004.log", "000005.sst", "MANIFEST-000002"}));
  auto size = FileSize(sub + "/MANIFEST-000002");
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, std::string("MANIFEST-000002.tmp").size());
  ASSERT_TRUE(RemoveFile(sub + "/000004.log").ok());
  EXPECT_EQ(ListDir(sub)->size(), 2u);

  const Status missing = RemoveFile(sub + "/000004.log");
  EXPECT_TRUE(missing.Is(Code::kNotFound));
  EXPECT_NE(missing.message().find("000004.log"), std::string::npos) << missing.ToString();
  EXPECT_NE(missing.message().find("No such file"), std::string::npos) << missing.ToString();
  EXPECT_TRUE(FileSize(sub + "/nope").status().Is(Code::kNotFound));
  EXPECT_TRUE(NewRandomAccessFile(sub + "/nope").status().Is(Code::kNotFound));
  EXPECT_FALSE(ListDir(sub + "/nope").ok());
  EXPECT_FALSE(SyncDir(sub + "/nope").ok());
  EXPECT_FALSE(RenameFile(sub + "/nope", sub + "/also-nope").ok());
  EXPECT_TRUE(CreateDir(sub + "/000005.sst").Is(Code::kIoError)) << "a file is in the way";
  EXPECT_TRUE(NewWritableFile(sub + "/nope/x").status().Is(Code::kNotFound));
}

// ---- BlockCache

std::shared_ptr<const std::string> Blob(size_t n, char c = 'x') { return std::make_shared<const std::string>(n, c); }

TEST(BlockCacheTest, EvictsLeastRecentlyUsedByCharge) {
  BlockCache cache(1000, /*shard_bits=*/0);  // one shard: exact LRU order
  for (uint64_t i = 0; i < 4; ++i) cache.Insert(1, i * 100, Blob(10), 250);
  EXPECT_EQ(cache.usage(), 1000u);
  ASSERT_NE(cache.Lookup(1, 0), nullptr);  // now the most recent
  cache.Insert(2, 0, Blob(10), 300);       // evicts offsets 100 and 200
  EXPECT_EQ(cache.usage(), 250u * 2 + 300u);
  EXPECT_NE(cache.Lookup(1, 0), nullptr);
  EXPECT_EQ(cache.Lookup(1, 100), nullptr);
  EXPECT_EQ(cache.Lookup(1, 200), nullptr);
  EXPECT_NE(cache.Lookup(1, 300), nullptr);
  EXPECT_NE(cache.Lookup(2, 0), nullptr);
  EXPECT_EQ(cache.hits(), 4u);
  EXPECT_EQ(cache.misses(), 2u);

  cache.Insert(2, 0, Blob(10, 'y'), 100);  // replaces, recharged
  EXPECT_EQ(cache.usage(), 600u);
  EXPECT_EQ(*cache.Lookup(2, 0), std::string(10, 'y'));
  cache.Insert(3, 0, Blob(10), 1001);  // more than the cache: not kept
  EXPECT_EQ(cache.Lookup(3, 0), nullptr);
  EXPECT_EQ(cache.usage(), 600u);

  BlockCache none(0);
  none.Insert(1, 0, Blob(10), 0);
  none.Insert(1, 1, Blob(10), 10);
  EXPECT_EQ(none.Lookup(1, 0), nullptr);
  EXPECT_EQ(none.Lookup(1, 1), nullptr);
  EXPECT_EQ(none.usage(), 0u);
}

TEST(BlockCacheTest, ShardedCacheStaysWithinCapacity) {
  BlockCache cache(64 * 4096);
  EXPECT_EQ(cache.capacity(), 64u * 4096);
  for (uint64_t f = 1; f <= 20; ++f) {
    for (uint64_t off = 0; off < 50 * 4096; off += 4096) cache.Insert(f, off, Blob(16), 4096);
    EXPECT_LE(cache.usage(), cache.capacity());
  }
  EXPECT_GT(cache.usage(), cache.capacity() / 2);
}

TEST(BlockCacheTest, EraseFileDropsOnlyThatFile) {
  BlockCache cache(1 << 20);
  for (uint64_t f = 1; f <= 3; ++f) {
    for (uint64_t off = 0; off < 100; ++off) cache.Insert(f, off * 4096, Blob(8), 100);
  }
  EXPECT_EQ(cache.usage(), 30000u);
  cache.EraseFile(2);
  cache.EraseFile(99);  // none
  EXPECT_EQ(cache.usage(), 20000u);
  for (uint64_t off = 0; off < 100; ++off) {
    EXPECT_NE(cache.Lookup(1, off * 4096), nullptr);
    EXPECT_EQ(cache.Lookup(2, off * 4096), nullptr);
    EXPECT_NE(cache.Lookup(3, off * 4096), nullptr);
  }
  cache.Insert(2, 0, Blob(8), 100);  // the number reused
  EXPECT_NE(cache.Lookup(2, 0), nullptr);
}

TEST(BlockCacheTest, AReaderKeepsAnEvictedBlockAlive) {
  BlockCache cache(100, 0);
  cache.Insert(1, 0, Blob(50, 'a'), 100);
  auto held = cache.Lookup(1, 0);
  ASSERT_NE(held, nullptr);
  std::weak_ptr<const std::string> watch = held;
  cache.Insert(1, 4096, Blob(50, 'b'), 100);  // evicts it
  EXPECT_EQ(cache.Lookup(1, 0), nullptr);
  EXPECT_EQ(*held, std::string(50, 'a'));
  cache.EraseFile(1);
  EXPECT_FALSE(watch.expired());
  held.reset();
  EXPECT_TRUE(watch.expired());
}

TEST(BlockCacheTest, ConcurrentLookupsAndInserts) {
  BlockCache cache(200 * 64);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Random rng(100 + t);
      for (int i = 0; i < 20000; ++i) {
        const uint64_t file = rng.Uniform(4), off = rng.Uniform(100) * 4096;
        // A block's contents are a function of its key, whoever inserted it.
        const std::string want = std::to_string(file) + ":" + std::to_string(off);
        if (auto b = cache.Lookup(file, off)) {
          if (*b != want) ++wrong;
        } else {
          cache.Insert(file, off, std::make_shared<const std::string>(want), 64);
        }
        if (i % 5000 == 4999) cache.EraseFile(rng.Uniform(4));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(cache.usage(), cache.capacity());
  EXPECT_EQ(cache.hits() + cache.misses(), 80000u);
  EXPECT_GT(cache.hits(), 0u);
}

// ---- Table with a cache, and Seek

MemoryFile BuildTable(const std::vector<std::pair<std::string, std::string>>& entries) {
  MemoryFile f;
  TableBuilder b(TableOptions{}, &f);
  for (const auto& [k, v] : entries) EXPECT_TRUE(b.Add(k, v).ok());
  EXPECT_TRUE(b.Finish().ok());
  return f;
}

std::vector<std::pair<std::string, std::string>> SimpleEntries(int n) {
  std::vector<std::pair<std::string, std::string>> e;
  for (int i = 0; i < n; ++i) {
    char k[16];
    std::snprintf(k, sizeof k, "k%06d", i);
    e.emplace_back(InternalKey(k, 1, ValueType::kValue), std::string(100, static_cast<char>('a' + i % 26)));
  }
  return e;
}

TEST(TableCacheTest, SecondGetHitsTheCacheAndEraseFileMisses) {
  MemoryFile f = BuildTable(SimpleEntries(500));
  BlockCache cache(1 << 20);
  TableOptions options;
  options.cache = &cache;
  auto t = Table::Open(&f, options, /*file_number=*/7);
  ASSERT_TRUE(t.ok());
  ASSERT_GT((*t)->data_blocks(), 5u);
  auto first = (*t)->Get("k000123");
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_EQ(cache.hits(), 0u);
  EXPECT_GT(cache.usage(), 0u);
  auto second = (*t)->Get("k000123");
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((*second)->value, (*first)->value);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 1u);

  cache.EraseFile(7);
  EXPECT_EQ(cache.usage(), 0u);
  ASSERT_TRUE((*t)->Get("k000123").ok());
  EXPECT_EQ(cache.misses(), 2u);
  EXPECT_EQ(cache.hits(), 1u);

  // A scan fills the cache; a second one reads nothing from the file.
  ASSERT_TRUE((*t)->ForEach([](std::string_view, std::string_view) {}).ok());
  const uint64_t misses = cache.misses();
  f.contents().assign(f.contents().size(), '\0');  // the file is gone; the cache is not
  int n = 0;
  ASSERT_TRUE((*t)->ForEach([&](std::string_view, std::string_view) { ++n; }).ok());
  EXPECT_EQ(n, 500);
  EXPECT_EQ(cache.misses(), misses);
}

TEST(TableCacheTest, ADamagedBlockIsNeverCached) {
  MemoryFile f = BuildTable(SimpleEntries(500));
  BlockCache cache(1 << 20);
  TableOptions options;
  options.cache = &cache;
  auto t = Table::Open(&f, options, 3);
  ASSERT_TRUE(t.ok());
  f.contents()[10] ^= 0x40;  // in the first data block
  for (int i = 0; i < 2; ++i) {
    auto got = (*t)->Get("k000000");
    EXPECT_TRUE(got.status().Is(Code::kCorruption)) << "read " << i;
  }
  EXPECT_EQ(cache.usage(), 0u);
  EXPECT_EQ(cache.hits(), 0u);
  auto it = (*t)->NewIterator();
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().Is(Code::kCorruption));
  it->Seek(InternalKey("k000000", kMaxSequence, ValueType::kValue));
  EXPECT_TRUE(it->status().Is(Code::kCorruption));
  // Blocks past it are fine, and cached.
  ASSERT_TRUE((*t)->Get("k000400").ok());
  EXPECT_GT(cache.usage(), 0u);
}

TEST(TableSeekTest, AgreesWithASortedModel) {
  Random rng(31);
  // Random user keys, several sequences each (some deletions).
  std::map<std::string, std::string, bool (*)(const std::string&, const std::string&)> model(
      [](const std::string& a, const std::string& b) { return CompareInternalKeys(a, b) < 0; });
  std::vector<std::string> user_keys;
  uint64_t seq = 1;
  while (user_keys.size() < 2000) {
    std::string uk = "u" + std::to_string(rng.Uniform(1000000) * 2);  // odd numbers are absent
    if (std::find(user_keys.begin(), user_keys.end(), uk) != user_keys.end()) continue;
    user_keys.push_back(uk);
    const int versions = 1 + static_cast<int>(rng.Uniform(4));
    for (int v = 0; v < versions; ++v) {
      seq += 1 + rng.Uniform(3);
      const bool del = rng.Bernoulli(0.2);
      model.emplace(InternalKey(uk, seq, del ? ValueType::kDeletion : ValueType::kValue),
                    del ? "" : Bytes(&rng, rng.Uniform(200)));
    }
  }
  MemoryFile f = BuildTable({model.begin(), model.end()});
  BlockCache cache(1 << 16);  // smaller than the table: misses and hits
  TableOptions options;
  options.cache = &cache;
  auto t = Table::Open(&f, options, 1);
  ASSERT_TRUE(t.ok());
  ASSERT_GT((*t)->data_blocks(), 50u);
  auto it = (*t)->NewIterator();

  auto check = [&](const std::string& target, const char* what) {
    it->Seek(target);
    ASSERT_TRUE(it->status().ok()) << it->status().ToString();
    auto want = model.lower_bound(target);
    // The target and the next few entries, across block boundaries.
    for (int step = 0; step < 3; ++step, ++want) {
      if (want == model.end()) {
        ASSERT_FALSE(it->Valid()) << what;
        return;
      }
      ASSERT_TRUE(it->Valid()) << what;
      ASSERT_EQ(it->key(), want->first) << what;
      ASSERT_EQ(it->value(), want->second) << what;
      it->Next();
    }
  };
  const auto& first = model.begin()->first;
  const auto& last = model.rbegin()->first;
  check(InternalKey("a", 5, ValueType::kValue), "before the first user key");
  check(InternalKey("u", kMaxSequence, ValueType::kValue), "before the first entry");
  check(first, "the first entry");
  check(last, "the last entry");
  check(InternalKey("v", 1, ValueType::kValue), "after the last");
  check(InternalKey(ParseInternalKey(last)->user_key, 0, ValueType::kDeletion), "after the last entry, same user key");
  std::vector<std::string> keys;
  for (const auto& [k, v] : model) keys.push_back(k);
  for (int i = 0; i < 3000; ++i) {
    const std::string& uk = user_keys[rng.Uniform(user_keys.size())];
    switch (rng.Uniform(4)) {
      case 0:  // exact
        check(keys[rng.Uniform(keys.size())], "exact");
        break;
      case 1:  // a user key at a random snapshot: between its versions
        check(InternalKey(uk, rng.Uniform(seq + 2), ValueType::kValue), "at a snapshot");
        break;
      case 2:  // the newest of a user key
        check(InternalKey(uk, kMaxSequence, ValueType::kValue), "newest");
        break;
      default:  // between user keys (absent odd numbers)
        check(InternalKey("u" + std::to_string(rng.Uniform(1000000) * 2 + 1), kMaxSequence, ValueType::kValue),
              "between user keys");
    }
  }
  // Seeking to the iterator's own key: it copies the target first.
  it->Seek(keys[keys.size() / 2]);
  ASSERT_TRUE(it->Valid());
  it->Seek(it->key());
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key(), keys[keys.size() / 2]);
  it->Seek("short");
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().Is(Code::kInvalidArgument));
  EXPECT_GT(cache.hits(), 0u);
  EXPECT_GT(cache.misses(), 0u);
}

}  // namespace
}  // namespace slip::lsm
