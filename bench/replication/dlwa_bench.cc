// Device-level write amplification at one backup fed by many write streams
// (docs/papers/rowan.md §6.2, the paper's Fig. 2 and §5.5): the real replication
// code on the simulated fabric, every range the fabric persists at the
// backup fed to the Optane media model.
//
// `streams` senders (primaries' worker threads) each replicate fixed-size
// log entries to backup node 0, one write in flight per sender, for
// `writes` entries each. RWrite-KV and Batch-KV keep one remote log per
// sender, so the backup's DIMMs see `streams` interleaved sequential
// streams; Rowan-KV lands everything in one multi-receive log, one stream.
//
// Senders are closed loops that issue their next write a think time of
// `think` x U[0.4, 1.6] after the previous acknowledgement: the arrival
// process the media model was calibrated with (docs/papers/rowan.md §6 item 2,
// "1 +- 0.6 time units"). Without it every sender moves in lockstep on
// virtual time and LRU degenerates to evicting every line (DLWA 4.0).
//
//   dlwa_bench [--streams 144] [--writes 300] [--entry 64,128] [--think-us 20]
//              [--jitter-ns 0] [--designs rowan-kv,rwrite-kv,batch-kv,tailwind] [--json]
//
// --jitter-ns adds a uniform [0, J] delay to every packet: the network then
// reorders writes of different connections (never of one), which is what
// docs/papers/rowan.md says costs Share-KV its DLWA — its workers' writes to
// adjacent reserved addresses travel on different connections — while
// Rowan's receiver-chosen addresses stay sequential whatever the order.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/random.h"
#include "log/entry.h"
#include "pm/media_model.h"
#include "replication/testing/world.h"

using namespace slip;
using replication::testing::ReplicationWorld;
using replication::testing::WorldOptions;

