#include "bench/cluster/cluster_target.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cluster/config_access.h"
#include "cluster/routing.h"
#include "cluster/cluster_config.h"
#include "replication/design.h"
#include "slip/client.h"

namespace slip::bench {
namespace {

std::string Self() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "slip" : p.string();
}

class ClusterSession final : public KvSession {
 public:
  explicit ClusterSession(Client* c) : c_(c) {}
  Status Put(std::string_view key, std::string_view value) override {
    return c_->Put(key, value);
  }
  Result<std::string> Get(std::string_view key) override {
    return c_->Get(key);
  }
  Status Del(std::string_view key) override {
    return c_->Delete(key);
  }
  bool SupportsAsync() const override { return true; }
  void PutAsync(std::string key, std::string value, std::function<void(Status)> done) override {
    c_->PutAsync(std::move(key), std::move(value), std::move(done));
  }
  void GetAsync(std::string key, std::function<void(Status)> done) override {
    c_->GetAsync(std::move(key), [done = std::move(done)](Result<std::string> r) { done(r.status()); });
  }
  void DelAsync(std::string key, std::function<void(Status)> done) override {
    c_->DeleteAsync(std::move(key), std::move(done));
  }
 private:
  Client* c_;
};

class ClusterTarget final : public KvTarget {
 public:
  ClusterTarget(ClusterTargetConfig c, bool own) : c_(std::move(c)), own_(own) {}
  ~ClusterTarget() override {
    client_.reset();
    if (own_) {
      (void)std::system((c_.slip_binary + " cluster down --dir " + c_.dir + " >/dev/null 2>&1").c_str());
      std::error_code ec;
      std::filesystem::remove_all(c_.dir, ec);
    }
  }
  Status Init() {
    if (own_) {
      const std::string up = c_.slip_binary + " cluster up --nodes " + std::to_string(c_.nodes) + " --rf " +
                             std::to_string(c_.replication) + " --design " + c_.design +
                             " --workers " + std::to_string(c_.workers) + " --provider " + c_.provider + " --pm-mb " + std::to_string(c_.pm_mb) +
                             " --dir " + c_.dir + (c_.auth ? "" : " --no-auth") +
                             " >/dev/null";
      if (std::system(up.c_str()) != 0) return Status::Unavailable("could not start a cluster in " + c_.dir);
    }
    SLIP_ASSIGN_OR_RETURN(client_, Client::Open(ClientOptions{.dir = c_.dir, .zookeeper = "", .provider = "",
                                                              .deadline = std::chrono::seconds(30), .bind_address = "", .secret_file = ""}));
    // What the cluster runs over: the provider in its configuration.
    SLIP_ASSIGN_OR_RETURN(auto store, cluster::OpenConfigStore(c_.dir, ""));
    SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig vc, store->Load());
    running_provider_ = vc.config.provider;
    pm_class_ = vc.config.pm;
    return Status::Ok();
  }
  std::string name() const override {
    return (c_.workers == 1 ? c_.design : c_.design + "/" + std::to_string(c_.workers)) + (c_.auth ? "" : "+noauth");
  }
  // The cluster's PM class (slip cluster up --pm): file = every replica
  // msyncs before a write is acknowledged (rpc-kv backups per entry,
  // one-sided backups on REPL_PERSIST); dram = PM emulated in memory.
  // Older configurations: from where the PM files live.
  std::string Durability() const override {
    if (pm_class_ == "dram") return "memory";
    if (!pm_class_.empty()) return pm_class_;
    return DurabilityOfPath(c_.dir);
  }
  std::string Describe() const override {
    const std::string where = " on this host (" + running_provider_ + (running_provider_ == "tcp" ? " loopback), " : "), ");
    if (cluster::AnyNodeServes(c_.design)) {
      return c_.design + ": " + std::to_string(c_.nodes) + " KVS node processes and one pool process" + where +
             "any node serves any key, no replicas; a write is acknowledged once its version is in the pool's region "
             "and linked (one-sided WRITE, then compare-and-swap)";
    }
    if (cluster::UsesPool(c_.design)) {
      return c_.design + ": " + std::to_string(c_.nodes) + " KVS node processes and one pool process" + where +
             "no replicas; a write is acknowledged once it is in the pool's region (batched one-sided WRITE + flush "
             "READ)";
    }
    if (cluster::UsesChain(c_.design)) {
      return c_.design + ": " + std::to_string(c_.nodes) + " slip server processes" + where + "chains of " +
             std::to_string(c_.replication) +
             " LSM engines; a write is acknowledged once every member applied it and synced it to its log (the "
             "head's WAL, the followers' replica logs or, all-compact, WALs; group-committed) (reads at the tail); "
             "only heads flush and compact (rubble), their tables written O_DIRECT|O_DSYNC into the followers' "
             "slot images";
    }
    return c_.design + ": " + std::to_string(c_.nodes) + " slip server processes" + where + "RF " +
           std::to_string(c_.replication) + "; a write is acknowledged once persistent on every replica";
  }
  Result<std::unique_ptr<KvSession>> Connect(uint32_t) override {
    return std::unique_ptr<KvSession>(new ClusterSession(client_.get()));
  }
  TargetSample Sample() override {
    TargetSample s;
    // The client library counts them: one call per operation and attempt,
    // or the steps of a one-sided one (erda: two READs per GET; RESERVE,
    // WRITE+flush READ, COMMIT per PUT).
    s.round_trips = static_cast<double>(client_->RoundTrips());
    // CPU per role, summed over the nodes (each node's executors' thread
    // clocks; backup work inside the worker is timed by the node itself).
    // RPC frames and messages, the client's and the nodes'. The first
    // sample's own STATS calls fall inside the window: a few frames among
    // thousands of operations.
    const Client::Sent sent = client_->RpcSent();
    auto stats = client_->NodeStats();
    if (!stats.ok()) return s;
    RpcSends sends{.client_frames = static_cast<double>(sent.frames),
                   .client_messages = static_cast<double>(sent.messages)};
    bool servers_count = true;
    double worker = 0, backup_worker = 0, nic = 0, control = 0, digest = 0, pool = 0, clean = 0;
    bool has_pool = false, has_clean = false;
    for (const std::string& text : *stats) {
      auto j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_discarded() || !j.contains("cpu_ns")) return s;
      if (j.contains("rpc")) {
        sends.server_frames += j["rpc"].value("frames_sent", 0.0);
        sends.server_messages += j["rpc"].value("messages_sent", 0.0);
      } else {
        servers_count = false;
      }
      const auto& cpu = j["cpu_ns"];
      worker += cpu.value("worker", 0.0) / 1e3;
      backup_worker += cpu.value("backup_worker", 0.0) / 1e3;
      nic += cpu.value("nic", 0.0) / 1e3;
      control += cpu.value("control", 0.0) / 1e3;
      digest += cpu.value("digest", 0.0) / 1e3;
      if (cpu.contains("clean")) {
        has_clean = true;
        clean += cpu.value("clean", 0.0) / 1e3;
      }
      if (cpu.contains("pool")) {
        has_pool = true;
        pool += cpu.value("pool", 0.0) / 1e3;
      }
    }
    s.cpu_us.worker = worker;
    s.cpu_us.backup_worker = backup_worker;
    s.cpu_us.nic = nic;
    s.cpu_us.control = control;
    s.cpu_us.digest = digest;
    if (has_pool) s.cpu_us.pool = pool;
    if (has_clean) s.cpu_us.clean = clean;
    if (servers_count) s.rpc_sends = sends;
    return s;
  }

 private:
  ClusterTargetConfig c_;
  bool own_;
  std::unique_ptr<Client> client_;
  std::string pm_class_;  // from the configuration once running
  std::string running_provider_;
};

}  // namespace

