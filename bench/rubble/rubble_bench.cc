// RubbleDB's headline claims as ratios measured in one run (issue
// "RubbleDB"; docs/papers/rubbledb.md "Benchmarks"): for each replication
// factor R, the same YCSB load (and workloads A-F) through a chain in
// `rubble` mode and in `all-compact` mode (the paper's baseline), on the
// same engine shape, in one process per chain with every replica's roles
// on their own threads:
//
//   B1  compaction's share of the baseline's CPU              (paper ~72%)
//   B2  total-CPU saving of rubble over the baseline            (34/44/50% at R=2/3/4)
//   B3  followers' compaction CPU                               (exactly 0)
//   B4  the head's flush+compaction CPU, rubble / baseline      (+0.8/4.2/7.8%)
//   B5  read I/O per replica, rubble / baseline                 (0.58/0.41/0.30)
//   B6  write I/O per replica, rubble / baseline                (1.11/1.13/1.06)
//   B7  shipped bytes / ((R-1) x the head's table bytes)        (~1.0; 17/16 with padding)
//   B8  ops per CPU-second, rubble / baseline, per workload     (load 1.5x at R=3, C=1)
//   B11 (--open-loop) p99 of updates and reads at offered rates, YCSB A
//   B12 (--transport-mb) shipping 1 MB chunks one-sidedly vs through the
//       follower's application: MB/s and CPU per GB on each side
//   B13 (--kill-tail) throughput per 100 ms while the tail dies (never 0)
//
// CPU is the process's (getrusage), split into roles by thread CPU time:
// the head's requests (the client threads), each follower's apply thread,
// and each engine's flush and compaction jobs (shipping included in the
// head's). I/O is each replica's device bytes from its file counters; the
// slots the head writes count against the follower they land on.
//
//   rubble_bench [--replicas 2,3,4] [--records 200000] [--value-size 1000]
//                [--threads 4] [--workloads load,a,b,c,d,e,f] [--ops N]
//                [--dir /tmp] [--memtable-kb 4096] [--batch 1] [--modes both]
//   rubble_bench --kill-tail [--records N] [--batch B]      (B13)
//   rubble_bench --transport-mb 1024                         (B12)
//   rubble_bench --open-loop 2000,5000,10000 [--ops N]      (B11)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bench/workload/workload.h"
#include "common/histogram.h"
#include "rubble/chain.h"

