// Ping-pong over the libfabric fabric between two processes (fork): round
// trip latency and message rate for 64 B two-sided send/recv and for 64 B
// one-sided write + poll (each side spins on its own memory for the peer's
// write, polling its endpoint so the provider makes progress).
//
//   ofi_pingpong_bench [--provider shm|tcp] [--iters N] [--warmup N]
//                      [--size BYTES] [--stream N] [--local-completion]
//
// --local-completion sets OfiOptions::remote_completion = false (tcp: sends
// and writes complete without the peer's acknowledgement; see ofi_fabric.h).
//
// Prints one line per test. Compare with Debian's fi_pingpong, whose
// "usec/xfer" is a one-way time: bench/fabric/run_pingpong.sh runs both.
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "fabric/ofi/ofi_fabric.h"

namespace slip::fabric {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string provider = "shm";
  int iters = 20000;
  int warmup = 2000;
  size_t size = 64;
  int stream = 200000;  // messages in the one-way streaming rate tests
  // OfiOptions::remote_completion = false (tcp: no per-operation ack; weaker
  // completion semantics, see ofi_fabric.h).
  bool local_completion = false;
};

const char* CompletionName(const Args& args) {
  return args.local_completion ? "local" : "remote";
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "ofi_pingpong_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(const Status& s, const char* what) {
  if (!s.ok()) Die(std::string(what) + ": " + s.ToString());
}

// Watchdog: a phase that does not finish within kStuckSeconds aborts the
// process with its name instead of hanging (e.g. the peer process died while
// we spin on our memory for its next write, which no timeout covers).
constexpr unsigned kStuckSeconds = 60;
const char* volatile g_phase = "setup";
const char* volatile g_role = "?";
// Operations the current phase has seen complete (sends/writes on the client,
// receives on the server), for the watchdog's message.
volatile long g_progress = 0;
// Receive completions a Barrier polled and kept for the next phase (shows
// how often the race described at Side::carry happens).
long g_carried_recvs = 0;

void OnAlarm(int) {
  char msg[160];
  const int n =
      std::snprintf(msg, sizeof(msg), "ofi_pingpong_bench: %s stuck in %s for %u s (%ld done)\n",
                    g_role, g_phase, kStuckSeconds, static_cast<long>(g_progress));
  if (n > 0) (void)!write(2, msg, static_cast<size_t>(n));
  _exit(3);
}

void Phase(const char* name) {
  g_phase = name;
  g_progress = 0;
  alarm(kStuckSeconds);
}

struct Side {
  std::unique_ptr<Fabric> fabric;
  std::unique_ptr<Endpoint> ep;
  std::byte* mem = nullptr;  // [0, 64): write slot; [4096, ...): receive buffers
  MemoryRegion mr;
  PeerId peer = 0;
  RemoteMemory peer_mem;
  // Completions polled while waiting in a Barrier, handed to the next phase
  // first. A barrier must never drop them: the peer leaves the barrier as
  // soon as it has our byte and may already be sending, so a receive
  // completion can arrive while we are still inside (it once was dropped
  // here, and the receiver of send_stream then waited forever for its
  // 100,000th message).
  std::deque<Completion> carry;
};

// Every completion a phase sees goes through here: carried ones first.
size_t PollSide(Side& s, std::span<Completion> out) {
  size_t n = 0;
  while (n < out.size() && !s.carry.empty()) {
    out[n++] = s.carry.front();
    s.carry.pop_front();
  }
  if (n < out.size()) n += s.ep->Poll(out.subspan(n));
  return n;
}

