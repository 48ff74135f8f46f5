#include "resp/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "common/log.h"

namespace slip::resp {
namespace {

// What HELLO and INFO report as the server's version: the Redis protocol
// level the commands follow (clients check it before using newer options).
constexpr const char* kRedisVersion = "7.0.0";

// One command's reply, kept in its connection's order until every reply
// before it was written. Only the I/O thread touches a slot.
struct Slot {
  enum class Kind : uint8_t { kReady, kGet, kSet, kSetIfAbsent, kSetIfPresent, kDel, kExists, kMget, kMset };
  Kind kind = Kind::kReady;
  bool done = false;
  std::string reply;
  size_t remaining = 0;         // key operations still awaited
  std::vector<Status> status;   // per key operation
  std::vector<std::string> values;
  size_t value_bytes = 0;       // gathered so far (max_reply)
  // The command: its keys from args[first], every step-th (a write's value
  // follows its key).
  Command args;
  size_t first = 1, step = 1;

  bool write() const {
    return kind == Kind::kSet || kind == Kind::kSetIfAbsent || kind == Kind::kSetIfPresent || kind == Kind::kDel ||
           kind == Kind::kMset;
  }
  size_t parts() const { return (args.size() - first) / step; }
  const std::string& key(size_t part) const { return args[first + part * step]; }
};

// A key operation's result, on its way from the client's thread to the
// I/O thread.
struct Completion {
  uint64_t conn;
  std::shared_ptr<Slot> slot;
  size_t part;
  Status status;
  std::string value;
};

// Shared by the I/O thread and the client's callbacks; outlives the server
// while callbacks are pending (a closed server's are dropped with it).
struct Mailbox {
  std::mutex mu;
  std::vector<Completion> queue;
  int event_fd = -1;

