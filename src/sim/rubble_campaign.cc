// See sim/rubble_campaign.h.
#include "sim/rubble_campaign.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "cluster/config_store.h"
#include "cluster/manager.h"
#include "common/hash.h"
#include "common/log.h"
#include "lsm/testing/temp_dir.h"
#include "proto/kv.h"
#include "rpc/local_network.h"
#include "runtime/sim_runtime.h"
#include "server/rubble_server.h"
#include "sim/linearizability.h"

namespace slip::sim {
namespace {

namespace fs = std::filesystem;
using runtime::kMicrosecond;
using runtime::kMillisecond;
using runtime::Nanos;

constexpr Nanos kLease = 50 * kMillisecond;

// An executor of one node process: once the process is gone nothing of it
// runs again — timers, posted tasks, pollers, answers to its calls.
class ProcessExecutor final : public runtime::Executor {
 public:
  explicit ProcessExecutor(runtime::Executor* inner) : inner_(inner) {}
  void Kill() { *alive_ = false; }
  bool alive() const { return *alive_; }

  std::string_view name() const override { return inner_->name(); }
  uint32_t id() const override { return inner_->id(); }
  Nanos Now() const override { return inner_->Now(); }
  runtime::TimerId After(Nanos delay, std::function<void()> fn) override {
    return inner_->After(delay, Guard(std::move(fn)));
  }
  bool Cancel(runtime::TimerId id) override { return inner_->Cancel(id); }
  void Post(std::function<void()> fn) override { inner_->Post(Guard(std::move(fn))); }
  runtime::PollerId AddPoller(std::function<bool()> poll) override {
    return inner_->AddPoller([alive = alive_, poll = std::move(poll)] { return *alive && poll(); });
  }
  void RemovePoller(runtime::PollerId id) override { inner_->RemovePoller(id); }
  void Wake() override { inner_->Wake(); }
  void AddWaitFd(int fd, std::function<bool()> can_block, bool sees_all) override {
    inner_->AddWaitFd(fd, std::move(can_block), sees_all);
  }
  Random& Rng() override { return inner_->Rng(); }
  Nanos CpuTime() const override { return inner_->CpuTime(); }
  bool IsCurrent() const override { return inner_->IsCurrent(); }

 private:
  std::function<void()> Guard(std::function<void()> fn) {
    return [alive = alive_, fn = std::move(fn)] {
      if (*alive) fn();
    };
  }
  runtime::Executor* const inner_;
  const std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// Calls leave after a seeded delay: two calls to one node may arrive in
// either order, as two requests on a real network may be served.
class JitteredCaller final : public rpc::PeerCaller {
 public:
  JitteredCaller(std::unique_ptr<rpc::PeerCaller> inner, runtime::Executor* exec)
      : inner_(std::move(inner)), exec_(exec) {}
  void Call(rpc::Target to, uint16_t method, std::string payload,
            std::function<void(Result<rpc::PeerResponse>)> done) override {
    const Nanos delay = static_cast<Nanos>(exec_->Rng().Uniform(30)) * kMicrosecond;
    exec_->After(delay, [inner = inner_, node = to, method, payload = std::move(payload), done = std::move(done)]() mutable {
      inner->Call(node, method, std::move(payload), std::move(done));
    });
  }