// Pipes between the two processes, for the address exchange and barriers.
struct Link {
  int in = -1;
  int out = -1;
  void Put(const void* p, size_t n) const {
    auto* b = static_cast<const char*>(p);
    while (n > 0) {
      ssize_t w = write(out, b, n);
      if (w <= 0) Die("pipe write");
      b += w;
      n -= static_cast<size_t>(w);
    }
  }
  void Get(void* p, size_t n) const {
    auto* b = static_cast<char*>(p);
    while (n > 0) {
      ssize_t r = read(in, b, n);
      if (r <= 0) Die("pipe read");
      b += r;
      n -= static_cast<size_t>(r);
    }
  }
  // Barrier that keeps the endpoint progressing (the peer may still need us
  // to acknowledge its last operations) and keeps what it polls in
  // s.carry for the next phase. REQUIRES: the caller's own operations of the
  // ending phase have all completed, so that everything carried belongs to
  // the next phase.
  void Barrier(Side& s) const {
    char c = 'b';
    Put(&c, 1);
    std::array<Completion, 16> done;
    for (;;) {
      const size_t n = s.ep->Poll(done);
      for (size_t k = 0; k < n; ++k) {
        if (done[k].op == Op::kRecv) ++g_carried_recvs;
        s.carry.push_back(done[k]);
      }
      pollfd pfd{in, POLLIN, 0};
      if (poll(&pfd, 1, 0) == 1) break;
    }
    Get(&c, 1);
  }
};

constexpr size_t kMemBytes = 1 << 20;
constexpr size_t kRecvOffset = 4096;
constexpr int kRecvBufs = 64;

Side Setup(const Args& args, const Link& link) {
  Side s;
  OfiOptions ofi;
  ofi.remote_completion = !args.local_completion;
  auto f = OpenOfiFabric(FabricOptions{.provider = args.provider, .node_address = ""}, ofi);
  if (!f.ok()) Die(f.status().ToString());
  s.fabric = std::move(*f);
  auto ep = s.fabric->CreateEndpoint(
      EndpointOptions{.name = "bench", .cq_depth = 4096, .op_timeout = std::chrono::seconds(10)});
  if (!ep.ok()) Die(ep.status().ToString());
  s.ep = std::move(*ep);
  s.mem = static_cast<std::byte*>(std::aligned_alloc(4096, kMemBytes));
  std::memset(s.mem, 0, kMemBytes);
  auto mr = s.ep->Register(s.mem, kMemBytes, Endpoint::kRemoteRead | Endpoint::kRemoteWrite);
  if (!mr.ok()) Die(mr.status().ToString());
  s.mr = *mr;
  const std::string addr = s.ep->address();
  const uint32_t len = static_cast<uint32_t>(addr.size());
  link.Put(&len, sizeof(len));
  link.Put(addr.data(), addr.size());
  link.Put(&s.mr.remote, sizeof(s.mr.remote));
  uint32_t peer_len = 0;
  link.Get(&peer_len, sizeof(peer_len));
  std::string peer_addr(peer_len, '\0');
  link.Get(peer_addr.data(), peer_len);
  link.Get(&s.peer_mem, sizeof(s.peer_mem));
  auto p = s.ep->AddPeer(peer_addr);
  if (!p.ok()) Die(p.status().ToString());
  s.peer = *p;
  return s;
}

std::byte* RecvBuf(Side& s, int i) { return s.mem + kRecvOffset + static_cast<size_t>(i) * 4096; }

void Report(const Args& args, const char* test, std::vector<int64_t>& rtt_ns,
            Clock::duration elapsed) {
  std::sort(rtt_ns.begin(), rtt_ns.end());
  auto pct = [&](double p) {
    return static_cast<double>(rtt_ns[static_cast<size_t>(p * (rtt_ns.size() - 1))]) / 1000.0;
  };
  double sum = 0;
  for (int64_t v : rtt_ns) sum += static_cast<double>(v);
  const double secs = std::chrono::duration<double>(elapsed).count();
  std::printf(
      "provider=%s completion=%s test=%s size=%zu iters=%zu rtt_us p50=%.2f p99=%.2f mean=%.2f "
      "min=%.2f roundtrips_per_s=%.0f\n",
      args.provider.c_str(), CompletionName(args), test, args.size, rtt_ns.size(), pct(0.50), pct(0.99),
      sum / static_cast<double>(rtt_ns.size()) / 1000.0, pct(0.0),
      static_cast<double>(rtt_ns.size()) / secs);
  std::fflush(stdout);
}