  ~Mailbox() {
    if (event_fd >= 0) ::close(event_fd);
  }
  void Post(Completion c) {
    bool wake;
    {
      std::lock_guard<std::mutex> l(mu);
      wake = queue.empty();
      queue.push_back(std::move(c));
    }
    // One wake-up per batch: the I/O thread takes the whole queue.
    if (wake) {
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(event_fd, &one, sizeof(one));
    }
  }
  std::vector<Completion> Take() {
    uint64_t count;
    [[maybe_unused]] ssize_t n = ::read(event_fd, &count, sizeof(count));
    std::lock_guard<std::mutex> l(mu);
    return std::move(queue);
  }
};

struct Conn {
  Conn(int f, uint64_t i, const Limits& limits) : fd(f), id(i), parser(limits) {}
  int fd;
  uint64_t id;
  Parser parser;
  std::deque<std::shared_ptr<Slot>> slots;  // replies in request order
  std::string out;                           // encoded, not yet written
  size_t out_pos = 0;
  bool authed = false;
  bool quit = false;     // QUIT or a protocol error: close once the replies are out
  uint32_t events = 0;   // registered with epoll
  // Keys this connection has operations in flight on. Its commands on one
  // key take effect in the order sent: a command that must follow one in
  // flight (anything after a write, a write after a read) is held, and
  // nothing after it is issued, until that one answered.
  struct KeyUse {
    uint32_t reads = 0, writes = 0;
  };
  std::unordered_map<std::string, KeyUse> busy;
  std::shared_ptr<Slot> held;
};

// The commands served, as COMMAND describes them. Arity as Redis's: N means
// exactly N arguments with the name, -N at least N.
struct Spec {
  const char* name;
  int arity;
  std::vector<std::string> flags;
  int first_key, last_key, step;
  const char* summary;
  const char* group;
};

const std::vector<Spec>& Specs() {
  static const std::vector<Spec> specs = {
      {"get", 2, {"readonly", "fast"}, 1, 1, 1, "Returns the string value of a key.", "string"},
      {"set", -3, {"write", "denyoom"}, 1, 1, 1, "Sets the string value of a key (NX/XX; expiry refused).", "string"},
      {"del", -2, {"write"}, 1, -1, 1, "Deletes one or more keys.", "generic"},
      {"exists", -2, {"readonly", "fast"}, 1, -1, 1, "Determines whether one or more keys exist.", "generic"},
      {"mget", -2, {"readonly", "fast"}, 1, -1, 1, "Atomically returns the string values of one or more keys.", "string"},
      {"mset", -3, {"write", "denyoom"}, 1, -1, 2, "Sets the string values of one or more keys (not atomically).", "string"},
      {"ping", -1, {"fast"}, 0, 0, 0, "Returns the server's liveliness response.", "connection"},
      {"echo", 2, {"fast"}, 0, 0, 0, "Returns the given string.", "connection"},
      {"info", -1, {"loading", "stale"}, 0, 0, 0, "Returns information and statistics about the server.", "server"},
      {"auth", -2, {"noscript", "loading", "stale", "fast", "no_auth"}, 0, 0, 0, "Authenticates the connection.", "connection"},
      {"hello", -1, {"noscript", "loading", "stale", "fast", "no_auth"}, 0, 0, 0, "Handshakes with the server (protocol 2 only).", "connection"},
      {"quit", -1, {"noscript", "loading", "stale", "fast", "no_auth"}, 0, 0, 0, "Closes the connection.", "connection"},
      {"select", 2, {"loading", "stale", "fast"}, 0, 0, 0, "Changes the selected database (only 0 exists).", "connection"},
      {"command", -1, {"loading", "stale"}, 0, 0, 0, "Returns detailed information about all commands.", "server"},
      {"config", -2, {"admin", "noscript", "loading", "stale"}, 0, 0, 0, "CONFIG GET: no parameters are exposed.", "server"},
  };
  return specs;
}

const Spec* FindSpec(std::string_view name) {
  for (const Spec& s : Specs()) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

std::string Lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// Compares in time independent of where the strings differ.
bool SameSecret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

void AppendSpec(std::string* out, const Spec& s) {
  AppendArray(out, 6);
  AppendBulk(out, s.name);
  AppendInteger(out, s.arity);
  AppendArray(out, s.flags.size());
  for (const auto& f : s.flags) AppendSimple(out, f);
  AppendInteger(out, s.first_key);
  AppendInteger(out, s.last_key);
  AppendInteger(out, s.step);
}

void AppendDocs(std::string* out, const Spec& s) {
  AppendBulk(out, s.name);
  AppendArray(out, 6);
  AppendBulk(out, "summary");
  AppendBulk(out, s.summary);
  AppendBulk(out, "since");
  AppendBulk(out, "1.0.0");
  AppendBulk(out, "group");
  AppendBulk(out, s.group);
}

// The error reply for a failed key operation. A failover or an overloaded
// node the client could not get past within its deadline is TRYAGAIN (the
// prefix Redis Cluster clients retry on); a full store is OOM, as Redis's.
std::string ErrorText(const Status& s, bool write) {
  switch (s.code()) {
    case Code::kInvalidArgument:
    case Code::kTooLarge:
      return "ERR " + s.message();
    case Code::kUnavailable:
    case Code::kTimeout:
    case Code::kBusy:
    case Code::kStaleTerm:
      return "TRYAGAIN " + s.ToString() +
             (write ? "; the write may or may not have taken effect" : "");
    case Code::kNoSpace:
      return "OOM " + s.message();
    default:
      return "ERR " + s.ToString();
  }
}

class ServerImpl final : public Server {
 public:
  ServerImpl(Client* client, ServerOptions o) : client_(client), o_(std::move(o)) {}

  ~ServerImpl() override {
    if (thread_.joinable()) {
      stop_ = true;
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(mailbox_->event_fd, &one, sizeof(one));
      thread_.join();
    }
    for (auto& [id, c] : conns_) ::close(c->fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (spare_fd_ >= 0) ::close(spare_fd_);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
  }

  Status Listen() {
    mailbox_ = std::make_shared<Mailbox>();
    mailbox_->event_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (mailbox_->event_fd < 0) return Status::IoError(std::string("eventfd: ") + std::strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(o_.port);
    if (::inet_pton(AF_INET, o_.bind.c_str(), &addr.sin_addr) != 1) {
      return Status::InvalidArgument("RESP bind address is not an IPv4 address: " + o_.bind);
    }
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
    const int on = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return Status::IoError("RESP port " + o_.bind + ":" + std::to_string(o_.port) + ": " + std::strerror(errno));
    }
    if (::listen(listen_fd_, 511) != 0) return Status::IoError(std::string("listen: ") + std::strerror(errno));
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) return Status::IoError(std::string("epoll_create1: ") + std::strerror(errno));
    Watch(listen_fd_, kListenTag, EPOLLIN);
    Watch(mailbox_->event_fd, kWakeTag, EPOLLIN);
    // A descriptor kept spare: when the process runs out, closing it lets
    // the listener accept and refuse a connection instead of reporting it
    // readable forever (a spinning loop).
    spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    max_clients_ = o_.max_clients;
    rlimit nofile{};
    if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
      max_clients_ = std::min<size_t>(max_clients_, std::max<size_t>(nofile.rlim_cur / 2, 16));
    }
    started_ = std::chrono::steady_clock::now();
    thread_ = std::thread([this] { Loop(); });
    return Status::Ok();
  }

  uint16_t port() const override { return port_; }

  Counters counters() const override {
    return Counters{.connections = connections_.load(), .connected = connected_.load(),
                    .commands = commands_.load(), .errors = errors_.load(), .rejected = rejected_.load()};
  }

 private:
  static constexpr uint64_t kListenTag = 0, kWakeTag = 1;

  void Watch(int fd, uint64_t tag, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }

  void Loop() {
    epoll_event events[256];
    while (!stop_) {
      const int n = ::epoll_wait(epoll_fd_, events, 256, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        logging::Error("RESP front door: epoll_wait: {}", std::strerror(errno));
        return;
      }
      for (int i = 0; i < n && !stop_; ++i) {
        const uint64_t tag = events[i].data.u64;
        if (tag == kListenTag) {
          Accept();
        } else if (tag == kWakeTag) {
          Deliver(mailbox_->Take());
        } else {
          auto it = conns_.find(tag);
          if (it == conns_.end()) continue;
          Conn& c = *it->second;
          if (events[i].events & (EPOLLHUP | EPOLLERR)) {
            // Reset or shut both ways: no reply can reach the peer any more
            // (and a connection not being read would be reported again and again).
            Close(c);
            continue;
          }
          if ((events[i].events & EPOLLIN) && !Read(c)) continue;  // closed
          Pump(tag);
        }
      }
    }
  }

  void Accept() {
    for (;;) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if ((errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
          // Out of descriptors: take the waiting connection with the spare
          // one and refuse it, or the listener stays readable forever.
          ::close(spare_fd_);
          const int refused = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (refused >= 0) {
            ++rejected_;  // before the refusal is sent: whoever reads it may read the count
            static constexpr char kNoFds[] = "-ERR the server is out of file descriptors\r\n";
            [[maybe_unused]] ssize_t w = ::send(refused, kNoFds, sizeof(kNoFds) - 1, MSG_NOSIGNAL);
            ::close(refused);
          }
          spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
          if (refused >= 0) continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) logging::Warn("RESP front door: accept: {}", std::strerror(errno));
        return;
      }
      if (conns_.size() >= max_clients_) {
        ++rejected_;  // before the refusal is sent: whoever reads it may read the count
        static constexpr char kFull[] = "-ERR max number of clients reached\r\n";
        [[maybe_unused]] ssize_t w = ::send(fd, kFull, sizeof(kFull) - 1, MSG_NOSIGNAL);
        ::close(fd);
        continue;
      }
      const int on = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
      const uint64_t id = next_id_++;
      const bool open = Credentials().empty();
      auto c = std::make_unique<Conn>(fd, id, open ? o_.limits : o_.unauthenticated_limits);
      c->authed = open;
      c->events = EPOLLIN;
      Watch(fd, id, EPOLLIN);
      conns_.emplace(id, std::move(c));
      ++connections_;
      connected_ = conns_.size();
    }
  }