namespace {

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    if (comma > at) out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

struct Outcome {
  pm::MediaStats media;
  uint64_t acked = 0, failed = 0;
  std::string first_error;
  double virtual_ms = 0;
};

// Primaries are nodes 1..P, each with streams / P senders; node 0 is the
// backup under the model. Keys are private per sender, so entries never
// conflict and each sender's log grows strictly sequentially.
Outcome Run(replication::Protocol protocol, int streams, int writes, size_t entry_bytes, runtime::Nanos think,
            runtime::Nanos jitter) {
  int primaries = 8;
  while (streams % primaries != 0) --primaries;
  const int per_node = streams / primaries;
  const uint64_t segment = 128 << 10;

  WorldOptions o;
  o.protocol = protocol;
  o.nodes = primaries + 1;
  o.senders = per_node;
  o.segment_size = segment;
  // The backup holds one receive segment per sender (RWrite) plus what the
  // primaries' own logs need; every node gets the same size.
  o.pm_bytes = std::max<uint64_t>(64 << 20, (static_cast<uint64_t>(streams) + 16) * segment * 2);
  o.num_shards = 8;
  o.crash_model = false;
  o.max_open_buffers = static_cast<uint32_t>(streams) + 8;
  ReplicationWorld w(o);
  if (jitter > 0) w.fabric().SetDefaultFaults(fabric::LinkFaults{.jitter = jitter});
  pm::MediaModel model;
  w.SetMediaModel(0, &model);

  const size_t key_bytes = 8;
  const size_t value_bytes = entry_bytes - log::kHeaderSize - key_bytes;
  const std::string value(value_bytes, 'v');
  Outcome out;
  int outstanding = 0;
  std::vector<int> left(streams, writes);
  Random rng(42);
  std::function<void(int)> next;
  auto later = [&](int s) {
    const auto wait = static_cast<runtime::Nanos>(static_cast<double>(think) * (0.4 + 1.2 * rng.NextDouble()));
    w.node(1 + s / per_node).senders[s % per_node].exec->After(wait, [&next, s] { next(s); });
  };
  next = [&](int s) {
    if (left[s] == 0) return;
    --left[s];
    char key[16];
    std::snprintf(key, sizeof(key), "s%03dk%03d", s, left[s] % 1000);
    ++outstanding;
    w.Write(1 + s / per_node, s % per_node, log::EntryType::kPut, std::string(key, key_bytes), value, {0},
            [&, s](Status st, uint64_t) {
              --outstanding;
              if (st.ok()) {
                ++out.acked;
              } else if (out.failed++ == 0) {
                out.first_error = st.ToString();
              }
              later(s);
            });
  };
  const auto start = w.rt().Now();
  for (int s = 0; s < streams; ++s) later(s);
  w.RunUntil([&] {
    if (outstanding != 0) return false;
    for (int l : left) if (l) return false;
    return true;
  }, 600 * runtime::kSecond);
  out.virtual_ms = static_cast<double>(w.rt().Now() - start) / 1e6;
  model.Drain();
  out.media = model.stats();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int streams = 144, writes = 300;
  double think_us = 20;
  double jitter_ns = 0;
  std::string entries = "64,128", designs = "rowan-kv,rwrite-kv,batch-kv,tailwind";
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--streams" && has) streams = std::atoi(argv[++i]);
    else if (a == "--writes" && has) writes = std::atoi(argv[++i]);
    else if (a == "--entry" && has) entries = argv[++i];
    else if (a == "--designs" && has) designs = argv[++i];
    else if (a == "--think-us" && has) think_us = std::atof(argv[++i]);
    else if (a == "--jitter-ns" && has) jitter_ns = std::atof(argv[++i]);
    else if (a == "--json") json = true;
    else {
      std::fprintf(stderr, "dlwa_bench: unknown or incomplete option %s\n"
                           "usage: dlwa_bench [--streams N] [--writes N] [--entry 64,128] [--think-us T] [--jitter-ns J] [--designs D,...] [--json]\n",
                   a.c_str());
      return 2;
    }
  }
  if (streams < 1 || writes < 1) {
    std::fprintf(stderr, "dlwa_bench: --streams and --writes must be positive\n");
    return 2;
  }
  if (!json) {
    std::printf("| design | streams | entry B | acked | requested MB | media write MB | media RMW read MB | DLWA |\n"
                "|---|---|---|---|---|---|---|---|\n");
  }
  bool first = true;
  if (json) std::printf("[");
  for (const std::string& e : Split(entries)) {
    const size_t entry = std::strtoul(e.c_str(), nullptr, 10);
    if (entry < log::kHeaderSize + 8 + 1 || entry % log::kAlign != 0) {
      std::fprintf(stderr, "dlwa_bench: --entry %s: an entry is a multiple of %zu B and at least 64 B\n", e.c_str(),
                   log::kAlign);
      return 2;
    }
    for (const std::string& d : Split(designs)) {
      auto p = replication::ParseDesign(d);
      if (!p.ok()) {
        std::fprintf(stderr, "dlwa_bench: %s\n", p.status().ToString().c_str());
        return 2;
      }
      if (!replication::IsOneSided(*p)) {
        std::fprintf(stderr, "dlwa_bench: rpc-kv is not modelled here (its backup workers write their own logs)\n");
        return 2;
      }
      const Outcome r = Run(*p, streams, writes, entry, static_cast<runtime::Nanos>(think_us * 1e3),
                            static_cast<runtime::Nanos>(jitter_ns));
      const double mb = 1 << 20;
      if (json) {
        std::printf("%s{\"design\":\"%s\",\"streams\":%d,\"entry_bytes\":%zu,\"acked\":%llu,\"failed\":%llu,"
                    "\"requested_bytes\":%llu,\"media_write_bytes\":%llu,\"media_read_bytes\":%llu,\"dlwa\":%.4f}",
                    first ? "" : ",", d.c_str(), streams, entry, static_cast<unsigned long long>(r.acked),
                    static_cast<unsigned long long>(r.failed),
                    static_cast<unsigned long long>(r.media.requested_bytes),
                    static_cast<unsigned long long>(r.media.media_write_bytes),
                    static_cast<unsigned long long>(r.media.media_read_bytes), r.media.dlwa());
      } else {
        std::printf("| %s | %d | %zu | %llu | %.1f | %.1f | %.1f | %.2f |\n", d.c_str(), streams, entry,
                    static_cast<unsigned long long>(r.acked), r.media.requested_bytes / mb,
                    r.media.media_write_bytes / mb, r.media.media_read_bytes / mb, r.media.dlwa());
      }
      std::fflush(stdout);
      first = false;
      if (r.failed) {
        std::fprintf(stderr, "dlwa_bench: %s: %llu writes failed, the first with %s\n", d.c_str(),
                     static_cast<unsigned long long>(r.failed), r.first_error.c_str());
      }
    }
  }
  if (json) std::printf("]\n");
  return 0;
}