// Two-sided: the client sends, the server answers each message.
void SendRecv(const Args& args, Side& s, bool client, const Link& link) {
  for (int i = 0; i < kRecvBufs; ++i) {
    Check(s.ep->PostRecv(RecvBuf(s, i), 4096, &s.mr, static_cast<uint64_t>(i)), "PostRecv");
  }
  link.Barrier(s);
  std::vector<std::byte> msg(args.size, std::byte{1});
  std::array<Completion, 32> out;
  const int total = args.warmup + args.iters;
  std::vector<int64_t> rtt;
  rtt.reserve(static_cast<size_t>(args.iters));
  Clock::time_point bench_start;
  const uint64_t kSendCtx = 1 << 20;
  int sends_done = 0;
  auto poll_once = [&]() -> bool {  // true when a message arrived
    bool got = false;
    const size_t n = PollSide(s, out);
    for (size_t k = 0; k < n; ++k) {
      const Completion& c = out[k];
      if (c.status != Code::kOk) Die(std::string("completion: ") + std::string(CodeName(c.status)));
      if (c.op == Op::kSend) {
        ++sends_done;
        continue;
      }
      if (c.op != Op::kRecv) continue;
      got = true;
      const int b = static_cast<int>(c.context);
      Check(s.ep->PostRecv(RecvBuf(s, b), 4096, &s.mr, c.context), "PostRecv");
    }
    return got;
  };
  for (int i = 0; i < total; ++i) {
    if (i == args.warmup) bench_start = Clock::now();
    const auto t0 = Clock::now();
    if (client) Check(s.ep->Send(s.peer, msg.data(), msg.size(), nullptr, kSendCtx), "Send");
    while (!poll_once()) {
    }
    if (client) {
      if (i >= args.warmup) rtt.push_back((Clock::now() - t0).count());
    } else {
      Check(s.ep->Send(s.peer, msg.data(), msg.size(), nullptr, kSendCtx), "Send");
    }
  }
  const auto elapsed = Clock::now() - bench_start;
  while (sends_done < total) (void)poll_once();
  link.Barrier(s);
  if (client) Report(args, "send_recv_pingpong", rtt, elapsed);
}

// One-sided: each side spins on the last 8 bytes of its own 64 B slot.
void WritePoll(const Args& args, Side& s, bool client, const Link& link) {
  link.Barrier(s);
  std::vector<std::byte> msg(args.size, std::byte{2});
  auto seq_at = [&](std::byte* slot) {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(slot + args.size - 8))
        .load(std::memory_order_acquire);
  };
  std::array<Completion, 32> out;
  const int total = args.warmup + args.iters;
  std::vector<int64_t> rtt;
  rtt.reserve(static_cast<size_t>(args.iters));
  Clock::time_point bench_start;
  auto write_seq = [&](uint64_t seq) {
    std::memcpy(msg.data() + args.size - 8, &seq, 8);
    Check(s.ep->Write(s.peer, msg.data(), args.size, nullptr, s.peer_mem, 0, seq), "Write");
  };
  int writes_done = 0;
  auto poll_once = [&] {
    const size_t n = PollSide(s, out);
    for (size_t k = 0; k < n; ++k) {
      if (out[k].status != Code::kOk) Die("write completion failed");
      if (out[k].op == Op::kWrite) ++writes_done;
    }
  };
  auto await_seq = [&](uint64_t seq) {
    while (seq_at(s.mem) != seq) poll_once();
  };
  for (int i = 1; i <= total; ++i) {
    if (i == args.warmup + 1) bench_start = Clock::now();
    const auto t0 = Clock::now();
    if (client) {
      write_seq(static_cast<uint64_t>(i));
      await_seq(static_cast<uint64_t>(i));
      if (i > args.warmup) rtt.push_back((Clock::now() - t0).count());
    } else {
      await_seq(static_cast<uint64_t>(i));
      write_seq(static_cast<uint64_t>(i));
    }
  }
  const auto elapsed = Clock::now() - bench_start;
  while (writes_done < total) poll_once();
  link.Barrier(s);
  if (client) Report(args, "write_poll_pingpong", rtt, elapsed);
}