  std::vector<ServerOptions::Credential> Credentials() const {
    return o_.credentials ? o_.credentials() : std::vector<ServerOptions::Credential>{};
  }

  bool Accepting(const Conn& c) const {
    return !c.quit && !c.held && c.slots.size() < o_.max_in_flight && c.out.size() - c.out_pos < o_.max_output;
  }

  // Reads what the peer sent and issues the commands in it. False when the
  // connection was closed.
  bool Read(Conn& c) {
    // A bounded number of reads per turn keeps one busy connection from
    // starving the others.
    for (int turn = 0; turn < 16 && Accepting(c); ++turn) {
      char buf[64 << 10];
      const ssize_t n = ::read(c.fd, buf, sizeof(buf));
      if (n > 0) {
        c.parser.Feed(std::string_view(buf, static_cast<size_t>(n)));
        Issue(c);
        if (c.parser.held() > o_.max_query && !c.quit) {
          // Redis closes such a client too; the replies owed go out first.
          Ready(NewSlot(c), [&](std::string* out) {
            AppendError(out, "ERR query buffer of " + std::to_string(c.parser.held()) + " bytes exceeds " +
                                 std::to_string(o_.max_query) + ": send smaller commands");
          });
          c.quit = true;
          break;
        }
        if (static_cast<size_t>(n) < sizeof(buf)) break;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0 && errno == EINTR) continue;
      // The peer closed (or the connection failed): what it still awaits
      // has nobody to go to. Its operations run on; their results are dropped.
      Close(c);
      return false;
    }
    return true;
  }

