#include "log/segment_table.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "common/random.h"

namespace slip::log {
namespace {

std::unique_ptr<pm::PmRegion> MakeRegion(size_t size, bool crash_model = false) {
  pm::RegionOptions o;
  o.crash_model = crash_model;
  return std::move(pm::PmRegion::Anonymous(size, o)).value();
}

Geometry Small() {
  Geometry g;
  g.segment_size = 16 << 10;
  g.num_shards = 4;
  return g;
}

TEST(SegmentMetaTest, PackRoundTripsEveryField) {
  for (auto st : {SegmentState::kFree, SegmentState::kUsing, SegmentState::kUsed,
                  SegmentState::kCommitted}) {
    for (auto ow : {SegmentOwner::kNone, SegmentOwner::kWorker, SegmentOwner::kControl,
                    SegmentOwner::kClean}) {
      for (uint64_t seq : {uint64_t{0}, uint64_t{1}, (uint64_t{1} << 48) - 1}) {
        SegmentMeta m{st, ow, seq};
        SegmentMeta u = SegmentMeta::Unpack(m.Pack());
        EXPECT_EQ(u.state, st);
        EXPECT_EQ(u.owner, ow);
        EXPECT_EQ(u.seq, seq);
      }
    }
  }
  // A fresh (zero) word is Free.
  EXPECT_EQ(SegmentMeta::Unpack(0).state, SegmentState::kFree);
}

TEST(SegmentTableTest, FormatThenOpenKeepsGeometryAndStates) {
  auto region = MakeRegion(1 << 20);
  EXPECT_TRUE(SegmentTable::IsBlank(*region));
  auto t = std::move(SegmentTable::Format(region.get(), Small())).value();
  EXPECT_FALSE(SegmentTable::IsBlank(*region));
  EXPECT_GT(t->num_segments(), 40u);
  EXPECT_EQ(t->free_count(), t->num_segments());
  uint32_t a = t->Allocate(SegmentOwner::kWorker).value();
  uint32_t b = t->Allocate(SegmentOwner::kClean).value();
  EXPECT_EQ(a, 0u);  // address order
  EXPECT_EQ(b, 1u);
  ASSERT_TRUE(t->Transition(a, SegmentState::kUsed).ok());
  ASSERT_TRUE(t->Transition(b, SegmentState::kCommitted).ok());
  const uint64_t seq_a = t->meta(a).seq, seq_b = t->meta(b).seq;
  EXPECT_LT(seq_a, seq_b);
  const uint32_t n = t->num_segments();
  t.reset();

  auto r = std::move(SegmentTable::Open(region.get())).value();
  EXPECT_EQ(r->num_segments(), n);
  EXPECT_EQ(r->segment_size(), Small().segment_size);
  EXPECT_EQ(r->geometry().num_shards, 4u);
  EXPECT_EQ(r->meta(a).state, SegmentState::kUsed);
  EXPECT_EQ(r->meta(a).owner, SegmentOwner::kWorker);
  EXPECT_EQ(r->meta(b).state, SegmentState::kCommitted);
  EXPECT_EQ(r->meta(b).owner, SegmentOwner::kClean);
  EXPECT_EQ(r->free_count(), n - 2);
  // seq keeps increasing across the restart.
  uint32_t c = r->Allocate(SegmentOwner::kWorker).value();
  EXPECT_GT(r->meta(c).seq, seq_b);
}

TEST(SegmentTableTest, OnlyLegalTransitionsHappen) {
  auto region = MakeRegion(1 << 20);
  auto t = std::move(SegmentTable::Format(region.get(), Small())).value();
  using S = SegmentState;
  // From each state, try every target; the legal set is fixed by the design.
  const std::set<std::pair<S, S>> legal = {{S::kUsing, S::kUsed},
                                           {S::kUsing, S::kCommitted},
                                           {S::kUsed, S::kCommitted}};
  auto make = [&](S state) {
    uint32_t id = t->Allocate(SegmentOwner::kWorker).value();
    if (state != S::kUsing) {
      EXPECT_TRUE(t->Transition(id, state).ok());
    }
    return id;
  };
  for (S from : {S::kUsing, S::kUsed, S::kCommitted}) {
    for (S to : {S::kFree, S::kUsing, S::kUsed, S::kCommitted}) {
      uint32_t id = make(from);
      Status s = t->Transition(id, to);
      if (legal.count({from, to})) {
        EXPECT_TRUE(s.ok()) << SegmentStateName(from) << "->" << SegmentStateName(to);
        EXPECT_EQ(t->meta(id).state, to);
      } else {
        EXPECT_TRUE(s.Is(Code::kInvalidArgument))
            << SegmentStateName(from) << "->" << SegmentStateName(to) << ": " << s.ToString();
        EXPECT_EQ(t->meta(id).state, from) << "a refused transition changed the state";
      }
    }
  }
  // Free only from Committed; a Free segment cannot transition at all.
  uint32_t using_id = make(S::kUsing);
  EXPECT_TRUE(t->Free(using_id).Is(Code::kInvalidArgument));
  EXPECT_TRUE(t->Transition(t->num_segments() - 1, S::kUsed).Is(Code::kInvalidArgument));
  EXPECT_TRUE(t->Free(t->num_segments()).Is(Code::kInvalidArgument));  // no such segment
}

TEST(SegmentTableTest, FreeZeroesTheSegmentAndReturnsItToThePool) {
  auto region = MakeRegion(1 << 20);
  auto t = std::move(SegmentTable::Format(region.get(), Small())).value();
  uint32_t id = t->Allocate(SegmentOwner::kWorker).value();
  std::memset(t->SegmentBase(id), 0xab, t->segment_size());
  ASSERT_TRUE(t->Transition(id, SegmentState::kCommitted).ok());
  const uint32_t free_before = t->free_count();
  ASSERT_TRUE(t->Free(id).ok());
  EXPECT_EQ(t->free_count(), free_before + 1);
  const std::byte* p = t->SegmentBase(id);
  for (uint64_t i = 0; i < t->segment_size(); ++i) ASSERT_EQ(p[i], std::byte{0}) << "byte " << i;
  EXPECT_EQ(t->Allocate(SegmentOwner::kWorker).value(), id) << "lowest free id first";
}

TEST(SegmentTableTest, AllocateRespectsTheReserveAndReportsNoSpace) {
  auto region = MakeRegion(256 << 10);
  auto t = std::move(SegmentTable::Format(region.get(), Small())).value();
  const uint32_t n = t->num_segments();
  for (uint32_t i = 0; i + 2 < n; ++i) ASSERT_TRUE(t->Allocate(SegmentOwner::kWorker, 2).ok());
  auto refused = t->Allocate(SegmentOwner::kWorker, 2);
  EXPECT_TRUE(refused.status().Is(Code::kNoSpace)) << refused.status().ToString();
  EXPECT_TRUE(t->Allocate(SegmentOwner::kClean, 0).ok());
  EXPECT_TRUE(t->Allocate(SegmentOwner::kClean, 0).ok());
  EXPECT_TRUE(t->Allocate(SegmentOwner::kClean, 0).status().Is(Code::kNoSpace));
}

TEST(SegmentTableTest, DamagedSuperblockIsRefused) {
  auto region = MakeRegion(1 << 20);
  ASSERT_TRUE(SegmentTable::Format(region.get(), Small()).ok());
  Random rng(7);
  for (int i = 0; i < 64; ++i) {
    const uint64_t off = rng.Uniform(48);  // every superblock field, its CRC included
    const auto bit = std::byte{static_cast<unsigned char>(1u << rng.Uniform(8))};
    region->at(off)[0] ^= bit;
    auto r = SegmentTable::Open(region.get());
    EXPECT_FALSE(r.ok()) << "flip at byte " << off << " went unnoticed";
    region->at(off)[0] ^= bit;
  }
  EXPECT_TRUE(SegmentTable::Open(region.get()).ok());
}

// Crash at every persist of a segment's life: the table still opens, the
// meta word is one of the states the segment passed through, and a segment
// that reads Free is all zero (Free persists the state last).
TEST(SegmentTableTest, CrashAtAnyPersistLeavesAConsistentTable) {
  for (uint64_t budget = 0; budget < 12; ++budget) {
    auto region = MakeRegion(256 << 10, /*crash_model=*/true);
    auto t = std::move(SegmentTable::Format(region.get(), Small())).value();
    region->FreezePersistenceAfter(budget);
    uint32_t id = t->Allocate(SegmentOwner::kWorker).value();
    std::memset(t->SegmentBase(id), 0x5a, 256);
    region->Persist(t->SegmentBase(id), 256);
    ASSERT_TRUE(t->Transition(id, SegmentState::kCommitted).ok());
    ASSERT_TRUE(t->Free(id).ok());
    region->SimulateCrash(budget);
    t.reset();
    auto r = SegmentTable::Open(region.get());
    ASSERT_TRUE(r.ok()) << "budget " << budget << ": " << r.status().ToString();
    const SegmentMeta m = (*r)->meta(id);
    const std::byte* first = (*r)->SegmentBase(id);
    switch (m.state) {
      case SegmentState::kFree:
        for (uint64_t i = 0; i < (*r)->segment_size(); ++i) {
          ASSERT_EQ(first[i], std::byte{0}) << "budget " << budget << ": Free but byte " << i;
        }
        break;
      case SegmentState::kUsing:
      case SegmentState::kCommitted:
        break;  // either contents are intact or Free() had begun (hidden)
      default:
        ADD_FAILURE() << "budget " << budget << ": state " << SegmentStateName(m.state)
                      << " was never written";
    }
  }
}

}  // namespace
}  // namespace slip::log