namespace slip::rubble {
namespace {

double ProcessCpuS() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double ThreadCpuS() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Args {
  std::vector<int> replicas = {2, 3, 4};
  uint64_t records = 200000;
  uint32_t value_size = 1000;
  int threads = 4;
  std::vector<std::string> workloads = {"load"};
  uint64_t ops = 0;  // per workload after load (0: records / 2)
  uint32_t batch = 1;  // load: records per chain write (the paper's client sends batches of up to 1000)
  std::string dir = "/tmp";
  uint64_t memtable_kb = 4096;
  bool kill_tail = false;
  uint64_t transport_mb = 0;  // B12 instead: ship this many MB both ways
  std::vector<double> rates;  // B11 instead: YCSB A open loop at these rates (ops/s)
  std::string modes = "both";  // both | rubble | all-compact (one, for profiling)
};

// Everything a phase measured, summed over a chain's replicas.
struct Sample {
  double cpu_s = 0, wall_s = 0, client_cpu_s = 0;
  std::vector<Chain::Replica> replicas;
  uint64_t shipped = 0, ship_cpu_ns = 0;
};

Sample Take(Chain& chain, double client_cpu_s) {
  Sample s;
  s.cpu_s = ProcessCpuS();
  s.wall_s = Now();
  s.client_cpu_s = client_cpu_s;
  s.replicas = chain.replicas();
  s.shipped = chain.shipped_bytes();
  s.ship_cpu_ns = chain.ship_cpu_ns();
  return s;
}

struct Phase {
  std::string workload;
  uint64_t ops = 0;
  double cpu_s = 0, wall_s = 0;
  double head_request_s = 0, follower_request_s = 0;
  double head_jobs_s = 0, follower_jobs_s = 0;  // flush + compaction
  double compaction_s = 0;                      // all replicas' compaction alone
  double head_read = 0, head_write = 0, follower_read = 0, follower_write = 0;  // bytes per replica
  double head_table_bytes = 0, shipped = 0, ship_cpu_s = 0, head_stall_s = 0;
  uint64_t head_flushes = 0, head_compactions = 0, head_moves = 0;
  int followers = 0;
};

Phase Diff(const std::string& name, uint64_t ops, const Sample& a, const Sample& b) {
  Phase p;
  p.workload = name;
  p.ops = ops;
  p.cpu_s = b.cpu_s - a.cpu_s;
  p.wall_s = b.wall_s - a.wall_s;
  p.head_request_s = b.client_cpu_s - a.client_cpu_s;
  for (size_t i = 0; i < b.replicas.size(); ++i) {
    const auto& x = a.replicas[i];
    const auto& y = b.replicas[i];
    const double jobs = static_cast<double>(y.db.flush_cpu_ns + y.db.compaction_cpu_ns - x.db.flush_cpu_ns -
                                            x.db.compaction_cpu_ns) / 1e9;
    p.compaction_s += static_cast<double>(y.db.compaction_cpu_ns - x.db.compaction_cpu_ns) / 1e9;
    const double rd = static_cast<double>(y.read_bytes - x.read_bytes);
    const double wr = static_cast<double>(y.write_bytes - x.write_bytes);
    if (y.head) {
      p.head_jobs_s += jobs;
      p.head_read += rd;
      p.head_write += wr;
      p.head_stall_s = static_cast<double>(y.db.stall_us - x.db.stall_us) / 1e6;
      p.head_flushes = y.db.flushes - x.db.flushes;
      p.head_compactions = y.db.compactions - x.db.compactions;
      p.head_moves = y.db.trivial_moves - x.db.trivial_moves;
      p.head_table_bytes = static_cast<double>(y.db.flush_bytes + y.db.compaction_write_bytes - x.db.flush_bytes -
                                               x.db.compaction_write_bytes);
    } else if (y.alive) {
      ++p.followers;
      p.follower_jobs_s += jobs;
      p.follower_request_s += static_cast<double>(y.request_cpu_ns - x.request_cpu_ns) / 1e9;
      p.follower_read += rd;
      p.follower_write += wr;
    }
  }
  if (p.followers > 0) {
    p.follower_read /= p.followers;
    p.follower_write /= p.followers;
  }
  p.shipped = static_cast<double>(b.shipped - a.shipped);
  p.ship_cpu_s = static_cast<double>(b.ship_cpu_ns - a.ship_cpu_ns) / 1e9;
  return p;
}

// Runs `ops` operations of `spec` on `threads` threads; returns the client
// threads' CPU (the head's request role: the chain's Write runs there).
double Drive(Chain& chain, const ycsb::WorkloadSpec& spec, ycsb::InsertCounter* inserts, uint64_t ops, int threads,
             bool load, uint32_t batch, std::atomic<uint64_t>* done, std::atomic<int>* errors) {
  std::atomic<uint64_t> next{0};
  std::atomic<double> cpu{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      const double c0 = ThreadCpuS();
      ycsb::OpGenerator gen(spec, inserts);
      Random rng(1000 + t);
      std::vector<std::pair<std::string, std::string>> scan;
      uint64_t version = 0;
      while (true) {
        const uint64_t n = load ? batch : 1;
        const uint64_t first = next.fetch_add(n);
        if (first >= ops) break;
        Status s;
        if (load) {
          lsm::WriteBatch b;
          for (uint64_t i = first; i < std::min(ops, first + n); ++i) {
            const uint64_t r = inserts->Take();
            b.ops.push_back({lsm::ValueType::kValue, gen.Key(r), gen.Value(r, 0)});
          }
          const uint64_t count = b.ops.size();
          s = chain.Write(std::move(b));
          (*done) += count - 1;
        } else {
          const ycsb::Op op = gen.Next(rng);
          switch (op.type) {
            case ycsb::OpType::kRead: {
              auto v = chain.Get(gen.Key(op.record));
              s = v.ok() || v.status().Is(Code::kNotFound) ? Status::Ok() : v.status();
              break;
            }
            case ycsb::OpType::kUpdate:
            case ycsb::OpType::kInsert:
              s = chain.Put(gen.Key(op.record), gen.Value(op.record, ++version));
              break;
            case ycsb::OpType::kScan:
              scan.clear();
              s = chain.Scan(gen.Key(op.record), op.scan_len, &scan);
              break;
            case ycsb::OpType::kReadModifyWrite: {
              auto v = chain.Get(gen.Key(op.record));
              s = chain.Put(gen.Key(op.record), gen.Value(op.record, ++version));
              break;
            }
          }
        }
        if (!s.ok()) (*errors)++;
        (*done)++;
      }
      double expected = cpu.load();
      const double mine = ThreadCpuS() - c0;
      while (!cpu.compare_exchange_weak(expected, expected + mine)) {
      }
    });
  }
  for (auto& t : ts) t.join();
  return cpu.load();
}