Result<std::unique_ptr<KvTarget>> MakeClusterTarget(const ClusterTargetConfig& config) {
  if (!cluster::UsesPool(config.design) && !cluster::UsesChain(config.design)) {
    SLIP_RETURN_IF_ERROR(replication::ParseDesign(config.design).status());
  }
  ClusterTargetConfig c = config;
  const bool own = c.dir.empty();
  // $TMPDIR picks the medium: the PM regions are files there, persisted
  // with msync — a disk flush under /tmp, nearly free on tmpfs (/dev/shm).
  if (own) {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::temp_directory_path(ec);
    if (ec) base = "/tmp";
    c.dir = (base / ("slip_bench_cluster_" + std::to_string(getpid()))).string();
  }
  if (c.slip_binary.empty()) {
    // Starting a cluster takes the `slip` program: this one when we are it
    // (`slip bench`), else $SLIP_BINARY.
    const char* env = std::getenv("SLIP_BINARY");
    const std::string self = Self();
    if (env != nullptr && *env != '\0') {
      c.slip_binary = env;
    } else if (std::filesystem::path(self).filename() == "slip") {
      c.slip_binary = self;
    } else if (own) {
      return Status::NotFound("starting a cluster needs the slip program: run `slip bench`, or set SLIP_BINARY");
    }
  }
  auto t = std::make_unique<ClusterTarget>(c, own);
  SLIP_RETURN_IF_ERROR(t->Init());
  return std::unique_ptr<KvTarget>(std::move(t));
}

}  // namespace slip::bench