  // Runs the whole commands the parser holds while the connection may have more in flight.
  void Issue(Conn& c) {
    while (Accepting(c)) {
      auto next = c.parser.Next();
      if (!next.ok()) {
        // Redis answers a protocol error and closes the connection.
        Ready(NewSlot(c), [&](std::string* out) { AppendError(out, "ERR " + next.status().message()); });
        c.quit = true;
        return;
      }
      if (!*next) return;
      Run(c, std::move(**next));
    }
  }

  std::shared_ptr<Slot> NewSlot(Conn& c) {
    auto s = std::make_shared<Slot>();
    c.slots.push_back(s);
    return s;
  }

  template <typename F>
  void Ready(const std::shared_ptr<Slot>& s, F&& encode) {
    encode(&s->reply);
    s->done = true;
    if (!s->reply.empty() && s->reply[0] == '-') ++errors_;
  }
  void ReadyError(const std::shared_ptr<Slot>& s, std::string_view text) {
    Ready(s, [&](std::string* out) { AppendError(out, text); });
  }

  void Run(Conn& c, Command cmd) {
    ++commands_;
    auto slot = NewSlot(c);
    const std::string name = Lower(cmd[0]);
    const Spec* spec = FindSpec(name);
    if (name == "dbsize" || name == "keys" || name == "scan" || name == "flushall" || name == "flushdb") {
      // Said rather than "unknown": tools reach for these first.
      return ReadyError(slot, "ERR " + cmd[0] +
                                     " is not supported: keys live on many nodes, each with its backups' copies, "
                                     "and no node counts, lists or drops them cluster-wide");
    }
    if (spec == nullptr) {
      std::string text = "ERR unknown command '" + cmd[0] + "', with args beginning with: ";
      for (size_t i = 1; i < cmd.size() && i < 4; ++i) text += "'" + cmd[i].substr(0, 128) + "' ";
      return ReadyError(slot, text);
    }
    const int argc = static_cast<int>(cmd.size());
    if ((spec->arity > 0 && argc != spec->arity) || (spec->arity < 0 && argc < -spec->arity)) {
      return ReadyError(slot, "ERR wrong number of arguments for '" + name + "' command");
    }
    const bool no_auth = std::find(spec->flags.begin(), spec->flags.end(), "no_auth") != spec->flags.end();
    if (!c.authed && !no_auth) return ReadyError(slot, "NOAUTH Authentication required.");
    if (spec->first_key > 0 && (cmd.size() - 1) / static_cast<size_t>(spec->step) > o_.max_keys) {
      return ReadyError(slot, "ERR more than " + std::to_string(o_.max_keys) + " keys in one command");
    }

    if (name == "get") return Keys(c, slot, Slot::Kind::kGet, cmd, 1, 1);
    if (name == "mget") return Keys(c, slot, Slot::Kind::kMget, cmd, 1, 1);
    if (name == "exists") return Keys(c, slot, Slot::Kind::kExists, cmd, 1, 1);
    if (name == "del") {
      // Each key once: a key deleted twice at the same time would count
      // whichever way the race went.
      Command unique = {cmd[0]};
      std::unordered_map<std::string_view, bool> seen;
      for (size_t i = 1; i < cmd.size(); ++i) {
        if (seen.emplace(cmd[i], true).second) unique.push_back(cmd[i]);
      }
      return Keys(c, slot, Slot::Kind::kDel, unique, 1, 1);
    }
    if (name == "set") {
      Slot::Kind kind = Slot::Kind::kSet;
      for (size_t i = 3; i < cmd.size(); ++i) {
        const std::string opt = Lower(cmd[i]);
        if (opt == "keepttl") continue;  // nothing has a time to live to keep
        if (opt == "nx" || opt == "xx") {
          if (kind != Slot::Kind::kSet) return ReadyError(slot, "ERR syntax error");
          kind = opt == "nx" ? Slot::Kind::kSetIfAbsent : Slot::Kind::kSetIfPresent;
          continue;
        }
        if (opt == "ex" || opt == "px" || opt == "exat" || opt == "pxat") {
          return ReadyError(slot, "ERR SET " + cmd[i] + ": Slipstream keeps no expiry times");
        }
        if (opt == "get") return ReadyError(slot, "ERR SET GET is not supported by Slipstream");
        return ReadyError(slot, "ERR syntax error");
      }
      cmd.resize(3);
      return Keys(c, slot, kind, cmd, 1, 2);
    }
    if (name == "mset") {
      if ((cmd.size() - 1) % 2 != 0) return ReadyError(slot, "ERR wrong number of arguments for 'mset' command");
      // A key given twice takes its last value, as in Redis: write it once.
      Command unique = {cmd[0]};
      std::unordered_map<std::string_view, size_t> at;
      for (size_t i = 1; i < cmd.size(); i += 2) {
        auto [it, fresh] = at.emplace(cmd[i], unique.size());
        if (fresh) {
          unique.push_back(cmd[i]);
          unique.push_back(std::move(cmd[i + 1]));
        } else {
          unique[it->second + 1] = std::move(cmd[i + 1]);
        }
      }
      return Keys(c, slot, Slot::Kind::kMset, unique, 1, 2);
    }
    Ready(slot, [&](std::string* out) { Immediate(c, cmd, name, out); });
  }

