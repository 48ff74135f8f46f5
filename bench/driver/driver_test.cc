// Driver tests on fake in-memory targets. Nothing here asserts an absolute
// rate: the checks are relations that hold on any machine (throughput is
// ops / window; an overloaded open loop shows queueing that a closed loop
// hides).
#include "bench/driver/driver.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "bench/driver/report.h"

namespace slip::bench {
namespace {

// A map behind a mutex; optionally each op sleeps (a target with a fixed
// service time and one server thread: ops are serialised on `serve_`).
struct FakeStore {
  std::mutex mu, serve;
  std::map<std::string, std::string, std::less<>> kv;
  std::chrono::microseconds service{0};
  bool scans = true;
  uint64_t ops = 0;

  void Serve() {
    if (service.count() == 0) return;
    std::lock_guard<std::mutex> g(serve);
    std::this_thread::sleep_for(service);
  }
};

class FakeSession final : public KvSession {
 public:
  explicit FakeSession(FakeStore* s) : s_(s) {}
  Status Put(std::string_view k, std::string_view v) override {
    s_->Serve();
    std::lock_guard<std::mutex> g(s_->mu);
    ++s_->ops;
    s_->kv[std::string(k)] = std::string(v);
    return Status::Ok();
  }
  Result<std::string> Get(std::string_view k) override {
    s_->Serve();
    std::lock_guard<std::mutex> g(s_->mu);
    ++s_->ops;
    auto it = s_->kv.find(k);
    if (it == s_->kv.end()) return Status::NotFound();
    return it->second;
  }
  Status Del(std::string_view k) override {
    std::lock_guard<std::mutex> g(s_->mu);
    return s_->kv.erase(std::string(k)) ? Status::Ok() : Status::NotFound();
  }
  Status Scan(std::string_view start, uint32_t n, std::vector<std::pair<std::string, std::string>>* out) override {
    if (!s_->scans) return KvSession::Scan(start, n, out);
    std::lock_guard<std::mutex> g(s_->mu);
    ++s_->ops;
    for (auto it = s_->kv.lower_bound(start); it != s_->kv.end() && out->size() < n; ++it) out->push_back(*it);
    return Status::Ok();
  }