ChainOptions Shape(const Args& a, const std::string& dir, Mode mode, int r) {
  ChainOptions o;
  o.dir = dir;
  o.mode = mode;
  o.replicas = r;
  // The notes' scaled shape: 4 MB MemTables and tables (17/16 slots), L0
  // trigger 4, 16 MB at L1, x10, 5 levels, no compression, 10 Bloom bits,
  // WAL off (the paper's load runs), direct I/O, a 64 MB block cache.
  o.db.memtable_bytes = a.memtable_kb << 10;
  o.db.target_file_bytes = a.memtable_kb << 10;
  o.db.level1_bytes = 4 * (a.memtable_kb << 10);
  o.db.wal = false;
  const uint64_t slot = ((a.memtable_kb << 10) * 17 / 16 + 4095) / 4096 * 4096;
  // Enough slots for the live data twice over (a compaction's outputs are
  // shipped before its inputs are released) and the jobs in flight.
  const uint64_t data = a.records * (a.value_size + 40) * 2;
  o.slots = {.count = static_cast<uint32_t>(std::max<uint64_t>(64, data / slot + 32)), .slot_bytes = slot};
  return o;
}

void Print(int r, const char* mode, const Phase& p) {
  std::printf("  R=%d %-11s %-5s %8.0f ops/s  cpu %7.2f s  %8.0f ops/cpu-s  | head req %6.2f jobs %6.2f | "
              "followers req %6.2f jobs %6.2f | compaction %6.2f s (%4.1f%%) | io/replica MB head r %.0f w %.0f, "
              "follower r %.0f w %.0f | shipped %.0f MB | head stalled %.1f s, %llu flushes, %llu compactions, %llu moves\n",
              r, mode, p.workload.c_str(), p.ops / p.wall_s, p.cpu_s, p.ops / p.cpu_s, p.head_request_s,
              p.head_jobs_s, p.follower_request_s, p.follower_jobs_s, p.compaction_s, 100 * p.compaction_s / p.cpu_s,
              p.head_read / 1e6, p.head_write / 1e6, p.follower_read / 1e6, p.follower_write / 1e6, p.shipped / 1e6,
              p.head_stall_s, static_cast<unsigned long long>(p.head_flushes),
              static_cast<unsigned long long>(p.head_compactions), static_cast<unsigned long long>(p.head_moves));
}