 private:
  const std::shared_ptr<rpc::PeerCaller> inner_;
  runtime::Executor* const exec_;
};


// Who is up, who replicates what (for a failure's message).
std::string Describe(const cluster::ClusterConfig& c) {
  std::string d = "term " + std::to_string(c.term) + ":";
  for (const auto& [id, n] : c.nodes) {
    d += " node " + std::to_string(id) + (n.state == cluster::NodeState::kUp ? " up;" : " not up;");
  }
  for (size_t s = 0; s < c.shards.size(); ++s) {
    d += " shard " + std::to_string(s) + " [";
    for (uint32_t n : server::RubbleServer::ChainOf(c, static_cast<cluster::ShardId>(s))) d += " " + std::to_string(n);
    d += " ] syncing " + std::to_string(c.shards[s].syncing.size()) + ";";
  }
  return d;
}

}  // namespace

RubbleCampaignResult RunRubbleCampaign(const RubbleCampaignOptions& o) {
  const uint64_t seed = o.seed;
  const std::string base =
      !o.base_dir.empty() ? o.base_dir : fs::is_directory("/dev/shm") ? "/dev/shm" : fs::temp_directory_path().string();
  runtime::SimRuntime rt(runtime::SimRuntimeOptions{.seed = seed});
  lsm::testing::TempDir dir(base);
  if (!dir.ok()) return RubbleCampaignResult{false, "no temporary directory under " + base};
  const bool all_compact = o.design.empty() ? seed % 3 == 0 : o.design == "rubble-all-compact";
  const bool few_slots = seed % 5 == 2;
  auto store = cluster::OpenMemoryStore(cluster::NewMemoryStoreState());
  {
    auto placed = cluster::Place({{0, "n0"}, {1, "n1"}, {2, "n2"}}, 4, 3);
    if (!placed.ok()) return RubbleCampaignResult{false, placed.status().ToString()};
    placed->design = all_compact ? "rubble-all-compact" : "rubble";
    // As the nodes' first boots leave it: every follower to be seeded.
    for (uint32_t n = 0; n < 3; ++n) placed = cluster::Resync(*placed, n);
    if (!placed.ok() || !store->CompareAndSwap(cluster::kNoVersion, *placed).ok()) {
      return RubbleCampaignResult{false, "first configuration"};
    }
  }
  runtime::Executor* cm = rt.CreateExecutor("cm");
  cluster::Manager manager(store.get(), cm,
                           cluster::ManagerOptions{.lease = kLease, .holder = "cm", .clock = [&rt] { return rt.Now(); }});
  cm->Post([&] { manager.Start(nullptr, nullptr); });

  RubbleCampaignResult out;
  rpc::LocalNetwork net;
  // One node process at a time per id; a dead one's objects are gone.
  struct Process {
    std::unique_ptr<ProcessExecutor> exec, jobs;
    std::unique_ptr<rpc::PeerCaller> calls;
    std::unique_ptr<server::RubbleServer> server;
    cluster::Lease lease;
    Nanos expiry = 0;
    bool cut_off = false;  // no renewals, no configurations: a zombie until it stops
    uint64_t seen = 0;     // store version adopted
  };
  std::map<uint32_t, std::unique_ptr<Process>> procs;
  std::vector<std::unique_ptr<ProcessExecutor>> gone;
  std::map<uint32_t, runtime::Executor*> node_exec, node_jobs;
  for (uint32_t id = 0; id < 3; ++id) {
    node_exec[id] = rt.CreateExecutor("node" + std::to_string(id));
    node_jobs[id] = rt.CreateExecutor("node" + std::to_string(id) + "/jobs");
  }
  auto data_dir = [&](uint32_t id) { return dir.path() + "/node-" + std::to_string(id); };
  Random& dice = rt.CreateExecutor("dice")->Rng();
  std::function<void(uint32_t)> restart_later;

  // The process ends: nothing of it runs again; its files stay.
  auto stop = [&](uint32_t id) {
    auto it = procs.find(id);
    if (it == procs.end()) return;
    std::unique_ptr<Process> p = std::move(it->second);
    const server::RubbleServer::Cpu cpu = p->server->cpu();
    out.flushes_ns += cpu.flush_ns;
    out.compactions_ns += cpu.compaction_ns;
    procs.erase(it);
    p->exec->Kill();
    p->jobs->Kill();
    net.Detach(id);
    p->server.reset();
    // Answers to its calls still find their executor (and drop them).
    gone.push_back(std::move(p->exec));
    gone.push_back(std::move(p->jobs));
    ++out.kills;
    logging::Info("sim t={}us: node {} stopped", rt.Now() / kMicrosecond, id);
  };

  // `slip server --node id`: as RubbleNode::Boot — replaced while away, it
  // comes back empty (Rejoin); else with its data (Resync: its followers
  // and the followers of what it heads are seeded again).
  auto start = [&](uint32_t id) -> Status {
    auto vc = store->Load();
    if (!vc.ok()) return vc.status();
    bool sole_copy = false;
    for (const auto& s : vc->config.shards) sole_copy |= s.primary == id;
    const bool replaced = vc->config.nodes.at(id).state == cluster::NodeState::kDown && !sole_copy;
    std::error_code ec;
    if (replaced) fs::remove_all(data_dir(id), ec);
    fs::create_directories(data_dir(id), ec);
    for (;;) {
      auto now = store->Load();
      const auto& c = now->config;
      bool sole_copy_now = false;
      for (const auto& s : c.shards) sole_copy_now |= s.primary == id;
      const bool down = c.nodes.at(id).state == cluster::NodeState::kDown;
      Result<cluster::ClusterConfig> next = c;
      if (down && !sole_copy_now) {
        // Declared failed while it started: start over empty.
        fs::remove_all(data_dir(id), ec);
        fs::create_directories(data_dir(id), ec);
        next = cluster::Rejoin(c, id);
      } else {
        if (down) next = cluster::ReturnWithData(c, id);
        if (next.ok()) next = cluster::Resync(*next, id);
      }
      if (!next.ok()) return next.status();
      if (store->CompareAndSwap(now->version, *next).ok()) break;
    }
    auto p = std::make_unique<Process>();
    Process* raw = p.get();
    p->exec = std::make_unique<ProcessExecutor>(node_exec[id]);
    p->jobs = std::make_unique<ProcessExecutor>(node_jobs[id]);
    p->calls = std::make_unique<JitteredCaller>(net.CallerFor(p->exec.get(), 20 * kMillisecond), p->exec.get());
    auto l = store->AcquireLease(cluster::NodeLeaseName(id), "node" + std::to_string(id), kLease, rt.Now());
    if (!l.ok()) return l.status();
    p->lease = *l;
    p->expiry = l->expiry;
    server::RubbleServerEnv env;
    env.self = id;
    env.exec = p->exec.get();
    env.calls = p->calls.get();
    env.dir = data_dir(id);
    env.set_peers = [](const cluster::ClusterConfig&) {};
    env.mark_synced = [&store, &out](cluster::ShardId shard, uint32_t node) {
      for (;;) {
        auto now = store->Load();
        const auto& sync = now->config.shards.at(shard).syncing;
        if (std::find(sync.begin(), sync.end(), node) == sync.end()) return;  // synced, or gone meanwhile
        auto next = cluster::MarkSynced(now->config, shard, node);
        if (!next.ok()) return;
        if (store->CompareAndSwap(now->version, *next).ok()) {
          ++out.seeded;
          return;
        }
      }
    };
    env.lease_left = [raw, &rt] { return raw->expiry - rt.Now(); };
    env.fatal = [&out, id, raw](Status s) {
      // A zombie's engine may stop on its fencing; that is its business.
      if (!raw->cut_off && out.failure.empty()) out.failure = "node " + std::to_string(id) + " fatal: " + s.ToString();
    };
    env.shape = server::TinyRubbleShape(few_slots ? 16 : 128);  // 16: heads wait for free slots now and then
    env.all_compact = all_compact;
    env.jobs = p->jobs.get();
    p->server = std::make_unique<server::RubbleServer>(std::move(env));
    net.Attach(id, p->exec.get(), [raw](uint16_t m, std::span<const std::byte> payload, rpc::LocalNetwork::Reply reply) {
      if (raw->server) raw->server->Handle(m, payload, std::move(reply));
    });
    procs[id] = std::move(p);
    logging::Info("sim t={}us: node {} started", rt.Now() / kMicrosecond, id);
    // The node's control loop: renew the lease, adopt new configurations;
    // listed down, or its lease lost, it stops (as the process does) and
    // comes back a while later.
    auto loop = std::make_shared<std::function<void()>>();
    *loop = [&, id, raw, loop] {
      const Nanos now = rt.Now();
      if (raw->cut_off) {
        if (now < raw->expiry) {
          raw->exec->After(kLease / 4, [loop] { (*loop)(); });
          return;
        }
        stop(id);
        restart_later(id);
        return;
      }
      if (now >= raw->expiry - kLease / 2) {
        auto r = store->RenewLease(raw->lease, kLease, now);
        if (!r.ok()) {
          stop(id);
          restart_later(id);
          return;
        }
        raw->lease = *r;
        raw->expiry = r->expiry;
      }
      auto c = store->Load();
      if (c.ok() && c->version != raw->seen) {
        raw->seen = c->version;
        if (c->config.nodes.at(id).state == cluster::NodeState::kDown) {
          stop(id);
          restart_later(id);
          return;
        }
        raw->server->Adopt(c->config);
      }
      raw->exec->After(kLease / 10, [loop] { (*loop)(); });
    };
    raw->exec->Post([loop] { (*loop)(); });
    ++out.restarts;
    return Status::Ok();
  };
  runtime::Executor* ops = rt.CreateExecutor("operator");
  auto start_after = [&](uint32_t id, Nanos delay) {
    ops->After(delay, [&, id] {
      if (procs.contains(id) || !out.failure.empty()) return;
      Status s = start(id);
      if (!s.ok()) out.failure = "node " + std::to_string(id) + " did not start again: " + s.ToString();
    });
  };
  // Once its lease has run out: the manager declares it failed, and it
  // comes back empty.
  restart_later = [&](uint32_t id) { start_after(id, (50 + static_cast<Nanos>(dice.Uniform(250))) * kMillisecond); };
  // Within its lease, as a process restarted at once: nobody declared it
  // failed, so it comes back with its data (Resync) while the replicas it
  // heads are still served by followers seeded from its last life.
  auto restart_soon = [&](uint32_t id) { start_after(id, (1 + static_cast<Nanos>(dice.Uniform(10))) * kMillisecond); };
  for (uint32_t id = 0; id < 3; ++id) {
    Status s = start(id);
    if (!s.ok()) return RubbleCampaignResult{false, "node " + std::to_string(id) + ": " + s.ToString()};
  }
  out.restarts = 0;

  // Is every node up, every replica complete?
  auto synced = [&] {
    auto c = store->Load();
    if (!c.ok()) return false;
    for (const auto& [id, n] : c->config.nodes) {
      if (n.state != cluster::NodeState::kUp || !procs.contains(id)) return false;
    }
    for (const auto& s : c->config.shards) {
      if (!s.syncing.empty() || s.backups.size() != 2) return false;
    }
    return true;
  };

  // The faults: the first somewhere in the clients' run, the second (every
  // other seed) once the cluster is whole again.
  const uint32_t victim = static_cast<uint32_t>(dice.Uniform(3));
  const bool zombie = seed % 3 == 1;
  const bool quick = !zombie && seed % 2 == 1;
  const Nanos fault_at = (10 + static_cast<Nanos>(dice.Uniform(90))) * kMillisecond;
  ops->After(fault_at, [&] {
    if (!procs.contains(victim)) return;
    if (zombie) {
      logging::Info("sim t={}us: node {} cut off", rt.Now() / kMicrosecond, victim);
      procs.at(victim)->cut_off = true;  // its control loop stops it once its lease is gone
    } else {
      stop(victim);
      quick ? restart_soon(victim) : restart_later(victim);
    }
  });
  const bool second = seed % 2 == 0;
  const uint32_t victim2 = (victim + 1 + static_cast<uint32_t>(dice.Uniform(2))) % 3;
  bool second_done = !second;
  auto second_fault = std::make_shared<std::function<void()>>();
  *second_fault = [&, second_fault] {
    if (rt.Now() > fault_at + kLease && synced()) {
      second_done = true;
      stop(victim2);
      return seed % 4 == 0 ? restart_soon(victim2) : restart_later(victim2);
    }
    ops->After(5 * kMillisecond, [second_fault] { (*second_fault)(); });
  };
  if (second) ops->After(fault_at + kLease, [second_fault] { (*second_fault)(); });
  // Every fourth seed: the whole cluster stops at once (a power cut of
  // processes: their files stay) and comes back node by node.
  const bool cold_start = seed % 4 == 3;
  if (cold_start) {
    ops->After((30 + static_cast<Nanos>(dice.Uniform(120))) * kMillisecond, [&] {
      logging::Info("sim t={}us: every node stops", rt.Now() / kMicrosecond);
      for (uint32_t id = 0; id < 3; ++id) {
        if (!procs.contains(id)) continue;
        stop(id);
        restart_later(id);
      }
    });
  }

  // Clients: writes at the head, reads at the tail of the map they hold.
  std::vector<Operation> history;
  constexpr int kClients = 4, kOpsPerClient = 120, kKeys = 12;
  int clients_done = 0;
  std::vector<std::unique_ptr<std::function<void(int)>>> loops;
  auto issue = [&](runtime::Executor* ce, const cluster::ClusterConfig& map, Operation::Kind k, const std::string& key,
                   const std::string& value, std::function<void(Code, std::string)> answer) {
    const uint32_t shard = map.ShardOf(HashKey(key));
    const uint32_t to = k == Operation::Kind::kGet ? cluster::ChainTail(map.shards[shard]) : map.shards[shard].primary;
    const proto::Method m = k == Operation::Kind::kPut   ? proto::Method::kPut
                            : k == Operation::Kind::kGet ? proto::Method::kGet
                                                         : proto::Method::kDel;
    const std::string payload = proto::Encode(proto::KvRequest{map.term, shard, key, value});
    auto answered = std::make_shared<bool>(false);
    auto once = [answered, answer = std::move(answer)](Code c, std::string p) {
      if (*answered) return;
      *answered = true;
      answer(c, std::move(p));
    };
    // No answer in 200 ms: the node is gone (a write's outcome is unknown).
    ce->After(200 * kMillisecond, [once] { once(Code::kTimeout, {}); });
    auto it = procs.find(to);
    if (it == procs.end()) return;
    Process* p = it->second.get();
    p->exec->Post([p, ce, m, payload, once] {
      if (!p->server) return;
      p->server->Handle(static_cast<uint16_t>(m), proto::AsBytes(payload),
                        [ce, once](Code c, std::string r) { ce->Post([once, c, r] { once(c, r); }); });
    });
  };
  for (int c = 0; c < kClients; ++c) {
    runtime::Executor* ce = rt.CreateExecutor("client" + std::to_string(c));
    auto map = std::make_shared<cluster::ClusterConfig>(store->Load()->config);
    std::function<void(int)>* next = loops.emplace_back(std::make_unique<std::function<void(int)>>()).get();
    *next = [&, c, ce, next, map](int n) {
      if (n == kOpsPerClient) return void(++clients_done);
      const int kind = static_cast<int>(ce->Rng().Uniform(5));  // 2 puts, 2 gets, 1 delete in 5
      const Operation::Kind k = kind < 2 ? Operation::Kind::kPut : kind < 4 ? Operation::Kind::kGet : Operation::Kind::kDel;
      const std::string key = "key" + std::to_string(ce->Rng().Uniform(kKeys));
      const std::string value = "c" + std::to_string(c) + "-" + std::to_string(n) + std::string(600, '.');
      const size_t slot = history.size();
      history.push_back(Operation{k, key, k == Operation::Kind::kPut ? std::optional<std::string>(value) : std::nullopt,
                                  false, false, ce->Now(), 0, static_cast<uint32_t>(c)});
      auto again = [&, ce, map, next](int then, Nanos pause) {
        auto now = store->Load();
        if (now.ok()) *map = now->config;
        ce->After(pause + static_cast<Nanos>(ce->Rng().Uniform(30)) * kMicrosecond, [next, then] { (*next)(then); });
      };
      issue(ce, *map, k, key, value, [&, ce, slot, n, k, again](Code code, std::string p) {
        Operation& op = history[slot];
        op.ret = ce->Now();
        const bool answered_ok = code == Code::kOk || code == Code::kNotFound;
        if (!answered_ok && (k == Operation::Kind::kGet || code == Code::kStaleTerm || code == Code::kBusy)) {
          // A read that told nothing, or a write refused before it was
          // sequenced (StaleTerm, Busy): not in the history; again with a
          // fresh map.
          op.ret = kLeftOut;
          if (code == Code::kStaleTerm) ++out.refused;
          return again(n, 100 * kMicrosecond);
        }
        if (!answered_ok) {
          // Timeout, Unavailable: the write may or may not have happened.
          op.unknown = true;
          return again(n + 1, kMillisecond);
        }
        if (k == Operation::Kind::kGet) {
          auto r = proto::DecodeKvResponse(proto::AsBytes(p), {});
          if (code == Code::kOk && r.ok()) op.value = std::string(r->value);
        } else if (k == Operation::Kind::kDel) {
          op.found = code == Code::kOk;
        }
        // About a millisecond between operations: the run spans the faults.
        ce->After(static_cast<Nanos>(500 + ce->Rng().Uniform(1000)) * kMicrosecond, [next, n] { (*next)(n + 1); });
      });
    };
    ce->Post([next] { (*next)(0); });
  }

  rt.RunUntil([&] { return clients_done == kClients || !out.failure.empty(); }, rt.Now() + 60 * runtime::kSecond);
  if (out.failure.empty() && clients_done != kClients) out.failure = "the clients did not finish in 60 s";
  // Every fault played out and every replica complete again: then each
  // key is read once more at its tail.
  if (out.failure.empty() &&
      !rt.RunUntil([&] { return (second_done && synced()) || !out.failure.empty(); }, rt.Now() + 30 * runtime::kSecond)) {
    out.failure = "the cluster was not whole again within 30 s: " + Describe(store->Load()->config);
    for (const auto& [id, p] : procs) out.failure += " node " + std::to_string(id) + " runs;";
  }
  int reads_left = out.failure.empty() ? kKeys : 0;
  runtime::Executor* reader = rt.CreateExecutor("final-reader");
  auto read = std::make_shared<std::function<void(int)>>();
  *read = [&, read](int k) {
    if (k == kKeys) return;
    const std::string key = "key" + std::to_string(k);
    const size_t slot = history.size();
    history.push_back(Operation{Operation::Kind::kGet, key, std::nullopt, false, false, reader->Now(), 0, kClients});
    issue(reader, store->Load()->config, Operation::Kind::kGet, key, "", [&, read, slot, k](Code code, std::string p) {
      Operation& op = history[slot];
      op.ret = reader->Now();
      if (code != Code::kOk && code != Code::kNotFound) {
        op.ret = kLeftOut;
        reader->After(kMillisecond, [read, k] { (*read)(k); });
        return;
      }
      auto r = proto::DecodeKvResponse(proto::AsBytes(p), {});
      if (code == Code::kOk && r.ok()) op.value = std::string(r->value);
      --reads_left;
      (*read)(k + 1);
    });
  };
  if (reads_left > 0) {
    reader->Post([read] { (*read)(0); });
    if (!rt.RunUntil([&] { return reads_left == 0 || !out.failure.empty(); }, rt.Now() + 10 * runtime::kSecond) &&
        out.failure.empty()) {
      out.failure = "the final reads did not finish";
    }
  }
  if (auto c = store->Load(); c.ok()) out.terms = c->config.term;
  cm->Post([&] { manager.Stop(); });
  rt.RunUntil([] { return false; }, rt.Now() + kMillisecond);
  for (uint32_t id = 0; id < 3; ++id) stop(id);
  out.trace_hash = rt.TraceHash();
  if (!out.failure.empty()) return out;
  out.failure = Verdict(history, &out.ops, &out.unknown);
  if (!out.failure.empty()) return out;
  out.ok = true;
  return out;
}

}  // namespace slip::sim