// One-way streaming rate: the client keeps `window` sends (or writes) in
// flight; the server only receives (or only polls).
void Stream(const Args& args, Side& s, bool client, const Link& link, bool one_sided) {
  // The receive buffers posted by SendRecv are still posted (each is
  // reposted as it completes).
  constexpr int kWindow = 64;
  link.Barrier(s);
  std::vector<std::byte> msg(args.size, std::byte{3});
  std::array<Completion, 64> out;
  const auto start = Clock::now();
  if (client) {
    int posted = 0, done = 0;
    while (done < args.stream) {
      while (posted < args.stream && posted - done < kWindow) {
        Status st = one_sided ? s.ep->Write(s.peer, msg.data(), args.size, nullptr, s.peer_mem,
                                            64 * static_cast<uint64_t>(posted % 32), 1)
                              : s.ep->Send(s.peer, msg.data(), args.size, nullptr, 1);
        if (st.code() == Code::kBusy) break;
        Check(st, "post");
        ++posted;
      }
      const Op mine = one_sided ? Op::kWrite : Op::kSend;
      const size_t n = PollSide(s, out);
      for (size_t k = 0; k < n; ++k) {
        if (out[k].status != Code::kOk) Die("stream completion failed");
        if (out[k].op == mine) ++done;
      }
      g_progress = done;
    }
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("provider=%s completion=%s test=%s size=%zu msgs=%d window=%d msgs_per_s=%.0f\n",
                args.provider.c_str(), CompletionName(args), one_sided ? "write_stream" : "send_stream", args.size,
                args.stream, kWindow, args.stream / secs);
    std::fflush(stdout);
  } else if (!one_sided) {
    int got = 0;
    while (got < args.stream) {
      const size_t n = PollSide(s, out);
      for (size_t k = 0; k < n; ++k) {
        if (out[k].op != Op::kRecv) continue;
        g_progress = ++got;
        Check(s.ep->PostRecv(RecvBuf(s, static_cast<int>(out[k].context)), 4096, &s.mr,
                             out[k].context),
              "PostRecv");
      }
    }
  }
  // The one-sided server simply keeps polling inside the barrier.
  link.Barrier(s);
}

int Run(const Args& args) {
  int to_child[2], to_parent[2];
  if (pipe(to_child) != 0 || pipe(to_parent) != 0) Die("pipe");
  std::fflush(stdout);
  // Fork before libfabric is touched: each process initialises its own.
  pid_t pid = fork();
  if (pid < 0) Die("fork");
  const bool client = pid != 0;
  Link link = client ? Link{to_parent[0], to_child[1]} : Link{to_child[0], to_parent[1]};
  if (!client) prctl(PR_SET_PDEATHSIG, SIGKILL);
  g_role = client ? "client" : "server";
  std::signal(SIGALRM, OnAlarm);
  Phase("setup");
  Side s = Setup(args, link);
  Phase("send_recv_pingpong");
  SendRecv(args, s, client, link);
  Phase("write_poll_pingpong");
  WritePoll(args, s, client, link);
  Phase("send_stream");
  Stream(args, s, client, link, /*one_sided=*/false);
  Phase("write_stream");
  Stream(args, s, client, link, /*one_sided=*/true);
  alarm(0);
  if (!client) {
    if (g_carried_recvs > 0) {
      std::fprintf(stderr, "ofi_pingpong_bench: server: %ld receive completion(s) arrived during a barrier (kept for the next phase)\n", g_carried_recvs);
    }
    std::_Exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

}  // namespace
}  // namespace slip::fabric

int main(int argc, char** argv) {
  slip::fabric::Args args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) slip::fabric::Die("missing value for " + a);
      return argv[++i];
    };
    if (a == "--provider") {
      args.provider = next();
    } else if (a == "--iters") {
      args.iters = std::stoi(next());
    } else if (a == "--warmup") {
      args.warmup = std::stoi(next());
    } else if (a == "--size") {
      args.size = std::stoul(next());
    } else if (a == "--stream") {
      args.stream = std::stoi(next());
    } else if (a == "--local-completion") {
      args.local_completion = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--provider shm|tcp] [--iters N] [--warmup N] [--size B] "
                   "[--stream N] [--local-completion]\n",
                   argv[0]);
      return 2;
    }
  }
  if (args.size < 8 || args.size > 4096 || args.iters <= 0) {
    slip::fabric::Die("--size must be in [8, 4096] and --iters positive");
  }
  return slip::fabric::Run(args);
}