// B12 (the paper's Table 1): shipping 1 MB chunks to a follower's device
// two ways. Direct: the head writes the follower's image itself (O_DIRECT |
// O_DSYNC), the follower's CPU does nothing (NVMe-oF with target offload).
// Two-sided: the follower's application receives each chunk over TCP
// (loopback) and writes it itself (gRPC + write()). Per way: MB/s, and the
// CPU each side spends per GB shipped.
int Transport(const Args& a) {
  const uint64_t chunk = 1 << 20, total = static_cast<uint64_t>(a.transport_mb) << 20;
  const std::string dir = a.dir + "/rubble-bench-transport";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const SlotGeometry g{.count = static_cast<uint32_t>(total / chunk), .slot_bytes = chunk};
  std::string data(chunk, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131);
  std::printf("B12: %llu MB in 1 MB chunks to a follower's device, durable per chunk (O_DIRECT | O_DSYNC)\n",
              static_cast<unsigned long long>(a.transport_mb));

  {  // Direct: one-sided.
    if (Status s = CreateSlotImage(dir + "/direct.slots", g); !s.ok()) return 1;
    auto w = SlotWriter::Open(dir + "/direct.slots", g);
    if (!w.ok()) return 1;
    const double t0 = Now(), c0 = ThreadCpuS();
    for (uint32_t i = 1; i <= g.count; ++i) {
      if (Status s = (*w)->Write(i, data); !s.ok()) return 1;
    }
    const double wall = Now() - t0, head = ThreadCpuS() - c0, gb = static_cast<double>(total) / 1e9;
    std::printf("  direct      %7.0f MB/s   head %.2f core-s/GB   follower 0.00 core-s/GB (it runs no code)\n",
                total / 1e6 / wall, head / gb);
  }
  {  // Two-sided: the follower's application receives and writes.
    if (Status s = CreateSlotImage(dir + "/two-sided.slots", g); !s.ok()) return 1;
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener, 1) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      std::perror("listen");
      return 1;
    }
    std::atomic<double> follower_cpu{0};
    std::thread follower([&] {
      const double c0 = ThreadCpuS();
      const int conn = ::accept(listener, nullptr, nullptr);
      auto w = SlotWriter::Open(dir + "/two-sided.slots", g);
      std::string buf(chunk, '\0');
      for (uint32_t i = 1; i <= g.count && w.ok(); ++i) {
        size_t got = 0;
        while (got < chunk) {
          const ssize_t r = ::recv(conn, buf.data() + got, chunk - got, 0);
          if (r <= 0) break;
          got += static_cast<size_t>(r);
        }
        if (!(*w)->Write(i, buf).ok()) break;
        const char ack = 1;
        (void)::send(conn, &ack, 1, 0);
      }
      ::close(conn);
      follower_cpu = ThreadCpuS() - c0;
    });
    const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      std::perror("connect");
      return 1;
    }
    const double t0 = Now(), c0 = ThreadCpuS();
    for (uint32_t i = 1; i <= g.count; ++i) {
      size_t sent = 0;
      while (sent < chunk) {
        const ssize_t w = ::send(sock, data.data() + sent, chunk - sent, 0);
        if (w <= 0) break;
        sent += static_cast<size_t>(w);
      }
      char ack;
      if (::recv(sock, &ack, 1, 0) != 1) break;  // durable on the follower
    }
    const double wall = Now() - t0, head = ThreadCpuS() - c0;
    follower.join();
    ::close(sock);
    ::close(listener);
    const double gb = static_cast<double>(total) / 1e9;
    std::printf("  two-sided   %7.0f MB/s   head %.2f core-s/GB   follower %.2f core-s/GB\n", total / 1e6 / wall,
                head / gb, follower_cpu.load() / gb);
  }
  std::printf("  (paper, Table 1, both sides: gRPC+write() 1.51, NVMe/TCP 0.45, NVMe/RDMA 0.13 core-s/GB)\n");
  std::filesystem::remove_all(dir);
  return 0;
}

