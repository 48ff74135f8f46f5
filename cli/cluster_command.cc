#include "cli/cluster_command.h"

#include "auth/keyring.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <deque>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "replication/design.h"
#include "cli/front_door.h"
#include "cli/processes.h"
#include "cli/reshard_command.h"
#include "cluster/autoscale.h"
#include "cluster/cluster_config.h"
#include "cluster/rebalance.h"
#include "cluster/config_access.h"
#include "pm/region.h"
#include "node/manager.h"
#include "node/node_process.h"
#include "node/pool_process.h"
#include "slip/client.h"
#include "common/hash.h"
#include "common/log.h"
#include "rpc/rpc_peers.h"

namespace slip::cli {
namespace {

// Set by the signal handler, read by the watcher thread: a lock-free atomic
// is both async-signal-safe and race-free (a volatile sig_atomic_t is only
// the former).
std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free);
std::atomic<bool> g_stop_flag{false};
// The watcher blocks on this eventfd, so an idle server is not woken 50
// times a second to look at g_stop (-1: none could be made; it polls).
std::atomic<int> g_stop_fd{-1};

// From a signal handler too: an atomic store and write(2) are both
// async-signal-safe.
void RequestStop() {
  g_stop = 1;
  if (const int fd = g_stop_fd.load(); fd >= 0) {
    const uint64_t one = 1;
    (void)!::write(fd, &one, sizeof one);
  }
}

void OnSignal(int) { RequestStop(); }

// SIGTERM/SIGINT run `stop` on a watcher thread (a signal handler may not).
// Call RequestStop() and join the thread when the work ends first.
std::thread StopOnSignal(std::function<void()> stop) {
  if (g_stop_fd.load() < 0) g_stop_fd = ::eventfd(0, EFD_CLOEXEC);
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  return std::thread([stop = std::move(stop)] {
    while (!g_stop) {
      uint64_t n;
      const int fd = g_stop_fd.load();
      if (fd < 0 || (::read(fd, &n, sizeof n) < 0 && errno != EINTR)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    stop();
  });
}

int Fail(const char* what, const Status& s) {
  std::fprintf(stderr, "slip %s: %s\n", what, s.ToString().c_str());
  return 1;
}


// Runs a started process until a fatal error or a signal's Stop().
template <typename P>
int ServeUntilStopped(const char* what, Result<std::unique_ptr<P>> p) {
  if (!p.ok()) return Fail(what, p.status());
  std::thread watcher = StopOnSignal([&] { (*p)->Stop(); });
  Status s = (*p)->Wait();
  RequestStop();
  watcher.join();
  return s.ok() ? 0 : Fail(what, s);
}

}  // namespace

namespace {
enum class AfterFence { kRejoin, kRemoved, kStopped };

// Waits, after a fence, until the configuration lists node `o.node` down
// (the manager has replaced it: rejoin), drops it (`slip cluster
// remove-node` finished: stop, never rejoin), or a signal. A fenced node
// boots again only once it is listed down, on the path of a node restarted
// after a crash: it rejoins as a replica to be brought up to date. Booted
// while still listed up, it would come back with a new address as an
// in-sync replica, though it may have missed replication sent while it
// stalled. The configuration unreadable for a minute (its directory gone,
// the store down) is an error: nothing could bring the node back.
Result<AfterFence> AwaitReplaced(const ClusterCommandOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  auto last_read = t0;
  auto next_note = t0 + std::chrono::seconds(10);
  Status why;
  auto store = cluster::OpenConfigStore(o.dir, o.zookeeper);
  while (!g_stop) {
    const auto now = std::chrono::steady_clock::now();
    if (!store.ok()) {
      why = store.status();
      store = cluster::OpenConfigStore(o.dir, o.zookeeper);
    } else if (auto c = (*store)->Load(); !c.ok()) {
      why = c.status();
    } else {
      last_read = now;
      const auto self = c->config.nodes.find(o.node);
      if (self == c->config.nodes.end()) return AfterFence::kRemoved;
      if (self->second.state == cluster::NodeState::kDown) return AfterFence::kRejoin;
    }
    if (now - last_read > std::chrono::minutes(1)) {
      return Status(why.code(), "fenced, and the cluster's configuration unreadable for a minute: " + why.message());
    }
    if (now >= next_note) {
      const auto secs = std::chrono::duration_cast<std::chrono::seconds>(now - t0).count();
      logging::Warn("{}", last_read == now ? "still listed up " + std::to_string(secs) +
                                                 " s after it was fenced: waiting for the manager to replace it"
                                           : "fenced " + std::to_string(secs) +
                                                 " s ago; the configuration cannot be read: " + why.ToString());
      next_note += std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return AfterFence::kStopped;
}

// Fenced this often within kFenceWindow, a node stops trying: its lease is
// too short for the machine (each rejoin re-seeds it from its peers).
constexpr int kMaxFences = 5;
constexpr auto kFenceWindow = std::chrono::minutes(5);
}  // namespace

int RunServer(const ClusterCommandOptions& o) {
  node::NodeOptions no;
  no.id = o.node;
  no.dir = o.dir;
  no.zookeeper = o.zookeeper;
  no.provider = o.server_provider;
  no.bind_address = o.bind;
  no.secret_file = o.secret_file;
  no.pm_mb = o.pm_mb;
  no.lease = static_cast<runtime::Nanos>(o.lease_ms) * runtime::kMillisecond;
  no.commit_interval = static_cast<runtime::Nanos>(o.commit_interval_ms) * runtime::kMillisecond;
  no.workers = o.workers;
  no.digest_threads = o.digest_threads;
  // A signal stops whichever incarnation is serving; between two it ends
  // the wait in AwaitReplaced (g_stop).
  std::mutex mu;
  node::NodeProcess* serving = nullptr;
  std::thread watcher = StopOnSignal([&] {
    std::lock_guard<std::mutex> lock(mu);
    if (serving != nullptr) serving->Stop();
  });
  Status s;
  std::deque<std::chrono::steady_clock::time_point> fences;
  // A fenced node (a stall longer than its lease; the manager declared it
  // failed) boots again and rejoins, as a supervisor restarting it would:
  // its store is intact, and only a fresh incarnation may serve again.
  for (uint64_t incarnation = 0;; ++incarnation) {
    if (incarnation > 0) {
      auto next = AwaitReplaced(o);
      if (!next.ok()) {
        s = next.status();
        break;
      }
      if (*next == AfterFence::kRemoved) logging::Info("{}", "removed from the cluster while fenced: stopping");
      if (*next != AfterFence::kRejoin) break;  // s: the fence; a stop or removal is no failure (below)
      logging::Warn("{}", "booting again to rejoin (incarnation " + std::to_string(incarnation + 1) + ")");
    }
    auto node = node::NodeProcess::Start(no);
    if (!node.ok()) {
      s = node.status();
      break;
    }
    auto doors = FrontDoors::Start(o, node->get());
    if (!doors.ok()) {
      (*node)->Stop();
      (void)(*node)->Wait();
      s = doors.status();
      break;
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      serving = node->get();
    }
    if (g_stop) (*node)->Stop();  // a signal before it was listed above
    s = (*node)->Wait();
    {
      std::lock_guard<std::mutex> lock(mu);
      serving = nullptr;
    }
    doors->reset();  // before the node they ask
    node->reset();
    if (g_stop || !node::Fenced(s)) break;
    logging::Warn("{}", "fenced (" + s.message() + "): this incarnation stopped serving");
    const auto now = std::chrono::steady_clock::now();
    fences.push_back(now);
    while (now - fences.front() > kFenceWindow) fences.pop_front();
    if (fences.size() >= kMaxFences) {
      s = Status::Aborted("fenced " + std::to_string(fences.size()) + " times in 5 minutes: the lease (" +
                          std::to_string(o.lease_ms) + " ms) is too short for this machine");
      break;
    }
  }
  const bool stopped = g_stop;  // by a signal: RequestStop sets it too
  RequestStop();
  watcher.join();
  // Stopped by a signal, or removed from the cluster: no failure, whatever
  // the last incarnation ended with.
  if (stopped || node::Fenced(s)) return 0;
  return s.ok() ? 0 : Fail("server", s);
}

int RunPool(const ClusterCommandOptions& o) {
  node::PoolProcessOptions po;
  po.dir = o.dir;
  po.zookeeper = o.zookeeper;
  po.bind_address = o.bind;
  po.secret_file = o.secret_file;
  po.pool_mb = o.pool_mb;
  po.segment_mb = o.segment_mb;
  po.lease = static_cast<runtime::Nanos>(o.lease_ms) * runtime::kMillisecond;
  return ServeUntilStopped("pool", node::PoolProcess::Start(po));
}

int RunManagerCommand(const ClusterCommandOptions& o) {
  node::ManagerOptions mo;
  mo.dir = o.dir;
  mo.zookeeper = o.zookeeper;
  mo.lease = static_cast<runtime::Nanos>(o.lease_ms) * runtime::kMillisecond;
  std::thread watcher = StopOnSignal([] { g_stop_flag = true; });
  Status s = node::RunManager(mo, &g_stop_flag);
  RequestStop();
  watcher.join();
  return s.ok() ? 0 : Fail("manager", s);
}

namespace {
// The first configuration; addresses are filled in by the nodes as they start.
Status WriteFirstConfig(cluster::ConfigStore& store, const ClusterCommandOptions& o) {
  std::map<cluster::NodeId, std::string> members;
  for (uint32_t i = 0; i < o.nodes; ++i) members[i] = "pending";
  // A pool design's nodes own shards and hold no data: no replicas (the
  // pool keeps the data).
  const bool pool = cluster::UsesPool(o.design);
  if (!pool && !cluster::UsesChain(o.design)) SLIP_RETURN_IF_ERROR(replication::ParseDesign(o.design).status());
  SLIP_ASSIGN_OR_RETURN(cluster::ClusterConfig placed, cluster::Place(members, o.shards, pool ? 1 : o.replication));
  placed.design = o.design;
  placed.provider = o.provider;
  // The class the nodes will run (and its checks), as they will decide it.
  SLIP_ASSIGN_OR_RETURN(const node::PmPlace place, node::PlacePm(o.pm, o.dir, 0));
  placed.pm = place.pm_class;
  if (placed.pm == "dax") {
    // Refuse now rather than have every server refuse to start: a probe
    // file in DIR must map with MAP_SYNC.
    const std::string probe = o.dir + "/.dax-probe";
    bool dax = false;
    {
      auto r = pm::PmRegion::OpenFile(probe, 4096, {});
      dax = r.ok() && (*r)->is_dax();
    }
    std::error_code ec;
    std::filesystem::remove(probe, ec);
    if (!dax) {
      return Status::InvalidArgument("--pm dax: " + o.dir + " is not on a DAX filesystem (MAP_SYNC refused); it "
                                     "needs real PM mounted with -o dax");
    }
  }
  return store.CompareAndSwap(cluster::kNoVersion, placed).status();
}

// A `slip` command line for a process of the cluster: global options first;
// each process's stderr is DIR/logs/<name>.log.
std::vector<std::string> CommonArgs(const ClusterCommandOptions& o, std::vector<std::string> args) {
  args.insert(args.begin() + 1, {"--log-level", o.log_level});
  args.insert(args.end(), {"--dir", o.dir, "--lease-ms", std::to_string(o.lease_ms)});
  if (!o.zookeeper.empty()) args.insert(args.end(), {"--zookeeper", o.zookeeper});
  if (!o.secret_file.empty()) args.insert(args.end(), {"--secret-file", o.secret_file});
  return args;
}

std::string SecretFileOf(const ClusterCommandOptions& o) {
  return o.secret_file.empty() ? auth::SecretPath(o.dir) : o.secret_file;
}

// A new cluster's secret: a fresh random key in DIR/secret (or
// --secret-file), owner-only, unless --no-auth. An existing file is kept
// (the operator may have made it, or share it with other hosts).
Status MakeSecret(const ClusterCommandOptions& o) {
  const std::string path = SecretFileOf(o);
  if (o.no_auth) {
    if (std::filesystem::exists(path)) {
      return Status::InvalidArgument("--no-auth, but " + path + " holds a cluster secret: remove it first");
    }
    return Status::Ok();
  }
  if (std::filesystem::exists(path)) return auth::ReadKeyringFile(path).status();
  return auth::WriteKeyringFile(path, auth::Keyring::Generate());
}


// The configuration store of the cluster in o.dir (created if missing).
Result<std::unique_ptr<cluster::ConfigStore>> OpenStore(const ClusterCommandOptions& o) {
  if (o.dir.empty()) return Status::InvalidArgument("--dir is required");
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  return cluster::OpenConfigStore(o.dir, o.zookeeper);
}
}  // namespace

std::string NodeName(uint32_t i) { return "node-" + std::to_string(i); }

Result<uint32_t> JoiningNodeId(const ClusterCommandOptions& o, const cluster::ClusterConfig& c) {
  if (!o.node_given) return c.nodes.empty() ? 0 : c.nodes.rbegin()->first + 1;
  if (c.nodes.contains(o.node)) return Status::InvalidArgument("node " + std::to_string(o.node) + " is a member already");
  return o.node;
}

std::vector<std::string> ServerArgs(const ClusterCommandOptions& o, uint32_t id) {
  std::vector<std::string> args = {SelfExecutable(), "server", "--node", std::to_string(id), "--pm-mb",
                                   std::to_string(o.pm_mb), "--commit-interval-ms", std::to_string(o.commit_interval_ms),
                                   "--workers", std::to_string(o.workers), "--digest-threads",
                                   std::to_string(o.digest_threads)};
  if (o.resp_port != 0) args.insert(args.end(), {"--resp-port", std::to_string(o.resp_port + id)});
  if (o.metrics_port != 0) args.insert(args.end(), {"--metrics-port", std::to_string(o.metrics_port + id)});
  if (o.http_port != 0) args.insert(args.end(), {"--http-port", std::to_string(o.http_port + id)});
  if (!o.resp_password_file.empty()) args.insert(args.end(), {"--resp-password-file", o.resp_password_file});
  return CommonArgs(o, std::move(args));
}

namespace {
std::string PortsPath(const std::string& dir) { return dir + "/ports.json"; }

// Node i takes port P+i of each operator port: InvalidArgument when the
// ranges of nodes 0..max_id overlap or pass 65535 (a node would find its
// port taken and not start).
Status CheckPortRanges(const ClusterCommandOptions& o, uint32_t max_id) {
  const std::pair<const char*, uint32_t> ports[] = {
      {"--resp-port", o.resp_port}, {"--metrics-port", o.metrics_port}, {"--http-port", o.http_port}};
  for (size_t a = 0; a < 3; ++a) {
    for (size_t b = a + 1; b < 3; ++b) {
      const uint32_t pa = ports[a].second, pb = ports[b].second;
      if (pa == 0 || pb == 0) continue;
      if (pa <= pb + max_id && pb <= pa + max_id) {
        return Status::InvalidArgument(std::string(ports[a].first) + " " + std::to_string(pa) + " and " + ports[b].first +
                                       " " + std::to_string(pb) + " overlap: node i takes P+i of each (ids up to " +
                                       std::to_string(max_id) + ")");
      }
    }
  }
  if (std::max({o.resp_port, o.metrics_port, o.http_port}) + max_id > 65535) {
    return Status::InvalidArgument("a port P+i is above 65535 (ids up to " + std::to_string(max_id) + ")");
  }
  return Status::Ok();
}
}  // namespace

Result<ClusterCommandOptions> WithFrontDoorPorts(const ClusterCommandOptions& o, uint32_t max_id) {
  ClusterCommandOptions r = o;
  const std::string path = PortsPath(o.dir);
  nlohmann::json j = nlohmann::json::object();
  if (std::filesystem::exists(path)) {
    std::ifstream f(path);
    j = nlohmann::json::parse(f, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return Status::Corruption(path + " is not a JSON object");
  }
  bool changed = false;
  for (auto [name, given, out] : {std::tuple{"resp_port", o.resp_port, &r.resp_port},
                                  std::tuple{"metrics_port", o.metrics_port, &r.metrics_port},
                                  std::tuple{"http_port", o.http_port, &r.http_port}}) {
    if (given == 0) {
      if (j.contains(name) && !j[name].is_number_unsigned()) {
        return Status::Corruption(path + ": " + name + " is not a port number");
      }
      *out = j.value(name, 0u);
    } else {
      if (given > 65535) return Status::InvalidArgument(std::string(name) + " above 65535");
      j[name] = given;
      changed = true;
    }
  }
  SLIP_RETURN_IF_ERROR(CheckPortRanges(r, max_id));
  if (changed) {
    std::error_code dir_ec;
    std::filesystem::create_directories(o.dir, dir_ec);
    std::ofstream f(path + ".tmp");
    f << j.dump(2) << "\n";
    f.close();
    if (!f) return Status::IoError("cannot write " + path);
    std::error_code ec;
    std::filesystem::rename(path + ".tmp", path, ec);
    if (ec) return Status::IoError("cannot write " + path + ": " + ec.message());
  }
  return r;
}


int ClusterPassword(const ClusterCommandOptions& o) {
  if (!o.resp_password_file.empty()) {
    std::fprintf(stderr, "slip cluster password: the front doors take the passwords in %s\n", o.resp_password_file.c_str());
    return 1;
  }
  const std::string path = SecretFileOf(o);
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr, "slip cluster password: %s has no secret: the front doors take no password\n", o.dir.c_str());
    return 1;
  }
  auto ring = auth::ReadKeyringFile(path);
  if (!ring.ok()) return Fail("cluster password", ring.status());
  std::printf("%s\n", KeyHex(ring->current()).c_str());
  return 0;
}

std::vector<std::string> ManagerArgs(const ClusterCommandOptions& o) {
  return CommonArgs(o, {SelfExecutable(), "manager"});
}

int ClusterInit(const ClusterCommandOptions& o) {
  auto store = OpenStore(o);
  if (!store.ok()) return Fail("cluster init", store.status());
  auto existing = (*store)->Load();
  if (existing.ok()) {
    return Fail("cluster init", Status::InvalidArgument("a cluster is already configured in " + o.dir));
  }
  if (!existing.status().Is(Code::kNotFound)) return Fail("cluster init", existing.status());
  Status s = MakeSecret(o);
  if (s.ok()) s = WriteFirstConfig(**store, o);
  if (!s.ok()) return Fail("cluster init", s);
  std::printf("slip cluster: %u nodes, %u shards, RF %u, %s configured in %s\n", o.nodes, o.shards,
              cluster::UsesPool(o.design) ? 1u : o.replication, o.design.c_str(), o.dir.c_str());
  return 0;
}

int ClusterUp(const ClusterCommandOptions& given) {
  auto store = OpenStore(given);
  if (!store.ok()) return Fail("cluster up", store.status());
  auto existing = (*store)->Load();
  if (!existing.ok() && !existing.status().Is(Code::kNotFound)) return Fail("cluster up", existing.status());
  // The operator ports, checked against the ids before anything is written.
  uint32_t max_id = given.nodes == 0 ? 0 : given.nodes - 1;
  if (existing.ok() && !existing->config.nodes.empty()) max_id = existing->config.nodes.rbegin()->first;
  auto ported = WithFrontDoorPorts(given, max_id);
  if (!ported.ok()) return Fail("cluster up", ported.status());
  const ClusterCommandOptions& o = *ported;
  std::vector<uint32_t> ids;
  if (existing.status().Is(Code::kNotFound)) {
    Status s = MakeSecret(o);
    if (s.ok()) s = WriteFirstConfig(**store, o);
    if (!s.ok()) return Fail("cluster up", s);
    for (uint32_t i = 0; i < o.nodes; ++i) ids.push_back(i);
  } else {
    // A cold start of what exists (members may have joined and left).
    for (const auto& [id, info] : existing->config.nodes) ids.push_back(id);
  }
  const uint32_t nodes = static_cast<uint32_t>(ids.size());
  const std::string self = SelfExecutable();
  auto common = [&](std::vector<std::string> args) { return CommonArgs(o, std::move(args)); };
  auto m = SpawnDetached(o.dir, "manager", common({self, "manager"}));
  if (!m.ok() && !m.status().Is(Code::kInvalidArgument)) return Fail("cluster up", m.status());
  const std::string design = existing.ok() ? existing->config.design : o.design;
  if (cluster::UsesPool(design)) {
    // The pool holds every node's share: room for each node's PM share.
    auto p = SpawnDetached(o.dir, "pool",
                           common({self, "pool", "--pool-mb", std::to_string(o.pm_mb * std::max(nodes, 1u))}));
    if (!p.ok() && !p.status().Is(Code::kInvalidArgument)) return Fail("cluster up", p.status());
  }
  for (uint32_t i : ids) {
    auto p = SpawnDetached(o.dir, NodeName(i), ServerArgs(o, i));
    if (!p.ok() && !p.status().Is(Code::kInvalidArgument)) return Fail("cluster up", p.status());
  }
  // Ready when a write and a read go through (every shard's primary serves).
  auto client = Client::Open(ClientOptions{.dir = o.dir, .zookeeper = o.zookeeper, .provider = "",
                                           .deadline = std::chrono::seconds(60), .bind_address = "", .secret_file = o.secret_file});
  if (!client.ok()) return Fail("cluster up", client.status());
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t k = 0; k < 64; ++k) {
    const std::string key = "__slip_ready_" + std::to_string(k);
    Status s;
    // A write whose outcome is unknown (the node or the pool it wrote to
    // went away meanwhile: processes of a running cluster may be restarting)
    // says nothing about readiness: probe again, within the minute.
    for (int attempt = 0; attempt < 600; ++attempt) {
      s = (*client)->Put(key, "1");
      if (s.ok()) s = (*client)->Delete(key);
      if (!s.Is(Code::kUnavailable) && !s.Is(Code::kTimeout)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!s.ok() && !s.Is(Code::kNotFound)) {
      return Fail("cluster up", Status(s.code(), "cluster did not become ready: " + s.message() +
                                                     " (see " + o.dir + "/logs)"));
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("slip cluster: %u nodes up in %s (ready in %.1f s; logs in %s/logs)\n", nodes, o.dir.c_str(),
              secs, o.dir.c_str());
  return 0;
}

int ClusterDown(const ClusterCommandOptions& o) {
  // The manager first: nodes going away one by one must not look like
  // failures to replace.
  (void)StopProcess(o.dir, "manager");
  for (const auto& p : ListProcesses(o.dir)) (void)StopProcess(o.dir, p.name);
  std::printf("slip cluster: stopped %s\n", o.dir.c_str());
  return 0;
}

namespace {
// The configuration of the cluster in o.dir, for a command that changes its
// membership: only designs whose data lives in a pool move no data to do so.
Result<cluster::VersionedConfig> LoadForMembership(cluster::ConfigStore& store, const char* what) {
  SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig vc, store.Load());
  if (!cluster::UsesPool(vc.config.design)) {
    return Status::NotSupported(std::string(what) + ": the " + vc.config.design +
                                " design does not move shards between nodes (its chains are placed once)");
  }
  return vc;
}

std::map<cluster::NodeId, uint32_t> OwnedCounts(const cluster::ClusterConfig& c) {
  std::map<cluster::NodeId, uint32_t> owned;
  for (const auto& s : c.shards) ++owned[s.primary];
  return owned;
}
}  // namespace

int ClusterAddNode(const ClusterCommandOptions& given) {
  auto store = cluster::OpenConfigStore(given.dir, given.zookeeper);
  if (!store.ok()) return Fail("cluster add-node", store.status());
  auto c = (*store)->Load();
  if (!c.ok()) return Fail("cluster add-node", c.status());
  auto joining = JoiningNodeId(given, c->config);
  if (!joining.ok()) return Fail("cluster add-node", joining.status());
  const uint32_t id = *joining;
  // The operator ports, checked with the id the node takes before anything is written.
  auto ported = WithFrontDoorPorts(given, std::max(id, c->config.nodes.empty() ? 0u : c->config.nodes.rbegin()->first));
  if (!ported.ok()) return Fail("cluster add-node", ported.status());
  const ClusterCommandOptions& o = *ported;
  if (cluster::MovesShards(c->config.design)) return ReshardAddNode(o, **store, c->config, id);
  auto vc = LoadForMembership(**store, "cluster add-node");
  if (!vc.ok()) return Fail("cluster add-node", vc.status());
  if (id > cluster::kMaxPoolNodeId) {
    return Fail("cluster add-node", Status::InvalidArgument("node ids go up to " +
                                                            std::to_string(cluster::kMaxPoolNodeId) + ", not " +
                                                            std::to_string(id)));
  }
  const auto t0 = std::chrono::steady_clock::now();
  // The node lists itself once it holds its lease; the manager then hands
  // it its share of the shards.
  auto p = SpawnDetached(o.dir, NodeName(id), ServerArgs(o, id));
  if (!p.ok()) return Fail("cluster add-node", p.status());
  const uint32_t share = vc->config.num_shards() / static_cast<uint32_t>(vc->config.nodes.size() + 1);
  double listed_s = -1;
  for (;;) {
    auto now = (*store)->Load();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (now.ok() && now->config.nodes.contains(id)) {
      if (listed_s < 0) listed_s = secs;
      const uint32_t owned = OwnedCounts(now->config)[id];
      if (owned >= std::max(share, 1u)) {
        std::printf("slip cluster: node %u joined %s: listed after %.2f s, owns %u shards after %.2f s (term %llu)\n",
                    id, o.dir.c_str(), listed_s, owned, secs, static_cast<unsigned long long>(now->config.term));
        return 0;
      }
    }
    bool alive = false;
    for (const auto& proc : ListProcesses(o.dir)) alive |= proc.name == NodeName(id) && proc.alive;
    if (!alive) {
      return Fail("cluster add-node", Status::Aborted("node " + std::to_string(id) + " stopped while joining (see " +
                                                      o.dir + "/logs/" + NodeName(id) + ".log)"));
    }
    if (secs > 60) return Fail("cluster add-node", Status::Timeout("node " + std::to_string(id) + " got no shards in 60 s"));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int ClusterRemoveNode(const ClusterCommandOptions& o) {
  auto store = cluster::OpenConfigStore(o.dir, o.zookeeper);
  if (!store.ok()) return Fail("cluster remove-node", store.status());
  if (auto c = (*store)->Load(); c.ok() && cluster::MovesShards(c->config.design)) return ReshardRemoveNode(o);
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    auto vc = LoadForMembership(**store, "cluster remove-node");
    if (!vc.ok()) return Fail("cluster remove-node", vc.status());
    auto it = vc->config.nodes.find(o.node);
    if (it == vc->config.nodes.end()) {
      return Fail("cluster remove-node", Status::InvalidArgument("node " + std::to_string(o.node) + " is not a member"));
    }
    if (it->second.state == cluster::NodeState::kDown) {
      // Its log may hold writes nobody merged yet (the next owner of its
      // shards merges them when it takes over; dropping it could lose them).
      return Fail("cluster remove-node",
                  Status::InvalidArgument("node " + std::to_string(o.node) +
                                          " is down: start it again (slip cluster up restarts it; it rejoins), then "
                                          "remove it"));
    }
    if (it->second.state == cluster::NodeState::kLeaving) break;  // asked before: wait for it
    auto next = cluster::RemoveOwner(vc->config, o.node);
    if (!next.ok()) return Fail("cluster remove-node", next.status());
    if ((*store)->CompareAndSwap(vc->version, *next).ok()) break;
  }
  // It hands its shards over, then drops itself from the membership.
  for (;;) {
    auto now = (*store)->Load();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (now.ok() && !now->config.nodes.contains(o.node)) {
      (void)StopProcess(o.dir, NodeName(o.node));  // it stops by itself; the pid file goes
      std::printf("slip cluster: node %u left %s after %.2f s (term %llu)\n", o.node, o.dir.c_str(), secs,
                  static_cast<unsigned long long>(now->config.term));
      return 0;
    }
    if (now.ok() && now->config.nodes.at(o.node).state == cluster::NodeState::kDown) {
      return Fail("cluster remove-node", Status::Aborted("node " + std::to_string(o.node) +
                                                         " failed while leaving; its shards went to the others"));
    }
    if (secs > 60) {
      return Fail("cluster remove-node", Status::Timeout("node " + std::to_string(o.node) + " did not leave in 60 s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int ClusterShare(const ClusterCommandOptions& o, bool share) {
  const char* what = share ? "cluster share" : "cluster unshare";
  auto store = cluster::OpenConfigStore(o.dir, o.zookeeper);
  if (!store.ok()) return Fail(what, store.status());
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t term = 0;
  for (;;) {
    auto vc = (*store)->Load();
    if (!vc.ok()) return Fail(what, vc.status());
    auto next = share ? cluster::ShareKey(vc->config, o.key, o.owners) : cluster::UnshareKey(vc->config, o.key);
    if (!next.ok()) return Fail(what, next.status());
    if ((*store)->CompareAndSwap(vc->version, *next).ok()) {
      term = next->term;
      break;
    }
  }
  // Every node reconfigures for it (the key's owner changes the pool's cell
  // before it serves); done once all serve that term or a later one.
  auto client = Client::Open(ClientOptions{.dir = o.dir, .zookeeper = o.zookeeper, .provider = "",
                                           .deadline = std::chrono::seconds(5), .bind_address = "", .secret_file = o.secret_file});
  if (!client.ok()) return Fail(what, client.status());
  for (;;) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto now = (*store)->Load();
    auto stats = (*client)->NodeStats();
    bool all = now.ok() && stats.ok();
    if (all) {
      size_t up = 0, serving = 0;
      for (const auto& [id, info] : now->config.nodes) up += info.state == cluster::NodeState::kUp;
      for (const std::string& text : *stats) {
        auto j = nlohmann::json::parse(text, nullptr, false);
        if (!j.is_discarded() && j.contains("serving_term") && j["serving_term"].is_number_unsigned() &&
            j["serving_term"].get<uint64_t>() >= term) {
          ++serving;
        }
      }
      all = serving >= up;
    }
    if (all) {
      std::printf("slip cluster: key %s %s in term %llu after %.2f s\n", o.key.c_str(),
                  share ? "shared" : "no longer shared", static_cast<unsigned long long>(term), secs);
      return 0;
    }
    if (secs > 60) return Fail(what, Status::Timeout("the nodes did not all serve term " + std::to_string(term) + " in 60 s"));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int ClusterAutoscale(const ClusterCommandOptions& o) {
  auto store = cluster::OpenConfigStore(o.dir, o.zookeeper);
  if (!store.ok()) return Fail("cluster autoscale", store.status());
  if (auto vc = LoadForMembership(**store, "cluster autoscale"); !vc.ok()) return Fail("cluster autoscale", vc.status());
  if (o.epoch_ms == 0 || o.min_nodes == 0 || o.min_nodes > o.max_nodes) {
    return Fail("cluster autoscale", Status::InvalidArgument("need --epoch-ms > 0 and 1 <= --min-nodes <= --max-nodes"));
  }
  auto client = Client::Open(ClientOptions{.dir = o.dir, .zookeeper = o.zookeeper, .provider = "",
                                           .deadline = std::chrono::seconds(10), .bind_address = "", .secret_file = o.secret_file});
  if (!client.ok()) return Fail("cluster autoscale", client.status());
  cluster::AutoscalePolicy policy(cluster::AutoscaleOptions{
      .over = o.over,
      .under = o.under,
      .latency_slo_us = o.slo_us,
      .grace = static_cast<runtime::Nanos>(o.grace_ms) * runtime::kMillisecond,
      .min_nodes = o.min_nodes,
      .max_nodes = o.max_nodes});
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::map<uint32_t, std::pair<double, Clock::time_point>> last;  // node -> (worker cpu ns, when)
  std::thread watcher = StopOnSignal([] { g_stop_flag = true; });
  int rc = 0;
  for (uint32_t epoch = 1; !g_stop_flag && (o.epochs == 0 || epoch <= o.epochs); ++epoch) {
    std::this_thread::sleep_for(std::chrono::milliseconds(o.epoch_ms));
    // Latency: a few probe GETs (the key need not exist).
    constexpr int kProbes = 20;
    const auto p0 = Clock::now();
    for (int i = 0; i < kProbes; ++i) (void)(*client)->Get("__slip_autoscale_probe");
    const double latency_us = std::chrono::duration<double, std::micro>(Clock::now() - p0).count() / kProbes;
    // Occupancy: each KVS node's worker CPU over the wall time since last seen.
    auto stats = (*client)->NodeStats();
    cluster::AutoscaleObservation seen;
    seen.now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
    seen.latency_us = latency_us;
    if (!stats.ok()) {
      std::printf("epoch %u: no stats (%s)\n", epoch, stats.status().ToString().c_str());
      std::fflush(stdout);
      continue;
    }
    const auto now = Clock::now();
    std::map<uint32_t, std::pair<double, Clock::time_point>> next;
    std::map<std::string, double> key_requests;
    for (const std::string& text : *stats) {
      auto j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_discarded() || !j.contains("node") || !j["node"].is_number_unsigned() || !j.contains("cpu_ns")) continue;
      // Each node's most requested keys of its last complete second: a
      // shared key's requests are spread over its owners, so add them up.
      if (j.contains("hot_keys") && j["hot_keys"].is_array()) {
        for (const auto& k : j["hot_keys"]) {
          if (!k.is_object() || !k.contains("key_hex") || !k["key_hex"].is_string() || !k.contains("count") ||
              !k["count"].is_number()) {
            continue;
          }
          auto key = rpc::RpcPeers::HexDecode(k["key_hex"].get<std::string>());
          if (key.ok()) key_requests[*key] += k["count"].get<double>();
        }
      }
      const uint32_t id = j["node"].get<uint32_t>();
      const double cpu = j["cpu_ns"].value("worker", 0.0);
      next[id] = {cpu, now};
      if (auto prev = last.find(id); prev != last.end()) {
        const double wall = std::chrono::duration<double, std::nano>(now - prev->second.second).count();
        if (wall > 0) seen.occupancy.emplace_back(id, std::max(0.0, cpu - prev->second.first) / wall);
      }
    }
    last = std::move(next);
    seen.key_requests.assign(key_requests.begin(), key_requests.end());
    auto config = (*store)->Load();
    if (config.ok()) {
      for (const auto& [key, secondaries] : config->config.shared) {
        uint32_t r = 1;
        const cluster::NodeId owner = config->config.shards[config->config.ShardOf(HashKey(key))].primary;
        for (cluster::NodeId n : secondaries) r += n != owner;
        seen.replicas[key] = r;
      }
    }
    const cluster::AutoscaleDecision d = policy.Decide(seen);
    std::string occ;
    for (const auto& [id, x] : seen.occupancy) occ += " " + std::to_string(id) + ":" + std::to_string(static_cast<int>(100 * x)) + "%";
    using Action = cluster::AutoscaleDecision::Action;
    const char* act = d.action == Action::kAdd       ? "add a node"
                      : d.action == Action::kRemove  ? "remove node"
                      : d.action == Action::kShare   ? "share a hot key"
                      : d.action == Action::kUnshare ? "de-replicate a cold key"
                                                     : "nothing";
    std::printf("epoch %u: occupancy%s, latency %.0f us: %s%s (%s)\n", epoch, occ.empty() ? " -" : occ.c_str(),
                latency_us, act,
                d.action == cluster::AutoscaleDecision::Action::kRemove ? (" " + std::to_string(d.node)).c_str() : "",
                d.why.c_str());
    std::fflush(stdout);
    ClusterCommandOptions change = o;
    if (d.action == cluster::AutoscaleDecision::Action::kAdd) {
      change.node_given = false;
      rc = ClusterAddNode(change);
    } else if (d.action == cluster::AutoscaleDecision::Action::kRemove) {
      change.node = d.node;
      rc = ClusterRemoveNode(change);
    } else if (d.action == Action::kShare && config.ok()) {
      // Its owners so far, then the idlest other nodes up to `replicas`.
      const cluster::ClusterConfig& c = config->config;
      const cluster::NodeId owner = c.shards[c.ShardOf(HashKey(d.key))].primary;
      change.key = d.key;
      change.owners = c.shared.contains(d.key) ? c.shared.at(d.key) : std::vector<cluster::NodeId>{};
      std::erase(change.owners, owner);
      std::vector<std::pair<double, cluster::NodeId>> idlest;
      for (const auto& [id, x] : seen.occupancy) idlest.emplace_back(x, id);
      std::sort(idlest.begin(), idlest.end());
      for (const auto& [x, id] : idlest) {
        if (change.owners.size() + 1 >= d.replicas) break;
        if (id != owner && std::find(change.owners.begin(), change.owners.end(), id) == change.owners.end()) {
          change.owners.push_back(id);
        }
      }
      rc = ClusterShare(change, true);
    } else if (d.action == Action::kUnshare) {
      change.key = d.key;
      rc = ClusterShare(change, false);
    }
    if (rc != 0) break;
    // The membership changed: occupancies start over.
    if (d.action != cluster::AutoscaleDecision::Action::kNone) last.clear();
  }
  RequestStop();
  watcher.join();
  return rc;
}

int ClusterKill(const ClusterCommandOptions& o) {
  Status s = KillProcess(o.dir, NodeName(o.node));
  return s.ok() ? 0 : Fail("cluster kill", s);
}

int ClusterStatus(const ClusterCommandOptions& o) {
  for (const auto& p : ListProcesses(o.dir)) {
    std::printf("%-10s pid %-8d %s\n", p.name.c_str(), p.pid, p.alive ? "running" : "not running");
  }
  auto store = cluster::OpenConfigStore(o.dir, o.zookeeper);
  if (!store.ok()) return Fail("cluster status", store.status());
  auto c = (*store)->Load();
  if (!c.ok()) return Fail("cluster status", c.status());
  std::printf("design %s, term %llu, %u shards, replication %u\n", c->config.design.c_str(),
              static_cast<unsigned long long>(c->config.term), c->config.num_shards(),
              c->config.replication_factor);
  // The class of an acknowledged write (older configurations: inferred from
  // where the nodes' PM files live, DIR/node-<id>/pm).
  const bool pool = cluster::UsesPool(c->config.design);
  auto place = pool ? node::PlacePm(c->config.pm, o.dir, std::string("pool"))
                    : node::PlacePm(c->config.pm, o.dir, c->config.nodes.empty() ? 0 : c->config.nodes.begin()->first);
  if (!place.ok()) return Fail("cluster status", place.status());
  const bool chain = cluster::UsesChain(c->config.design);
  std::printf("provider %s, durability %s\n", c->config.provider.c_str(),
              chain ? "file (a write is acknowledged once every member of its chain fdatasync'd it to its log: "
                      "the head's WAL, the followers' replica logs; tables written O_DIRECT|O_DSYNC into every "
                      "follower's slot image before the edit naming them): survives power loss"
              : pool ? (place->pm_class == "dram" ? "dram (the pool's region in memory: survives process crashes, not "
                                                  "power loss)"
                                                : "pool region in a file: every batch of a KVS node is persisted "
                                                  "(POOL_PERSIST) before it is acknowledged: survives power loss")
              : place->pm_class == "dram" ? "dram (PM emulated in memory: survives process crashes, not power loss)"
              : place->pm_class == "dax"  ? "dax (real PM: cache-line write-back + fence on every replica)"
                                          : "file (PM files msync'd on every replica before an acknowledgement)");
  {
    const std::string secret = SecretFileOf(o);
    auto ring = auth::ReadKeyringFile(secret);
    if (ring.ok()) {
      std::printf("auth on: cluster secret in %s (current key %u)\n", secret.c_str(), ring->current().id);
    } else if (ring.status().Is(Code::kNotFound)) {
      std::printf("auth OFF: no cluster secret (%s): anyone who reaches a node's port is served\n", secret.c_str());
    } else {
      std::printf("auth: %s\n", ring.status().ToString().c_str());
    }
  }
  if (chain) {
    std::printf("engines in %s/node-<id>/rubble\n", o.dir.c_str());
  } else {
    std::printf("%s %s\n", pool ? "pool region" : "pm files like", place->path.c_str());
  }
  if (pool) std::printf("pool at %s\n", c->config.pool.empty() ? "(not started yet)" : c->config.pool.c_str());
  auto prim = c->config.PrimaryCounts();
  auto back = c->config.BackupCounts();
  for (const auto& [id, info] : c->config.nodes) {
    const std::string state(cluster::NodeStateName(info.state));
    if (pool) {
      std::printf("node %-3u %-7s %-24s owner of %u shards\n", id, state.c_str(), info.address.c_str(), prim[id]);
    } else if (chain) {
      uint32_t seeding = 0;
      for (const auto& s : c->config.shards) seeding += std::count(s.syncing.begin(), s.syncing.end(), id);
      std::printf("node %-3u %-4s %-24s head of %u, follower of %u (%u being seeded)\n", id, state.c_str(),
                  info.address.c_str(), prim[id], back[id], seeding);
    } else {
      std::printf("node %-3u %-4s %-24s primary of %u, backup of %u\n", id, state.c_str(), info.address.c_str(),
                  prim[id], back[id]);
    }
  }
  // Moves under way, with what the targets copied so far (when they answer).
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> copied;  // (node, shard) -> entries
  if (!c->config.migrations.empty()) {
    auto client = Client::Open(ClientOptions{.dir = o.dir, .zookeeper = o.zookeeper, .provider = "",
                                             .deadline = std::chrono::seconds(2), .bind_address = "", .secret_file = o.secret_file});
    auto stats = client.ok() ? (*client)->NodeStats() : Result<std::vector<std::string>>(client.status());
    for (const std::string& text : stats.ok() ? *stats : std::vector<std::string>{}) {
      auto j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_discarded() || !j.contains("node") || !j["node"].is_number_unsigned() ||
          !j.contains("moves_in_progress") || !j["moves_in_progress"].is_array()) {
        continue;
      }
      for (const auto& mv : j["moves_in_progress"]) {
        if (mv.contains("shard") && mv.contains("copied")) {
          copied[{j["node"].get<uint32_t>(), mv["shard"].get<uint32_t>()}] = mv["copied"].get<uint64_t>();
        }
      }
    }
  }
  for (const auto& m : c->config.migrations) {
    std::string detail;
    if (!cluster::MovesPrimary(c->config, m)) {
      detail = " (a backup: the primary seeds the target)";
    } else if (auto it = copied.find({m.to, m.shard}); it != copied.end()) {
      detail = " (the target serves it; " + std::to_string(it->second) + " entries copied so far)";
    }
    std::printf("shard %u moving from node %u to node %u: %s%s\n", m.shard, m.from, m.to,
                std::string(cluster::MigrationStateName(m.state)).c_str(), detail.c_str());
  }
  for (const auto& [key, secondaries] : c->config.shared) {
    std::string owners;
    for (cluster::NodeId n : secondaries) owners += (owners.empty() ? "" : ",") + std::to_string(n);
    std::printf("shared key %s: owner of its shard, and %s\n", key.c_str(), owners.empty() ? "no other" : owners.c_str());
  }
  return 0;
}

// Each step of a rotation is a new keyring in the secret file; every live
// process re-reads it within half a second, and the next step waits until
// every node and the pool report the new state in their STATS (so no two
// processes are ever without a common key): 1. the new key accepted
// everywhere; 2. made current (new sessions use it); 3. the old one dropped
// (its sessions are told so and open new ones).
int ClusterRotateSecret(const ClusterCommandOptions& o) {
  const std::string path = SecretFileOf(o);
  auto ring = auth::ReadKeyringFile(path);
  if (!ring.ok()) return Fail("cluster rotate-secret", ring.status());
  auto client = Client::Open(ClientOptions{.dir = o.dir, .zookeeper = o.zookeeper, .provider = "",
                                           .deadline = std::chrono::seconds(5), .bind_address = "",
                                           .secret_file = path});
  if (!client.ok()) return Fail("cluster rotate-secret", client.status());
  // Waits until every process that answers STATS satisfies `done`.
  auto wait_for = [&](const char* what, const std::function<bool(const nlohmann::json&)>& done) -> Status {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    std::string lagging;
    while (std::chrono::steady_clock::now() < deadline) {
      auto stats = (*client)->NodeStats();
      lagging.clear();
      size_t answered = 0;
      for (const std::string& text : stats.ok() ? *stats : std::vector<std::string>{}) {
        auto j = nlohmann::json::parse(text, nullptr, false);
        if (j.is_discarded() || !j.contains("auth")) continue;
        ++answered;
        if (!done(j["auth"])) lagging += (lagging.empty() ? "" : ", ") + j.value("node", nlohmann::json()).dump();
      }
      if (answered > 0 && lagging.empty()) return Status::Ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return Status::Timeout(std::string("processes did not report ") + what + " within 30 s: " +
                           (lagging.empty() ? std::string("none answered") : lagging) +
                           " (the secret file is left at this step; running the command again continues)");
  };
  auto has_key = [](const nlohmann::json& a, uint32_t id) {
    if (!a.contains("keys") || !a["keys"].is_array()) return false;
    for (const auto& k : a["keys"]) {
      if (k.is_number_unsigned() && k.get<uint32_t>() == id) return true;
    }
    return false;
  };
  const uint32_t old = ring->current().id;
  const auth::Keyring step1 = ring->WithNewKey();
  const uint32_t fresh = step1.keys().back().id;
  Status s = auth::WriteKeyringFile(path, step1);
  if (s.ok()) s = wait_for("the new key accepted", [&](const nlohmann::json& a) { return has_key(a, fresh); });
  const auth::Keyring step2 = *step1.WithCurrent(fresh);
  if (s.ok()) s = auth::WriteKeyringFile(path, step2);
  if (s.ok()) {
    s = wait_for("the new key current", [&](const nlohmann::json& a) { return a.value("current", 0u) == fresh; });
  }
  if (s.ok()) s = auth::WriteKeyringFile(path, step2.OnlyCurrent());
  if (s.ok()) s = wait_for("the old key dropped", [&](const nlohmann::json& a) { return !has_key(a, old); });
  if (!s.ok()) return Fail("cluster rotate-secret", s);
  std::printf("slip cluster: secret rotated from key %u to key %u in %s\n", old, fresh, path.c_str());
  return 0;
}

}  // namespace slip::cli