 private:
  FakeStore* s_;
};

class FakeTarget final : public KvTarget {
 public:
  FakeStore store;
  bool counts_sends = false;  // RPC-like: per op served, 1 client frame in 1/2 message, 2 server frames in 1/4
  std::string name() const override { return "fake"; }
  std::string Describe() const override { return "in-memory map (test)"; }
  std::string Durability() const override { return "memory"; }
  Result<std::unique_ptr<KvSession>> Connect(uint32_t) override {
    return std::unique_ptr<KvSession>(new FakeSession(&store));
  }
  TargetSample Sample() override {
    TargetSample s;
    std::lock_guard<std::mutex> g(store.mu);
    s.cpu_us.worker = static_cast<double>(store.ops);  // "1 us per op served"
    if (counts_sends) {
      const double n = static_cast<double>(store.ops);
      s.rpc_sends = RpcSends{.client_frames = n, .client_messages = n / 2, .server_frames = 2 * n, .server_messages = n / 4};
    }
    return s;
  }
};

DriverOptions Options(const char* workload, double seconds, double warmup, uint32_t threads = 2) {
  DriverOptions o;
  o.workload = ycsb::StandardWorkload(workload).value();
  o.workload.records = 1000;
  o.threads = threads;
  o.seconds = seconds;
  o.warmup = warmup;
  return o;
}

uint64_t Counted(const RunReport& r) {
  uint64_t n = 0;
  for (auto& h : r.latency_ns) n += h.count();
  return n;
}

TEST(DriverTest, ThroughputIsCompletedOpsOverMeasuredTime) {
  FakeTarget t;
  auto r = RunWorkload(t, Options("a", 0.4, 0.2));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->ops, 0u);
  EXPECT_DOUBLE_EQ(r->measured_seconds, 0.4);
  EXPECT_DOUBLE_EQ(r->throughput_ops, static_cast<double>(r->ops) / r->measured_seconds);
  EXPECT_EQ(Counted(*r), r->ops);
  EXPECT_EQ(r->errors, 0u);
  EXPECT_EQ(r->not_found, 0u);  // the load phase inserted every record read
  // Warm-up and load ops were served but not counted.
  EXPECT_GT(t.store.ops, r->ops + 1000);
  // Target counters are divided by the ops of the window: the fake serves
  // about as many ops in the window as were counted.
  ASSERT_TRUE(r->cpu_us_per_op.worker.has_value());
  EXPECT_GT(*r->cpu_us_per_op.worker, 0.8);
  EXPECT_LT(*r->cpu_us_per_op.worker, 1.25);
  EXPECT_FALSE(r->cpu_us_per_op.clean.has_value());
  EXPECT_FALSE(r->rtts_per_op.has_value());
  EXPECT_GT(r->client_cpu_us, 0);
}

TEST(DriverTest, MixFollowsTheWorkload) {
  FakeTarget t;
  auto f = RunWorkload(t, Options("f", 0.2, 0));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_GT(f->latency_ns[static_cast<int>(ycsb::OpType::kReadModifyWrite)].count(), 0u);
  EXPECT_GT(f->latency_ns[static_cast<int>(ycsb::OpType::kRead)].count(), 0u);
  EXPECT_EQ(f->latency_ns[static_cast<int>(ycsb::OpType::kUpdate)].count(), 0u);

  FakeTarget l;
  auto load = RunWorkload(l, Options("load", 0.2, 0));
  ASSERT_TRUE(load.ok()) << load.status().ToString();
  EXPECT_EQ(load->ops, load->latency_ns[static_cast<int>(ycsb::OpType::kInsert)].count());
  // The load workload's run is the inserts: nothing was loaded before it.
  EXPECT_GE(l.store.kv.size(), load->ops);
}

TEST(DriverTest, ScanWorkloadNeedsScans) {
  FakeTarget t;
  auto ok = RunWorkload(t, Options("e", 0.1, 0));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_GT(ok->latency_ns[static_cast<int>(ycsb::OpType::kScan)].count(), 0u);

  FakeTarget no;
  no.store.scans = false;
  auto r = RunWorkload(no, Options("e", 0.1, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().Is(Code::kNotSupported)) << r.status().ToString();
  EXPECT_NE(r.status().message().find("scan"), std::string::npos);
}

// Open loop: latency counts from the intended send time. A target with a
// 1 ms service time and one server thread serves < 1000 ops/s; offered
// 3000 ops/s, the queue (and the latency) keeps growing, while a closed
// loop on the same target reports about the service time.
TEST(DriverTest, OpenLoopLatencyIsFromIntendedSendTime) {
  auto run = [](double rate, double seconds) {
    FakeTarget t;
    t.store.service = std::chrono::microseconds(1000);
    DriverOptions o = Options("c", seconds, 0, 1);
    o.workload.records = 50;  // the load phase pays the service time too
    o.rate = rate;
    auto r = RunWorkload(t, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->latency_ns[static_cast<int>(ycsb::OpType::kRead)] : Histogram();
  };
  const Histogram closed = run(0, 0.3);
  const Histogram under = run(100, 0.5);
  const Histogram over = run(3000, 1.0);
  ASSERT_GT(closed.count(), 0u);
  ASSERT_GT(under.count(), 0u);
  ASSERT_GT(over.count(), 0u);
  // Below capacity the open loop sees about the service time...
  EXPECT_LT(under.Percentile(0.5), 10 * closed.Percentile(0.5));
  // ...above it, queueing: late ops are charged from when they were due.
  EXPECT_GT(over.Percentile(0.5), 20 * closed.Percentile(0.5));
  EXPECT_GT(over.max(), 100'000'000u);  // >= 100 ms behind after ~1 s at 3x overload
}

TEST(ReportTest, JsonHasExactlyTheReportedFields) {
  FakeTarget t;
  auto r = RunWorkload(t, Options("b", 0.1, 0));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const nlohmann::json j = ReportJson(*r);
  std::set<std::string> want(ReportFields().begin(), ReportFields().end()), have;
  for (auto& [k, v] : j.items()) have.insert(k);
  EXPECT_EQ(have, want);
  EXPECT_EQ(j["design"], "fake");
  EXPECT_EQ(j["durability"], "memory");
  EXPECT_EQ(j["workload"], "b");
  EXPECT_TRUE(j["parameters"].is_object());
  EXPECT_TRUE(j["throughput_ops"].is_number());
  for (const char* op : {"read", "update", "insert", "scan", "rmw"}) ASSERT_TRUE(j["latency_us"].contains(op)) << op;
  for (const char* p : {"p50", "p90", "p99", "p999", "max"}) EXPECT_TRUE(j["latency_us"]["read"][p].is_number()) << p;
  EXPECT_TRUE(j["latency_us"]["scan"].is_null());  // workload b has no scans
  EXPECT_EQ(j["cpu_us_per_op"].size(), CpuRoles().size());
  for (const char* role : CpuRoles()) EXPECT_TRUE(j["cpu_us_per_op"].contains(role)) << role;
  EXPECT_TRUE(j["cpu_us_per_op"]["client"].is_number());
  EXPECT_TRUE(j["cpu_us_per_op"]["worker"].is_number());
  EXPECT_TRUE(j["cpu_us_per_op"]["nic"].is_null());  // the fake does not measure it
  EXPECT_TRUE(j["rtts_per_op"].is_null());
  EXPECT_TRUE(j["dlwa"].is_null());
  EXPECT_TRUE(j["rpc_sends_per_op"].is_null());  // not counted by the fake
}

// RPC frames and messages are divided by the window's operations, the
// client's and the servers' apart.
TEST(DriverTest, RpcSendsAreCountedPerOperation) {
  FakeTarget t;
  t.counts_sends = true;
  auto r = RunWorkload(t, Options("a", 0.4, 0.1));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->rpc_sends_per_op.has_value());
  const RpcSends& s = *r->rpc_sends_per_op;
  auto near = [](double got, double want) { return got > 0.8 * want && got < 1.25 * want; };
  EXPECT_TRUE(near(s.client_frames, 1)) << s.client_frames;
  EXPECT_TRUE(near(s.client_messages, 0.5)) << s.client_messages;
  EXPECT_TRUE(near(s.server_frames, 2)) << s.server_frames;
  EXPECT_TRUE(near(s.server_messages, 0.25)) << s.server_messages;
  const nlohmann::json j = ReportJson(*r);
  EXPECT_DOUBLE_EQ(j["rpc_sends_per_op"]["server_frames"].get<double>(), s.server_frames);
  EXPECT_DOUBLE_EQ(j["rpc_sends_per_op"]["client_messages"].get<double>(), s.client_messages);
}

// A session whose calls take `latency` of "network" each, any number at
// once: the asynchronous calls complete from a thread of their own.
class LatencySession final : public KvSession {
 public:
  explicit LatencySession(std::chrono::microseconds latency) : latency_(latency) {}
  Status Put(std::string_view, std::string_view) override { return Sleep(); }
  Result<std::string> Get(std::string_view) override {
    SLIP_RETURN_IF_ERROR(Sleep());
    return std::string("v");
  }
  Status Del(std::string_view) override { return Sleep(); }
  bool SupportsAsync() const override { return true; }
  void PutAsync(std::string, std::string, std::function<void(Status)> done) override { Later(std::move(done)); }
  void GetAsync(std::string, std::function<void(Status)> done) override { Later(std::move(done)); }
  void DelAsync(std::string, std::function<void(Status)> done) override { Later(std::move(done)); }

 private:
  Status Sleep() {
    std::this_thread::sleep_for(latency_);
    return Status::Ok();
  }
  void Later(std::function<void(Status)> done) {
    std::thread([l = latency_, done = std::move(done)] {
      std::this_thread::sleep_for(l);
      done(Status::Ok());
    }).detach();
  }
  std::chrono::microseconds latency_;
};

class LatencyTarget final : public KvTarget {
 public:
  std::string name() const override { return "latency"; }
  std::string Describe() const override { return "fixed latency (test)"; }
  std::string Durability() const override { return "memory"; }
  Result<std::unique_ptr<KvSession>> Connect(uint32_t) override {
    return std::unique_ptr<KvSession>(new LatencySession(std::chrono::milliseconds(2)));
  }
  TargetSample Sample() override { return {}; }
};

TEST(DriverTest, PipeliningKeepsDepthOpsInFlight) {
  LatencyTarget t;
  DriverOptions o = Options("a", 0.5, 0.1, 1);
  o.workload.records = 50;
  auto serial = RunWorkload(t, o);
  ASSERT_TRUE(serial.ok()) << serial.status().ToString();
  o.depth = 8;
  auto piped = RunWorkload(t, o);
  ASSERT_TRUE(piped.ok()) << piped.status().ToString();
  EXPECT_EQ(piped->options.depth, 8u);
  EXPECT_EQ(Counted(*piped), piped->ops);
  EXPECT_EQ(piped->errors, 0u);
  // Eight 2 ms calls at a time instead of one: several times the throughput
  // whatever the machine (each call still waits its 2 ms).
  EXPECT_GT(piped->throughput_ops, 3 * serial->throughput_ops)
      << serial->throughput_ops << " vs " << piped->throughput_ops;
  EXPECT_GE(piped->latency_ns[static_cast<int>(ycsb::OpType::kRead)].Percentile(0.5), 2'000'000u);
}

TEST(DriverTest, PipeliningNeedsAsynchronousCallsAndAClosedLoop) {
  FakeTarget sync_only;
  DriverOptions o = Options("a", 0.1, 0);
  o.depth = 4;
  auto r = RunWorkload(sync_only, o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().Is(Code::kInvalidArgument)) << r.status().ToString();
  LatencyTarget t;
  o.rate = 100;
  EXPECT_TRUE(RunWorkload(t, o).status().Is(Code::kInvalidArgument));
  o.rate = 0;
  o.depth = 0;
  EXPECT_TRUE(RunWorkload(t, o).status().Is(Code::kInvalidArgument));
}

TEST(DurabilityTest, TmpfsIsMemoryAndPathsNeedNotExistYet) {
  EXPECT_EQ(DurabilityOfPath("/dev/shm"), "memory");
  EXPECT_EQ(DurabilityOfPath("/dev/shm/not/yet/there"), "memory");
}

TEST(DriverTest, RejectsBadOptions) {
  FakeTarget t;
  EXPECT_FALSE(RunWorkload(t, Options("a", 0, 0)).ok());
  EXPECT_FALSE(RunWorkload(t, Options("a", 0.1, 0, 0)).ok());
}

}  // namespace
}  // namespace slip::bench
