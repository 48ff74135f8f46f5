// Redis as the replicated in-memory peer: one primary and N replicas
// (replicaof) on loopback, no persistence (appendonly off, no snapshots).
// Plain Redis acknowledges a write before any replica has it; `redis-wait`
// follows each write with WAIT N 0, which returns once all N replicas
// acknowledged it — the closest Redis gets to "acked = on every replica",
// though only in their memory (nothing is fsync'ed anywhere). `redis-wait-aof`
// turns on every server's append-only file with appendfsync always: the
// primary fsyncs each write before it answers. (Redis 7.0 has no WAITAOF,
// so WAIT confirms the replicas have the write, not that they fsynced it.)
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <filesystem>
#include <thread>

#include "bench/peers/peers.h"
#include "bench/peers/server_process.h"

namespace slip::bench {
namespace {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;
struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextDeleter>;

Result<Context> Dial(uint16_t port) {
  timeval tv{5, 0};
  Context c(redisConnectWithTimeout("127.0.0.1", port, tv));
  if (!c) return Status::Unavailable("redis: out of memory");
  if (c->err) return Status::Unavailable("redis connect 127.0.0.1:" + std::to_string(port) + ": " + c->errstr);
  // Replies are bounded by the command timeout too: a stuck server fails the
  // op instead of hanging the run (WAIT 2 0 itself may block only as long).
  redisSetTimeout(c.get(), timeval{30, 0});
  return c;
}

// One command with binary-safe arguments.
Result<Reply> Command(redisContext* c, std::initializer_list<std::string_view> args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (auto a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  Reply r(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
  if (!r) return Status::Unavailable(std::string("redis: ") + (c->err ? c->errstr : "no reply"));
  if (r->type == REDIS_REPLY_ERROR) return Status::IoError("redis: " + std::string(r->str, r->len));
  return r;
}

// A field of an INFO reply ("name:value" lines).
std::optional<double> InfoField(const std::string& info, const std::string& name) {
  const std::string needle = "\n" + name + ":";
  const std::string text = "\n" + info;
  const size_t at = text.find(needle);
  if (at == std::string::npos) return std::nullopt;
  return std::strtod(text.c_str() + at + needle.size(), nullptr);
}

class RedisSession final : public KvSession {
 public:
  RedisSession(Context c, int wait_replicas) : c_(std::move(c)), wait_(wait_replicas) {}

  Status Put(std::string_view key, std::string_view value) override {
    ++rtts_;
    auto r = Command(c_.get(), {"SET", key, value});
    if (!r.ok()) return r.status();
    return Wait();
  }
  Result<std::string> Get(std::string_view key) override {
    ++rtts_;
    auto r = Command(c_.get(), {"GET", key});
    if (!r.ok()) return r.status();
    if ((*r)->type == REDIS_REPLY_NIL) return Status::NotFound();
    return std::string((*r)->str, (*r)->len);
  }
  Status Del(std::string_view key) override {
    ++rtts_;
    auto r = Command(c_.get(), {"DEL", key});
    if (!r.ok()) return r.status();
    SLIP_RETURN_IF_ERROR(Wait());
    return (*r)->integer > 0 ? Status::Ok() : Status::NotFound();
  }
  uint64_t round_trips() const override { return rtts_; }

 private:
  Status Wait() {
    if (wait_ == 0) return Status::Ok();
    ++rtts_;
    const std::string n = std::to_string(wait_);
    auto r = Command(c_.get(), {"WAIT", n, "0"});
    if (!r.ok()) return r.status();
    if ((*r)->integer < wait_)
      return Status::Unavailable("WAIT: only " + std::to_string((*r)->integer) + " replicas acknowledged");
    return Status::Ok();
  }

  Context c_;
  int wait_;
  uint64_t rtts_ = 0;
};

class RedisTarget final : public KvTarget {
 public:
  RedisTarget(RedisTargetOptions o, std::unique_ptr<TempDir> tmp) : options_(o), tmp_(std::move(tmp)) {}

  Status Start() {
    SLIP_ASSIGN_OR_RETURN(const std::string bin, FindBinary("redis-server", "redis-server"));
    SLIP_ASSIGN_OR_RETURN(ports_, FreeLoopbackPorts(1 + options_.replicas));
    for (int i = 0; i <= options_.replicas; ++i) {
      const std::string dir = tmp_->path() + "/" + std::to_string(i);
      std::filesystem::create_directories(dir);
      std::vector<std::string> args = {bin, "--port", std::to_string(ports_[i]), "--bind", "127.0.0.1",
                                        "--save", "", "--appendonly", options_.aof ? "yes" : "no",
                                        "--appendfsync", "always", "--dir", dir,
                                        "--daemonize", "no", "--protected-mode", "no",
                                        // Sync each replica at once instead of waiting 5 s
                                        // for more replicas to share one transfer.
                                        "--repl-diskless-sync-delay", "0"};
      if (i > 0) args.insert(args.end(), {"--replicaof", "127.0.0.1", std::to_string(ports_[0])});
      SLIP_ASSIGN_OR_RETURN(auto server, ServerProcess::Start(args, dir + ".log"));
      servers_.push_back(std::move(server));
    }
    for (size_t i = 0; i < servers_.size(); ++i) {
      Status s = WaitForPort(ports_[i], 10);
      if (!s.ok()) return Died(i, s);
      SLIP_ASSIGN_OR_RETURN(auto c, Dial(ports_[i]));
      control_.push_back(std::move(c));
    }
    // Ready when the primary sees every replica online (initial sync done).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (true) {
      auto info = Info(0, "replication");
      if (!info.ok()) return Died(0, info.status());
      size_t online = 0;
      for (size_t at = 0; (at = info->find("state=online", at)) != std::string::npos; ++at) ++online;
      if (online >= static_cast<size_t>(options_.replicas)) break;
      for (size_t i = 0; i < servers_.size(); ++i)
        if (!servers_[i]->Alive()) return Died(i, Status::Unavailable("exited"));
      if (std::chrono::steady_clock::now() > deadline)
        return Status::Timeout("redis replicas did not come online within 20 s: " + servers_[1]->LogTail());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto server = Info(0, "server");
    if (server.ok()) {
      const size_t at = server->find("redis_version:");
      if (at != std::string::npos) version_ = server->substr(at + 14, server->find_first_of("\r\n", at) - at - 14);
    }
    return Status::Ok();
  }

  std::string name() const override {
    return std::string(options_.wait ? "redis-wait" : "redis") + (options_.aof ? "-aof" : "");
  }
  std::string Durability() const override { return options_.aof ? DurabilityOfPath(tmp_->path()) : "memory"; }
  std::string Describe() const override {
    std::string d = "redis-server " + version_ + ": primary + " + std::to_string(options_.replicas) +
                    " replicas (replicaof) on 127.0.0.1, " +
                    (options_.aof ? "AOF with appendfsync always on each (fsync before every answer); "
                                  : "no persistence; ");
    if (options_.wait && options_.aof)
      return d + "each write then WAIT " + std::to_string(options_.replicas) +
             " 0: acked once fsync'd on the primary and received by every replica (Redis 7.0 has no "
             "WAITAOF to await the replicas' fsync)";
    if (options_.wait)
      return d + "each write then WAIT " + std::to_string(options_.replicas) +
             " 0: acked once every replica has it in memory";
    return d + "acked by the primary before any replica has it";
  }
  Result<std::unique_ptr<KvSession>> Connect(uint32_t) override {
    SLIP_ASSIGN_OR_RETURN(auto c, Dial(ports_[0]));
    return std::unique_ptr<KvSession>(new RedisSession(std::move(c), options_.wait ? options_.replicas : 0));
  }
  TargetSample Sample() override {
    TargetSample s;
    s.counts_round_trips = true;
    double backup = 0, bytes = 0;
    bool cpu_ok = true, bytes_ok = true;
    for (size_t i = 0; i < servers_.size(); ++i) {
      auto cpu = servers_[i]->CpuUs();
      if (!cpu.ok()) cpu_ok = false;
      else if (i == 0) s.cpu_us.worker = *cpu;
      else backup += *cpu;
      // Loopback TCP payload (no headers) counted once, where it is
      // received: every server's input (INFO's total_net_input_bytes
      // already includes the replication stream a replica reads), plus what
      // the primary sends its clients (its output minus the replication
      // stream). Replicas' acks are in the primary's input; the few kB of
      // these INFO calls are included.
      auto stats = Info(i, "stats");
      auto in = stats.ok() ? InfoField(*stats, "total_net_input_bytes") : std::nullopt;
      auto out = stats.ok() ? InfoField(*stats, "total_net_output_bytes") : std::nullopt;
      auto repl_out = stats.ok() ? InfoField(*stats, "total_net_repl_output_bytes") : std::nullopt;
      if (!in || !out || !repl_out) bytes_ok = false;
      else bytes += *in + (i == 0 ? *out - *repl_out : 0);
    }
    if (cpu_ok && options_.replicas > 0) s.cpu_us.backup_worker = backup;
    if (!cpu_ok) s.cpu_us.worker.reset();
    if (bytes_ok) s.fabric_bytes = bytes;
    return s;
  }

 private:
  Result<std::string> Info(size_t i, const char* section) {
    SLIP_ASSIGN_OR_RETURN(auto r, Command(control_[i].get(), {"INFO", section}));
    return std::string(r->str, r->len);
  }
  Status Died(size_t i, const Status& s) {
    return Status(s.code(), "redis-server " + std::string(i == 0 ? "primary" : "replica") + " on port " +
                                std::to_string(ports_[i]) + ": " + s.message() + "; log: " +
                                servers_[i]->LogTail());
  }

  RedisTargetOptions options_;
  // Destroyed bottom-up: connections, then servers, then their directory.
  std::unique_ptr<TempDir> tmp_;
  std::vector<uint16_t> ports_;
  std::vector<std::unique_ptr<ServerProcess>> servers_;
  std::vector<Context> control_;
  std::string version_ = "?";
};

}  // namespace

Result<std::unique_ptr<KvTarget>> MakeRedisTarget(const RedisTargetOptions& o) {
  if (o.replicas < 0) return Status::InvalidArgument("replicas must not be negative");
  SLIP_ASSIGN_OR_RETURN(auto tmp, TempDir::Create("slip-bench-redis-"));
  auto t = std::make_unique<RedisTarget>(o, std::move(tmp));
  SLIP_RETURN_IF_ERROR(t->Start());  // on error, `t` stops whatever started
  return std::unique_ptr<KvTarget>(std::move(t));
}

}  // namespace slip::bench