  // A command on keys: one client operation per key of `cmd` (from
  // argument `first`, every `step`-th), started now or once the keys it
  // must follow are free.
  void Keys(Conn& c, const std::shared_ptr<Slot>& slot, Slot::Kind kind, Command& cmd, size_t first, size_t step) {
    slot->kind = kind;
    slot->args = std::move(cmd);
    slot->first = first;
    slot->step = step;
    if (MustWait(c, *slot)) {
      c.held = slot;
      return;
    }
    Launch(c, slot);
  }

  static bool MustWait(const Conn& c, const Slot& s) {
    for (size_t part = 0; part < s.parts(); ++part) {
      auto it = c.busy.find(s.key(part));
      if (it != c.busy.end() && (it->second.writes > 0 || (s.write() && it->second.reads > 0))) return true;
    }
    return false;
  }

  void Launch(Conn& c, const std::shared_ptr<Slot>& slot) {
    const Slot::Kind kind = slot->kind;
    const size_t n = slot->parts();
    slot->remaining = n;
    slot->status.resize(n);
    if (kind == Slot::Kind::kGet || kind == Slot::Kind::kMget || kind == Slot::Kind::kSetIfAbsent ||
        kind == Slot::Kind::kSetIfPresent) {
      slot->values.resize(n);
    }
    for (size_t part = 0; part < n; ++part) {
      std::string key = slot->key(part);
      Conn::KeyUse& use = c.busy[key];
      ++(slot->write() ? use.writes : use.reads);
      auto reply = [mb = mailbox_, id = c.id, slot, part](Status s, std::string v) {
        mb->Post(Completion{id, slot, part, std::move(s), std::move(v)});
      };
      switch (kind) {
        case Slot::Kind::kGet:
        case Slot::Kind::kMget:
        case Slot::Kind::kExists:
          client_->GetAsync(std::move(key), [reply](Result<std::string> r) {
            if (r.ok()) return reply(Status::Ok(), std::move(*r));
            reply(r.status(), {});
          });
          break;
        case Slot::Kind::kSet:
        case Slot::Kind::kMset:
          client_->PutAsync(std::move(key), std::move(slot->args[slot->first + part * slot->step + 1]),
                            [reply](Status s) { reply(std::move(s), {}); });
          break;
        case Slot::Kind::kSetIfAbsent:
        case Slot::Kind::kSetIfPresent:
          client_->PutIfAsync(std::move(key), std::move(slot->args[slot->first + part * slot->step + 1]),
                              kind == Slot::Kind::kSetIfAbsent ? Client::Condition::kIfAbsent : Client::Condition::kIfPresent,
                              [reply](Result<bool> r) {
                                if (!r.ok()) return reply(r.status(), {});
                                reply(Status::Ok(), *r ? "written" : "");
                              });
          break;
        case Slot::Kind::kDel:
          client_->DeleteAsync(std::move(key), [reply](Status s) { reply(std::move(s), {}); });
          break;
        case Slot::Kind::kReady:
          break;
      }
    }
  }

