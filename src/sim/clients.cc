// Clients and the history: closed-loop client operations, the record of
// every operation (and every attempt with an unknown outcome), and the
// version-order check.
#include "sim/world.h"

namespace slip::sim::detail {

void World::Record(uint32_t c, const client::OpRecord& r) {
  Operation op;
  using K = client::OpRecord::Kind;
  switch (r.kind) {
    case K::kPut: op.kind = Operation::Kind::kPut; break;
    case K::kGet: op.kind = Operation::Kind::kGet; break;
    case K::kDel: op.kind = Operation::Kind::kDel; break;
    case K::kPutIfAbsent: op.kind = Operation::Kind::kPutIfAbsent; break;
    case K::kPutIfPresent: op.kind = Operation::Kind::kPutIfPresent; break;
  }
  op.key = r.key;
  op.value = r.value;
  // DEL: it deleted a value; PUT_IF: it wrote.
  op.found = r.kind != K::kPut && r.kind != K::kGet && r.result == Code::kOk;
  op.unknown = r.unknown;
  op.invoke = r.invoke;
  op.ret = r.ret;
  op.client = c;
  unknown_ += r.unknown;
  history_.push_back(std::move(op));
  if (r.version != 0) writes_.push_back({ShardOfHash(HashKey(r.key), o_.shards), r.invoke, r.ret, r.version});
}

// I4: within a shard, a write acknowledged before another write was invoked
// has the smaller version — across failovers and cold starts.
std::string World::CheckVersionsMonotonic() const {
  std::vector<const AckedWrite*> by_ret, by_invoke;
  for (const auto& w : writes_) {
    by_ret.push_back(&w);
    by_invoke.push_back(&w);
  }
  std::sort(by_ret.begin(), by_ret.end(), [](auto* a, auto* b) { return a->ret < b->ret; });
  std::sort(by_invoke.begin(), by_invoke.end(), [](auto* a, auto* b) { return a->invoke < b->invoke; });
  std::vector<uint64_t> max_done(o_.shards, 0);
  size_t i = 0;
  for (const AckedWrite* w : by_invoke) {
    for (; i < by_ret.size() && by_ret[i]->ret < w->invoke; ++i) {
      max_done[by_ret[i]->shard] = std::max(max_done[by_ret[i]->shard], by_ret[i]->version);
    }
    if (w->version <= max_done[w->shard]) {
      return "shard " + std::to_string(w->shard) + ": a write invoked at " + std::to_string(w->invoke) +
             " got version " + std::to_string(w->version) + ", not above " +
             std::to_string(max_done[w->shard]) + " acknowledged before it";
    }
  }
  return "";
}

void World::ClientLoop(uint32_t c) {
  Client& cl = clients_[c];
  if (cl.done >= o_.ops_per_client) return;
  ++cl.done;
  Random& rng = cl.exec->Rng();
  // The last client only polls one key: it talks to one primary only, so it
  // learns of a new term only from that node, like a client watching a key.
  // It is the one that would see a stale value if a cut-off old primary kept
  // serving after its replacement took writes.
  const bool reader = o_.clients >= 2 && c == o_.clients - 1;
  std::string key = "k" + std::to_string(reader ? 0 : rng.Uniform(o_.keys));
  const uint64_t dice = reader ? 9 : rng.Uniform(10);
  auto next = [this, c] {
    clients_[c].exec->After(static_cast<Nanos>(clients_[c].exec->Rng().Uniform(200)) * kMicrosecond,
                            [this, c] { ClientLoop(c); });
  };
  // Conditional PUTs (SET NX / XX) where the primaries see every write
  // (the erda family's clients write one-sidedly: refused there).
  const bool conditional = dice < 4 && o_.conditional_puts && !Clients().any() && rng.Uniform(4) == 0;
  if (dice < 4) {
    std::string value = "c" + std::to_string(c) + "v" + std::to_string(cl.next_value++);
    if (conditional) {
      const auto cond = rng.Uniform(2) == 0 ? proto::PutCondition::kIfAbsent : proto::PutCondition::kIfPresent;
      cl.core->PutIf(std::move(key), std::move(value), cond, [next](Result<uint64_t>) { next(); });
    } else {
      cl.core->Put(std::move(key), std::move(value), [next](Result<uint64_t>) { next(); });
    }
  } else if (dice < 5) {
    cl.core->Delete(std::move(key), [next](Status) { next(); });
  } else {
    cl.core->Get(std::move(key), [next](Result<std::string>) { next(); });
  }
}

}  // namespace slip::sim::detail