// B11: YCSB A open loop at R = 3 — each thread issues at its share of a
// target rate, latency measured from when an operation was due (so a
// stall counts against every operation it delays); p99 of updates and of
// reads per rate, both modes, after the same load.
int OpenLoop(const Args& a) {
  std::printf("B11: YCSB A open loop, R=3, %llu records x %u B, %d threads, %llu ops per rate; p99 in us\n",
              static_cast<unsigned long long>(a.records), a.value_size, a.threads,
              static_cast<unsigned long long>(a.ops ? a.ops : a.records / 2));
  for (Mode mode : {Mode::kAllCompact, Mode::kRubble}) {
    const bool rubble = mode == Mode::kRubble;
    const std::string dir = a.dir + "/rubble-bench-open";
    std::filesystem::remove_all(dir);
    auto chain = Chain::Open(Shape(a, dir, mode, 3));
    if (!chain.ok()) return 1;
    auto load = ycsb::StandardWorkload("load");
    load->records = a.records;
    load->sizes.value_bytes = a.value_size;
    ycsb::InsertCounter inserts(0);
    std::atomic<uint64_t> done{0};
    std::atomic<int> errors{0};
    Drive(**chain, *load, &inserts, a.records, a.threads, true, a.batch, &done, &errors);
    (void)(*chain)->Drain();
    auto spec = ycsb::StandardWorkload("a");
    spec->records = a.records;
    spec->sizes.value_bytes = a.value_size;
    for (double rate : a.rates) {
      const uint64_t ops = a.ops ? a.ops : a.records / 2;
      const auto before = (*chain)->replicas();
      Histogram reads, updates;
      std::mutex mu;
      std::vector<std::thread> ts;
      const double start = Now() + 0.01;
      for (int t = 0; t < a.threads; ++t) {
        ts.emplace_back([&, t] {
          ycsb::OpGenerator gen(*spec, &inserts);
          Random rng(7000 + t);
          Histogram r, u;
          const double gap = a.threads / rate;
          uint64_t version = 0;
          for (uint64_t i = 0; i < ops / a.threads; ++i) {
            const double due = start + (static_cast<double>(i) + rng.NextDouble()) * gap;
            const double now = Now();
            if (due > now) std::this_thread::sleep_for(std::chrono::duration<double>(due - now));
            const ycsb::Op op = gen.Next(rng);
            if (op.type == ycsb::OpType::kRead) {
              (void)(*chain)->Get(gen.Key(op.record));
              r.Record(static_cast<uint64_t>((Now() - due) * 1e6));
            } else {
              (void)(*chain)->Put(gen.Key(op.record), gen.Value(op.record, ++version));
              u.Record(static_cast<uint64_t>((Now() - due) * 1e6));
            }
          }
          std::lock_guard<std::mutex> l(mu);
          reads.Merge(r);
          updates.Merge(u);
        });
      }
      for (auto& t : ts) t.join();
      const auto after = (*chain)->replicas();
      char line[320];
      std::snprintf(line, sizeof line,
                    "  %-11s %8.0f ops/s offered   update p50 %6llu p99 %8llu   read p50 %6llu p99 %8llu   (head "
                    "stalled %.2f s)",
                    rubble ? "rubble" : "all-compact", rate, static_cast<unsigned long long>(updates.Percentile(0.5)),
                    static_cast<unsigned long long>(updates.Percentile(0.99)),
                    static_cast<unsigned long long>(reads.Percentile(0.5)),
                    static_cast<unsigned long long>(reads.Percentile(0.99)),
                    static_cast<double>(after[0].db.stall_us - before[0].db.stall_us) / 1e6);
      std::printf("%s\n", line);
      std::fflush(stdout);
    }
    chain->reset();
    std::filesystem::remove_all(dir);
  }
  return 0;
}

