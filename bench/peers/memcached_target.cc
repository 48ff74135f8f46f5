// memcached as the unreplicated in-memory peer: one server on loopback and
// its text protocol spoken directly over a TCP socket (a few lines; no
// client library). Nothing is replicated or persisted: the floor on what a
// network KV round trip costs on this machine.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "bench/peers/peers.h"
#include "bench/peers/server_process.h"

namespace slip::bench {
namespace {

// Bytes moved by all sessions; outlives them (the target keeps it).
struct Traffic {
  std::atomic<uint64_t> bytes{0};
};

class Connection {
 public:
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Open(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      return Status::Unavailable("memcached connect 127.0.0.1:" + std::to_string(port) + ": " +
                                 std::strerror(errno));
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{30, 0};  // a stuck server fails the op instead of hanging the run
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return Status::Ok();
  }
  Status Send(const std::string& req) {
    for (size_t off = 0; off < req.size();) {
      const ssize_t n = ::send(fd_, req.data() + off, req.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::Unavailable(std::string("memcached send: ") + std::strerror(errno));
      off += static_cast<size_t>(n);
    }
    bytes_ += req.size();
    return Status::Ok();
  }
  // The next line, without its "\r\n".
  Result<std::string> Line() {
    size_t eol;
    while ((eol = buf_.find("\r\n", pos_)) == std::string::npos) SLIP_RETURN_IF_ERROR(Fill());
    std::string line = buf_.substr(pos_, eol - pos_);
    pos_ = eol + 2;
    return line;
  }
  // Exactly n bytes.
  Result<std::string> Bytes(size_t n) {
    while (buf_.size() - pos_ < n) SLIP_RETURN_IF_ERROR(Fill());
    std::string out = buf_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  uint64_t TakeBytes() {
    const uint64_t b = bytes_;
    bytes_ = 0;
    return b;
  }

 private:
  Status Fill() {
    if (pos_ > 0) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
    char tmp[16384];
    ssize_t n;
    do n = ::recv(fd_, tmp, sizeof tmp, 0);
    while (n < 0 && errno == EINTR);
    if (n == 0) return Status::Unavailable("memcached closed the connection");
    if (n < 0) return Status::Unavailable(std::string("memcached recv: ") + std::strerror(errno));
    buf_.append(tmp, static_cast<size_t>(n));
    bytes_ += static_cast<uint64_t>(n);
    return Status::Ok();
  }
  int fd_ = -1;
  std::string buf_;
  size_t pos_ = 0;
  uint64_t bytes_ = 0;
};

Status ServerError(const std::string& line) {
  return Status::IoError("memcached: " + line);
}

class MemcachedSession final : public KvSession {
 public:
  explicit MemcachedSession(std::shared_ptr<Traffic> traffic) : traffic_(std::move(traffic)) {}
  Status Open(uint16_t port) { return conn_.Open(port); }

  Status Put(std::string_view key, std::string_view value) override {
    std::string req;
    req.reserve(key.size() + value.size() + 32);
    req.append("set ").append(key).append(" 0 0 ").append(std::to_string(value.size())).append("\r\n");
    req.append(value).append("\r\n");
    SLIP_RETURN_IF_ERROR(Exchange(req));
    SLIP_ASSIGN_OR_RETURN(std::string line, conn_.Line());
    Account();
    return line == "STORED" ? Status::Ok() : ServerError(line);
  }
  Result<std::string> Get(std::string_view key) override {
    std::string req = "get ";
    req.append(key).append("\r\n");
    SLIP_RETURN_IF_ERROR(Exchange(req));
    SLIP_ASSIGN_OR_RETURN(std::string line, conn_.Line());
    if (line == "END") {
      Account();
      return Status::NotFound();
    }
    // VALUE <key> <flags> <bytes>
    if (line.rfind("VALUE ", 0) != 0) return ServerError(line);
    const size_t sp = line.rfind(' ');
    const size_t len = std::strtoull(line.c_str() + sp + 1, nullptr, 10);
    SLIP_ASSIGN_OR_RETURN(std::string value, conn_.Bytes(len + 2));
    value.resize(len);
    SLIP_ASSIGN_OR_RETURN(std::string end, conn_.Line());
    Account();
    if (end != "END") return ServerError(end);
    return value;
  }
  Status Del(std::string_view key) override {
    std::string req = "delete ";
    req.append(key).append("\r\n");
    SLIP_RETURN_IF_ERROR(Exchange(req));
    SLIP_ASSIGN_OR_RETURN(std::string line, conn_.Line());
    Account();
    if (line == "DELETED") return Status::Ok();
    if (line == "NOT_FOUND") return Status::NotFound();
    return ServerError(line);
  }
  uint64_t round_trips() const override { return rtts_; }

 private:
  Status Exchange(const std::string& req) {
    ++rtts_;
    return conn_.Send(req);
  }
  void Account() { traffic_->bytes.fetch_add(conn_.TakeBytes(), std::memory_order_relaxed); }

  std::shared_ptr<Traffic> traffic_;
  Connection conn_;
  uint64_t rtts_ = 0;
};

class MemcachedTarget final : public KvTarget {
 public:
  explicit MemcachedTarget(MemcachedTargetOptions o) : options_(o) {}

  Status Start() {
    SLIP_ASSIGN_OR_RETURN(const std::string bin, FindBinary("memcached", "memcached"));
    SLIP_ASSIGN_OR_RETURN(tmp_, TempDir::Create("slip-bench-memcached-"));
    SLIP_ASSIGN_OR_RETURN(auto ports, FreeLoopbackPorts(1));
    port_ = ports[0];
    std::vector<std::string> args = {bin, "-p", std::to_string(port_), "-l", "127.0.0.1", "-U", "0",
                                      "-m", std::to_string(options_.memory_mb),
                                      "-t", std::to_string(options_.threads), "-c", "1024"};
    // memcached refuses to run as root unless told which user to stay.
    if (::geteuid() == 0) args.insert(args.end(), {"-u", "root"});
    SLIP_ASSIGN_OR_RETURN(server_, ServerProcess::Start(args, tmp_->path() + "/memcached.log"));
    Status s = WaitForPort(port_, 10);
    if (!s.ok()) return Status(s.code(), "memcached: " + s.message() + "; log: " + server_->LogTail());
    Connection c;
    SLIP_RETURN_IF_ERROR(c.Open(port_));
    SLIP_RETURN_IF_ERROR(c.Send("version\r\n"));
    auto v = c.Line();
    if (!v.ok()) return v.status();
    if (v->rfind("VERSION ", 0) == 0) version_ = v->substr(8);
    return Status::Ok();
  }

  std::string name() const override { return "memcached"; }
  std::string Durability() const override { return "memory"; }
  std::string Describe() const override {
    return "memcached " + version_ + " on 127.0.0.1 (-t " + std::to_string(options_.threads) + ", -m " +
           std::to_string(options_.memory_mb) + "), text protocol; unreplicated, volatile";
  }
  Result<std::unique_ptr<KvSession>> Connect(uint32_t) override {
    auto s = std::make_unique<MemcachedSession>(traffic_);
    SLIP_RETURN_IF_ERROR(s->Open(port_));
    return std::unique_ptr<KvSession>(std::move(s));
  }
  TargetSample Sample() override {
    TargetSample s;
    auto cpu = server_->CpuUs();
    if (cpu.ok()) s.cpu_us.worker = *cpu;  // the whole server: workers, listener, LRU maintainer
    s.counts_round_trips = true;
    // TCP payload in both directions, counted by the client sockets.
    s.fabric_bytes = static_cast<double>(traffic_->bytes.load());
    return s;
  }

 private:
  MemcachedTargetOptions options_;
  std::unique_ptr<TempDir> tmp_;
  std::unique_ptr<ServerProcess> server_;
  uint16_t port_ = 0;
  std::string version_ = "?";
  std::shared_ptr<Traffic> traffic_ = std::make_shared<Traffic>();
};

}  // namespace

Result<std::unique_ptr<KvTarget>> MakeMemcachedTarget(const MemcachedTargetOptions& o) {
  auto t = std::make_unique<MemcachedTarget>(o);
  SLIP_RETURN_IF_ERROR(t->Start());
  return std::unique_ptr<KvTarget>(std::move(t));
}

}  // namespace slip::bench
