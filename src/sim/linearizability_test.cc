#include "sim/linearizability.h"

#include <gtest/gtest.h>

#include "common/random.h"

namespace slip::sim {
namespace {

using K = Operation::Kind;

Operation Put(std::string key, std::string v, int64_t inv, int64_t ret, bool unknown = false) {
  Operation o;
  o.kind = K::kPut;
  o.key = std::move(key);
  o.value = std::move(v);
  o.invoke = inv;
  o.ret = ret;
  o.unknown = unknown;
  return o;
}
Operation Get(std::string key, std::optional<std::string> v, int64_t inv, int64_t ret) {
  Operation o;
  o.kind = K::kGet;
  o.key = std::move(key);
  o.value = std::move(v);
  o.invoke = inv;
  o.ret = ret;
  return o;
}
Operation Del(std::string key, bool found, int64_t inv, int64_t ret, bool unknown = false) {
  Operation o;
  o.kind = K::kDel;
  o.key = std::move(key);
  o.found = found;
  o.invoke = inv;
  o.ret = ret;
  o.unknown = unknown;
  return o;
}

Operation PutIf(K kind, std::string key, std::string v, bool written, int64_t inv, int64_t ret, bool unknown = false) {
  Operation o = Put(std::move(key), std::move(v), inv, ret, unknown);
  o.kind = kind;
  o.found = written;
  return o;
}

TEST(LinearizabilityTest, ConditionalPuts) {
  // SET NX on an absent key writes; on a present one it does not.
  EXPECT_TRUE(CheckLinearizable({PutIf(K::kPutIfAbsent, "k", "a", true, 0, 1), PutIf(K::kPutIfAbsent, "k", "b", false, 2, 3),
                                 Get("k", "a", 4, 5), PutIf(K::kPutIfPresent, "k", "c", true, 6, 7), Get("k", "c", 8, 9)})
                  .linearizable);
  // Two NX on an absent key, one after the other, cannot both write.
  EXPECT_FALSE(CheckLinearizable({PutIf(K::kPutIfAbsent, "k", "a", true, 0, 1), PutIf(K::kPutIfAbsent, "k", "b", true, 2, 3)})
                   .linearizable);
  // XX on a key that never had a value cannot write.
  EXPECT_FALSE(CheckLinearizable({PutIf(K::kPutIfPresent, "k", "a", true, 0, 1)}).linearizable);
  // A conditional write that said "not written" left the register alone.
  EXPECT_FALSE(CheckLinearizable({Put("k", "a", 0, 1), PutIf(K::kPutIfPresent, "k", "b", false, 2, 3)}).linearizable);
  // The anomaly a primary must prevent: a PUT acknowledged, then a
  // concurrent NX that claimed absent and wrote, then the NX's value read.
  EXPECT_FALSE(CheckLinearizable({Put("k", "a", 0, 10), PutIf(K::kPutIfAbsent, "k", "b", true, 1, 5),
                                  Get("k", "b", 11, 12)})
                   .linearizable);
  // Unknown: it wrote if its condition held where it took effect.
  EXPECT_TRUE(CheckLinearizable({PutIf(K::kPutIfAbsent, "k", "a", false, 0, 0, /*unknown=*/true), Get("k", "a", 5, 6)})
                  .linearizable);
  EXPECT_FALSE(CheckLinearizable({Put("k", "x", 0, 1), PutIf(K::kPutIfAbsent, "k", "a", false, 2, 0, /*unknown=*/true),
                                  Get("k", "a", 5, 6)})
                   .linearizable);
}

TEST(LinearizabilityTest, SequentialHistories) {
  EXPECT_TRUE(CheckLinearizable({Put("k", "a", 0, 1), Get("k", "a", 2, 3), Del("k", true, 4, 5),
                                 Get("k", std::nullopt, 6, 7), Del("k", false, 8, 9)})
                  .linearizable);
  // A read of a value never written, a stale read, a resurrected delete.
  EXPECT_FALSE(CheckLinearizable({Get("k", "x", 0, 1)}).linearizable);
  EXPECT_FALSE(CheckLinearizable({Put("k", "a", 0, 1), Put("k", "b", 2, 3), Get("k", "a", 4, 5)})
                   .linearizable);
  auto r = CheckLinearizable({Put("k", "a", 0, 1), Del("k", true, 2, 3), Get("k", "a", 4, 5)});
  EXPECT_FALSE(r.linearizable);
  EXPECT_NE(r.violation.find("key k"), std::string::npos) << r.violation;
}

TEST(LinearizabilityTest, ConcurrencyAllowsEitherOrder) {
  // Two overlapping puts; reads after both may see either, but consistently.
  EXPECT_TRUE(CheckLinearizable({Put("k", "a", 0, 10), Put("k", "b", 1, 9), Get("k", "a", 11, 12),
                                 Get("k", "a", 13, 14)})
                  .linearizable);
  EXPECT_FALSE(CheckLinearizable({Put("k", "a", 0, 10), Put("k", "b", 1, 9), Get("k", "a", 11, 12),
                                  Get("k", "b", 13, 14)})
                   .linearizable);
  // A read overlapping a put sees old or new.
  EXPECT_TRUE(CheckLinearizable({Put("k", "a", 0, 1), Put("k", "b", 2, 10), Get("k", "a", 3, 4),
                                 Get("k", "b", 5, 6)})
                  .linearizable);
  // ...but not new then old.
  EXPECT_FALSE(CheckLinearizable({Put("k", "a", 0, 1), Put("k", "b", 2, 10), Get("k", "b", 3, 4),
                                  Get("k", "a", 5, 6)})
                   .linearizable);
}

TEST(LinearizabilityTest, UnknownOutcomesMayApplyLateOrNever) {
  // A timed-out put can show up long after its client gave up...
  EXPECT_TRUE(CheckLinearizable({Put("k", "a", 0, 1), Put("k", "b", 2, 0, /*unknown=*/true),
                                 Get("k", "a", 10, 11), Get("k", "b", 20, 21)})
                  .linearizable);
  // ...or never.
  EXPECT_TRUE(CheckLinearizable({Put("k", "a", 0, 1), Put("k", "b", 2, 0, true), Get("k", "a", 10, 11)})
                  .linearizable);
  // But not before it was invoked.
  EXPECT_FALSE(CheckLinearizable({Get("k", "b", 0, 1), Put("k", "b", 2, 0, true)}).linearizable);
  // And an acknowledged write is never lost: a later read must see it (or newer).
  EXPECT_FALSE(CheckLinearizable({Put("k", "a", 0, 1), Put("k", "b", 2, 3), Get("k", std::nullopt, 4, 5)})
                   .linearizable);
}

TEST(LinearizabilityTest, KeysAreIndependentAndCountsAdd) {
  auto r = CheckLinearizable({Put("a", "1", 0, 1), Put("b", "2", 0, 1), Get("a", "1", 2, 3),
                              Get("b", "2", 2, 3)});
  EXPECT_TRUE(r.linearizable);
  EXPECT_EQ(r.keys, 2u);
  EXPECT_EQ(r.operations, 4u);
}

// A random concurrent history generated from a real linearizable register
// (each op takes effect at a random instant inside its interval) always
// passes; corrupting one read's value makes it fail.
TEST(LinearizabilityTest, RandomRegisterHistoriesPassAndCorruptedOnesFail) {
  Random rng(12);
  int caught = 0;
  for (int round = 0; round < 200; ++round) {
    struct Pending {
      Operation op;
      int64_t effect;
    };
    std::vector<Pending> ps;
    for (int c = 0; c < 4; ++c) {
      int64_t t = static_cast<int64_t>(rng.Uniform(5));
      for (int i = 0; i < 6; ++i) {
        Operation op;
        op.key = "k";
        op.client = static_cast<uint32_t>(c);
        op.invoke = t * 4 + c;  // distinct times
        const int64_t len = 1 + static_cast<int64_t>(rng.Uniform(30));
        op.ret = op.invoke + len * 4;
        const uint64_t kind = rng.Uniform(3);
        op.kind = kind == 0 ? K::kPut : kind == 1 ? K::kGet : K::kDel;
        if (op.kind == K::kPut) op.value = "v" + std::to_string(round) + "_" + std::to_string(c) + "_" + std::to_string(i);
        ps.push_back({op, op.invoke + 1 + static_cast<int64_t>(rng.Uniform(static_cast<uint64_t>(len * 4 - 1)))});
        t = (op.ret / 4) + 1 + static_cast<int64_t>(rng.Uniform(3));
      }
    }
    std::sort(ps.begin(), ps.end(), [](const Pending& a, const Pending& b) { return a.effect < b.effect; });
    std::optional<std::string> reg;
    std::vector<Operation> h;
    for (auto& p : ps) {
      if (p.op.kind == K::kPut) reg = p.op.value;
      if (p.op.kind == K::kGet) p.op.value = reg;
      if (p.op.kind == K::kDel) {
        p.op.found = reg.has_value();
        reg.reset();
      }
      h.push_back(p.op);
    }
    auto ok = CheckLinearizable(h);
    ASSERT_TRUE(ok.linearizable) << ok.violation;
    ASSERT_EQ(ok.unchecked_keys, 0u);
    for (auto& op : h) {
      if (op.kind == K::kGet) {
        op.value = "never-written";
        break;
      }
    }
    caught += !CheckLinearizable(h).linearizable;
  }
  EXPECT_EQ(caught, 200);
}

TEST(LinearizabilityTest, BudgetExhaustionIsNoVerdictNotAViolation) {
  std::vector<Operation> h;
  for (int i = 0; i < 40; ++i) h.push_back(Put("k", "v" + std::to_string(i), 0, 1000));
  h.push_back(Get("k", "nope", 2000, 2001));
  auto r = CheckLinearizable(h, /*state_budget_per_key=*/1000);
  EXPECT_TRUE(r.linearizable);
  EXPECT_EQ(r.unchecked_keys, 1u);
}

}  // namespace
}  // namespace slip::sim