int KillTail(const Args& a) {
  // B13: R=3 rubble under the load workload; the tail dies a third of the
  // way in; throughput per 100 ms, never 0.
  const std::string dir = a.dir + "/rubble-bench-kill";
  std::filesystem::remove_all(dir);
  auto chain = Chain::Open(Shape(a, dir, Mode::kRubble, 3));
  if (!chain.ok()) {
    std::fprintf(stderr, "%s\n", chain.status().ToString().c_str());
    return 1;
  }
  auto spec = ycsb::StandardWorkload("load");
  spec->records = a.records;
  spec->sizes.value_bytes = a.value_size;
  ycsb::InsertCounter inserts(0);
  std::atomic<uint64_t> done{0};
  std::atomic<int> errors{0};
  std::thread driver([&] { Drive(**chain, *spec, &inserts, a.records, a.threads, true, a.batch, &done, &errors); });
  std::printf("B13: R=3 rubble, YCSB load of %llu x %u B, %d threads; the tail is killed at 1/3 of the records\n",
              static_cast<unsigned long long>(a.records), a.value_size, a.threads);
  // Per 100 ms, and the lowest one-second window before and after the
  // kill: writes also stall (level 0 full) with no failure at all.
  std::vector<uint64_t> counts;  // done, every 100 ms
  size_t kill_at = 0;
  const double t0 = Now();
  while (done.load() < a.records) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const uint64_t d = done.load();
    counts.push_back(d);
    const uint64_t prev = counts.size() > 1 ? counts[counts.size() - 2] : 0;
    std::printf("  t=%5.1f s  %8.0f ops/s\n", Now() - t0, static_cast<double>(d - prev) * 10);
    if (kill_at == 0 && d >= a.records / 3) {
      if (Status s = (*chain)->KillTail(); !s.ok()) std::fprintf(stderr, "kill: %s\n", s.ToString().c_str());
      kill_at = counts.size();
      std::printf("  -- tail killed; %d replicas live\n", (*chain)->live_replicas());
    }
  }
  driver.join();
  auto lowest_second = [&](size_t from, size_t to) {
    double low = 1e18;
    for (size_t i = from; i + 10 <= to; ++i) {
      low = std::min(low, static_cast<double>(counts[i + 9] - (i > 0 ? counts[i - 1] : 0)));
    }
    return low;
  };
  std::printf("B13: lowest one-second throughput before the kill %.0f ops/s, after it %.0f ops/s (paper: never 0); "
              "%d errors\n",
              lowest_second(0, kill_at), lowest_second(kill_at, counts.size() - 1), errors.load());
  chain->reset();
  std::filesystem::remove_all(dir);
  return 0;
}