  void Deliver(std::vector<Completion> done) {
    std::vector<uint64_t> touched;
    for (Completion& d : done) {
      Slot& s = *d.slot;
      s.status[d.part] = std::move(d.status);
      if (!s.values.empty()) {
        s.value_bytes += d.value.size();
        if (s.value_bytes > o_.max_reply) {
          // Too much to gather for one reply: the command fails, and what
          // it gathered is let go now.
          s.status[d.part] = Status::TooLarge("the reply would exceed " + std::to_string(o_.max_reply) +
                                              " bytes: ask for fewer keys");
          std::vector<std::string>(s.values.size()).swap(s.values);
        } else {
          s.values[d.part] = std::move(d.value);
        }
      }
      if (auto it = conns_.find(d.conn); it != conns_.end()) {
        auto& busy = it->second->busy;
        auto use = busy.find(s.key(d.part));
        --(s.write() ? use->second.writes : use->second.reads);
        if (use->second.reads == 0 && use->second.writes == 0) busy.erase(use);
      }
      if (--s.remaining == 0) {
        Render(s);
        if (s.reply[0] == '-') ++errors_;
      }
      touched.push_back(d.conn);
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (const uint64_t id : touched) Pump(id);
  }

  // Moves a connection on as far as it goes now: starts its held command
  // once the keys it follows are free, writes the replies that are ready,
  // and issues the commands its parser holds while there is room — again
  // and again, since replies written make room and commands issued may be
  // answered at once. Reading the socket is epoll's (Settle asks for input
  // whenever there is room).
  void Pump(uint64_t id) {
    for (;;) {
      auto it = conns_.find(id);
      if (it == conns_.end()) return;  // closed
      Conn& c = *it->second;
      if (c.held && !MustWait(c, *c.held)) Launch(c, std::exchange(c.held, nullptr));
      Settle(c);
      if (conns_.count(id) == 0 || !Accepting(c)) return;
      const uint64_t before = commands_.load();
      Issue(c);
      if (commands_.load() == before && !c.quit) return;  // nothing more to issue
    }
  }

  static void Render(Slot& s) {
    s.done = true;
    std::string* out = &s.reply;
    const bool reads = s.kind == Slot::Kind::kGet || s.kind == Slot::Kind::kMget || s.kind == Slot::Kind::kExists;
    int64_t count = 0;
    for (const Status& st : s.status) {
      if (st.ok()) {
        ++count;
      } else if (!st.Is(Code::kNotFound) || !(reads || s.kind == Slot::Kind::kDel)) {
        return AppendError(out, ErrorText(st, s.write()));
      }
    }
    switch (s.kind) {
      case Slot::Kind::kGet:
        return s.status[0].ok() ? AppendBulk(out, s.values[0]) : AppendNull(out);
      case Slot::Kind::kMget:
        AppendArray(out, s.values.size());
        for (size_t i = 0; i < s.values.size(); ++i) {
          if (s.status[i].ok()) {
            AppendBulk(out, s.values[i]);
          } else {
            AppendNull(out);
          }
        }
        return;
      case Slot::Kind::kSet:
      case Slot::Kind::kMset:
        return AppendSimple(out, "OK");
      case Slot::Kind::kSetIfAbsent:
      case Slot::Kind::kSetIfPresent:
        // Redis: nil when the condition did not hold (nothing written).
        return s.values[0].empty() ? AppendNull(out) : AppendSimple(out, "OK");
      case Slot::Kind::kDel:
      case Slot::Kind::kExists:
        return AppendInteger(out, count);
      case Slot::Kind::kReady:
        return;
    }
  }

  // The commands answered without the cluster.
  void Immediate(Conn& c, const Command& cmd, const std::string& name, std::string* out) {
    if (name == "ping") return cmd.size() == 1 ? AppendSimple(out, "PONG") : AppendBulk(out, cmd[1]);
    if (name == "echo") return AppendBulk(out, cmd[1]);
    if (name == "quit") {
      c.quit = true;
      return AppendSimple(out, "OK");
    }
    if (name == "select") {
      if (cmd[1] == "0") return AppendSimple(out, "OK");
      return AppendError(out, "ERR DB index is out of range");
    }
    if (name == "auth") return Auth(c, cmd.size() == 3 ? cmd[1] : "default", cmd.back(), cmd.size() > 3, out);
    if (name == "hello") return Hello(c, cmd, out);
    if (name == "info") return AppendBulk(out, Info(cmd.size() > 1 ? Lower(cmd[1]) : "default"));
    if (name == "command") return CommandCmd(cmd, out);
    if (name == "config") {
      if (Lower(cmd[1]) == "get" && cmd.size() == 3) return ConfigGet(Lower(cmd[2]), out);
      return AppendError(out, "ERR CONFIG " + cmd[1] + " is not supported: Slipstream is configured by slip cluster");
    }
    AppendError(out, "ERR unknown command '" + cmd[0] + "'");
  }

  // The few read-only parameters tools ask about (redis-benchmark: save,
  // appendonly), with what they mean here: no snapshots, no append-only
  // file — every write is persistent in the replicas' PM before its +OK.
  static void ConfigGet(const std::string& pattern, std::string* out) {
    static const std::pair<const char*, const char*> kParams[] = {{"save", ""}, {"appendonly", "no"}, {"databases", "1"}};
    std::vector<std::pair<const char*, const char*>> hits;
    for (const auto& p : kParams) {
      if (pattern == "*" || pattern == p.first) hits.push_back(p);
    }
    AppendArray(out, 2 * hits.size());
    for (const auto& [k, v] : hits) {
      AppendBulk(out, k);
      AppendBulk(out, v);
    }
  }

  void Auth(Conn& c, const std::string& user, const std::string& password, bool syntax_error, std::string* out) {
    if (syntax_error) return AppendError(out, "ERR syntax error");
    const auto credentials = Credentials();
    if (credentials.empty()) {
      return AppendError(out,
                         "ERR AUTH <password> called without any password configured for the default user. "
                         "Are you sure your configuration is correct?");
    }
    bool match = false;
    for (const auto& cr : credentials) match |= cr.user == user && SameSecret(cr.password, password);
    if (!match) {
      return AppendError(out, "WRONGPASS invalid username-password pair or user is disabled.");
    }
    c.authed = true;
    c.parser.set_limits(o_.limits);
    AppendSimple(out, "OK");
  }

  void Hello(Conn& c, const Command& cmd, std::string* out) {
    size_t i = 1;
    if (cmd.size() > 1) {
      const std::string& v = cmd[1];
      if (v.empty() || v.size() > 9 || !std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
        return AppendError(out, "ERR Protocol version is not an integer or out of range");
      }
      if (v != "2") return AppendError(out, "NOPROTO sorry, this protocol version is not supported");
      i = 2;
    }
    for (; i < cmd.size(); ++i) {
      const std::string opt = Lower(cmd[i]);
      if (opt == "auth" && i + 2 < cmd.size()) {
        std::string reply;
        Auth(c, cmd[i + 1], cmd[i + 2], false, &reply);
        if (reply[0] == '-') {
          out->append(reply);
          return;
        }
        i += 2;
      } else if (opt == "setname" && i + 1 < cmd.size()) {
        ++i;
      } else {
        return AppendError(out, "ERR Syntax error in HELLO option '" + cmd[i] + "'");
      }
    }
    if (!c.authed) {
      return AppendError(out,
                         "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
                         "<proto> AUTH <user> <pass> option can be used to authenticate the client and select the "
                         "RESP protocol version at the same time");
    }
    AppendArray(out, 14);
    AppendBulk(out, "server");
    AppendBulk(out, "redis");
    AppendBulk(out, "version");
    AppendBulk(out, kRedisVersion);
    AppendBulk(out, "proto");
    AppendInteger(out, 2);
    AppendBulk(out, "id");
    AppendInteger(out, static_cast<int64_t>(c.id));
    AppendBulk(out, "mode");
    AppendBulk(out, "standalone");
    AppendBulk(out, "role");
    AppendBulk(out, "master");
    AppendBulk(out, "modules");
    AppendArray(out, 0);
  }

  void CommandCmd(const Command& cmd, std::string* out) {
    const auto& specs = Specs();
    if (cmd.size() == 1) {
      AppendArray(out, specs.size());
      for (const Spec& s : specs) AppendSpec(out, s);
      return;
    }
    const std::string sub = Lower(cmd[1]);
    if (sub == "count") return AppendInteger(out, static_cast<int64_t>(specs.size()));
    if (sub == "info") {
      AppendArray(out, cmd.size() - 2);
      for (size_t i = 2; i < cmd.size(); ++i) {
        const Spec* s = FindSpec(Lower(cmd[i]));
        if (s == nullptr) {
          AppendNull(out);
        } else {
          AppendSpec(out, *s);
        }
      }
      return;
    }
    if (sub == "docs") {
      std::vector<const Spec*> which;
      if (cmd.size() == 2) {
        for (const Spec& s : specs) which.push_back(&s);
      }
      for (size_t i = 2; i < cmd.size(); ++i) {
        if (const Spec* s = FindSpec(Lower(cmd[i]))) which.push_back(s);
      }
      AppendArray(out, 2 * which.size());
      for (const Spec* s : which) AppendDocs(out, *s);
      return;
    }
    AppendError(out, "ERR unknown subcommand '" + cmd[1] + "'. Try COMMAND HELP.");
  }

  std::string Info(const std::string& section) {
    const bool all = section == "default" || section == "all" || section == "everything";
    std::string s;
    auto add = [&](const char* name, const std::string& body) {
      if (!all && section != Lower(name)) return;
      if (!s.empty()) s += "\r\n";
      s += std::string("# ") + name + "\r\n" + body;
    };
    const auto up = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_);
    add("Server", std::string("redis_version:") + kRedisVersion + "\r\nredis_mode:standalone\r\nserver_name:slipstream\r\n" +
                      "process_id:" + std::to_string(::getpid()) + "\r\ntcp_port:" + std::to_string(port_) +
                      "\r\nuptime_in_seconds:" + std::to_string(up.count()) + "\r\n");
    add("Clients", "connected_clients:" + std::to_string(conns_.size()) + "\r\n");
    add("Stats", "total_connections_received:" + std::to_string(connections_.load()) +
                     "\r\ntotal_commands_processed:" + std::to_string(commands_.load()) +
                     "\r\ntotal_error_replies:" + std::to_string(errors_.load()) +
                     "\r\nrejected_connections:" + std::to_string(rejected_.load()) + "\r\n");
    add("Replication", "role:master\r\n");
    if (o_.info) add("Slipstream", o_.info());
    return s;
  }