int Main(const Args& a) {
  if (a.kill_tail) return KillTail(a);
  if (a.transport_mb > 0) return Transport(a);
  if (!a.rates.empty()) return OpenLoop(a);
  std::printf("rubble_bench: %llu records x %u B values, %d client threads (load in batches of %u), MemTables/tables "
              "%llu KB, one process per chain, %u cores\n",
              static_cast<unsigned long long>(a.records), a.value_size, a.threads, a.batch,
              static_cast<unsigned long long>(a.memtable_kb), std::thread::hardware_concurrency());
  for (int r : a.replicas) {
    Phase phases[2][8];
    size_t n = 0;
    for (Mode mode : {Mode::kAllCompact, Mode::kRubble}) {
      const int m = mode == Mode::kRubble ? 1 : 0;
      if (a.modes != "both" && a.modes != (m ? "rubble" : "all-compact")) continue;
      const std::string dir = a.dir + "/rubble-bench-" + std::to_string(r) + (m ? "-rubble" : "-base");
      std::filesystem::remove_all(dir);
      auto chain = Chain::Open(Shape(a, dir, mode, r));
      if (!chain.ok()) {
        std::fprintf(stderr, "open: %s\n", chain.status().ToString().c_str());
        return 1;
      }
      ycsb::InsertCounter inserts(0);
      n = 0;
      double client = 0;
      for (const auto& w : a.workloads) {
        auto spec = ycsb::StandardWorkload(w);
        if (!spec.ok()) {
          std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
          return 2;
        }
        spec->records = a.records;
        spec->sizes.value_bytes = a.value_size;
        const bool load = w == "load";
        const uint64_t ops = load ? a.records : (a.ops ? a.ops : a.records / 2);
        std::atomic<uint64_t> done{0};
        std::atomic<int> errors{0};
        const Sample before = Take(**chain, client);
        client += Drive(**chain, *spec, &inserts, ops, a.threads, load, a.batch, &done, &errors);
        // The work a phase leaves (its flushes and compactions) is its own.
        if (Status s = (*chain)->Drain(); !s.ok()) std::fprintf(stderr, "drain: %s\n", s.ToString().c_str());
        const Sample after = Take(**chain, client);
        phases[m][n] = Diff(w, ops, before, after);
        Print(r, m ? "rubble" : "all-compact", phases[m][n]);
        if (errors.load() > 0) std::printf("    %d operations failed\n", errors.load());
        ++n;
      }
      chain->reset();
      std::filesystem::remove_all(dir);
    }
    if (a.modes != "both") continue;
    const Phase& b = phases[0][0];
    const Phase& rb = phases[1][0];
    std::printf("R=%d, %s:\n", r, b.workload.c_str());
    std::printf("  B1 compaction share of the baseline's CPU      %5.1f%%   (paper: ~72%%)\n",
                100 * b.compaction_s / b.cpu_s);
    std::printf("  B2 total CPU saved by rubble                   %5.1f%%   (paper: 34.4/44.3/50.5%% at R=2/3/4)\n",
                100 * (1 - rb.cpu_s / b.cpu_s));
    std::printf("  B3 followers' flush+compaction CPU              %.3f s rubble, %.2f s baseline   (paper: 0)\n",
                rb.follower_jobs_s, b.follower_jobs_s);
    std::printf("  B4 head's flush+compaction CPU rubble/baseline  %.3f   (paper: 1.008/1.042/1.078); shipping %.2f s "
                "of it, %.2f core-s/GB (paper's NIC offload: 0.13)\n",
                rb.head_jobs_s / b.head_jobs_s, rb.ship_cpu_s, rb.ship_cpu_s / (rb.shipped / 1e9));
    std::printf("  B5 read I/O per replica rubble/baseline         %.3f   (paper: 0.58/0.41/0.30)\n",
                (rb.head_read + rb.follower_read * rb.followers) / (b.head_read + b.follower_read * b.followers));
    std::printf("  B6 write I/O per replica rubble/baseline        %.3f   (paper: 1.11/1.13/1.06)\n",
                (rb.head_write + rb.follower_write * rb.followers) / (b.head_write + b.follower_write * b.followers));
    std::printf("  B7 shipped / ((R-1) x head table bytes)         %.3f   (paper: ~1; 17/16 = 1.0625 with padding)\n",
                rb.shipped / ((r - 1) * rb.head_table_bytes));
    for (size_t i = 0; i < n; ++i) {
      const Phase& x = phases[0][i];
      const Phase& y = phases[1][i];
      std::printf("  B8 %-5s ops per CPU-s rubble/baseline        %.2fx  (%.0f vs %.0f; throughput %.2fx)\n",
                  x.workload.c_str(), (y.ops / y.cpu_s) / (x.ops / x.cpu_s), y.ops / y.cpu_s, x.ops / x.cpu_s,
                  (y.ops / y.wall_s) / (x.ops / x.wall_s));
    }
  }
  return 0;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace
}  // namespace slip::rubble

int main(int argc, char** argv) {
  slip::rubble::Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (arg == "--kill-tail") {
      a.kill_tail = true;
      continue;
    }
    if (arg == "--replicas") {
      a.replicas.clear();
      for (const auto& x : slip::rubble::Split(v)) a.replicas.push_back(std::atoi(x.c_str()));
    } else if (arg == "--records") {
      a.records = std::strtoull(v, nullptr, 10);
    } else if (arg == "--value-size") {
      a.value_size = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    } else if (arg == "--threads") {
      a.threads = std::atoi(v);
    } else if (arg == "--workloads") {
      a.workloads = slip::rubble::Split(v);
    } else if (arg == "--ops") {
      a.ops = std::strtoull(v, nullptr, 10);
    } else if (arg == "--dir") {
      a.dir = v;
    } else if (arg == "--open-loop") {
      for (const auto& x : slip::rubble::Split(v)) a.rates.push_back(std::atof(x.c_str()));
    } else if (arg == "--transport-mb") {
      a.transport_mb = std::strtoull(v, nullptr, 10);
    } else if (arg == "--batch") {
      a.batch = static_cast<uint32_t>(std::max(1ul, std::strtoul(v, nullptr, 10)));
    } else if (arg == "--modes") {
      a.modes = v;
    } else if (arg == "--memtable-kb") {
      a.memtable_kb = std::strtoull(v, nullptr, 10);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
    ++i;
  }
  if (a.workloads.empty() || a.workloads.front() != "load") a.workloads.insert(a.workloads.begin(), "load");
  return slip::rubble::Main(a);
}