  // Writes what is ready in order, and sets what the connection waits for.
  void Settle(Conn& c) {
    while (!c.slots.empty() && c.slots.front()->done) {
      c.out.append(c.slots.front()->reply);
      c.slots.pop_front();
    }
    while (c.out_pos < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
      if (n > 0) {
        c.out_pos += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      return Close(c);  // the peer is gone
    }
    if (c.out_pos == c.out.size()) {
      c.out.clear();
      c.out_pos = 0;
      if (c.quit && c.slots.empty()) return Close(c);
    } else if (c.out_pos > (1u << 20) && c.out_pos * 2 > c.out.size()) {
      // A peer that never lets the buffer drain: drop what it already took.
      c.out.erase(0, c.out_pos);
      c.out_pos = 0;
    }
    uint32_t want = 0;
    if (Accepting(c)) want |= EPOLLIN;
    if (c.out_pos < c.out.size()) want |= EPOLLOUT;
    if (want != c.events) {
      epoll_event ev{};
      ev.events = want;
      ev.data.u64 = c.id;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
      c.events = want;
    }
  }

  void Close(Conn& c) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    conns_.erase(c.id);
    connected_ = conns_.size();
  }

  Client* client_;
  const ServerOptions o_;
  std::shared_ptr<Mailbox> mailbox_;
  int listen_fd_ = -1, epoll_fd_ = -1, spare_fd_ = -1;
  size_t max_clients_ = 0;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::chrono::steady_clock::time_point started_;
  // I/O thread only.
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  uint64_t next_id_ = 2;  // after the listener's and the mailbox's tags
  std::atomic<uint64_t> connections_{0}, connected_{0}, commands_{0}, errors_{0}, rejected_{0};
};

}  // namespace

Result<std::unique_ptr<Server>> Server::Start(Client* client, ServerOptions options) {
  auto s = std::make_unique<ServerImpl>(client, std::move(options));
  SLIP_RETURN_IF_ERROR(s->Listen());
  return std::unique_ptr<Server>(std::move(s));
}

}  // namespace slip::resp
