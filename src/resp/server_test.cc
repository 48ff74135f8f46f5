// The front door over a fake slip::Client: command semantics, reply order
// under pipelining, authentication, protocol errors, back-pressure and
// shutdown with operations in flight. Real clusters and the real Redis
// tools: test/integration/resp_test.cc.
#include "resp/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

namespace slip::resp {
namespace {

using namespace std::chrono_literals;

// A key-value map behind the Client interface. Callbacks run on a thread of
// its own, as the real client's do; keys starting "slow" answer after
// `slow_delay`, keys starting "down" answer Unavailable, and while held no
// callback runs at all.
class FakeClient final : public Client {
 public:
  FakeClient() : thread_([this] { Run(); }) {}
  ~FakeClient() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void Hold(bool on) {
    {
      std::lock_guard<std::mutex> l(mu_);
      held_ = on;
    }
    cv_.notify_all();
  }
  size_t calls() {
    std::lock_guard<std::mutex> l(mu_);
    return calls_;
  }
  std::map<std::string, std::string> data() {
    std::lock_guard<std::mutex> l(mu_);
    return data_;
  }
  std::chrono::milliseconds slow_delay = 50ms;

  Status Put(std::string_view, std::string_view) override { return Status::NotSupported("async only"); }
  Result<std::string> Get(std::string_view) override { return Status::NotSupported("async only"); }
  Status Delete(std::string_view) override { return Status::NotSupported("async only"); }

  void PutAsync(std::string key, std::string value, std::function<void(Status)> done) override {
    Later(key, [this, key, value = std::move(value), done = std::move(done)] {
      if (key.starts_with("down")) return done(Status::Unavailable("node 1 is not answering"));
      if (key.empty()) return done(Status::InvalidArgument("empty key"));
      data_[key] = value;  // under mu_ (Run holds it)
      done(Status::Ok());
    });
  }
  Result<bool> PutIf(std::string_view, std::string_view, Condition) override { return Status::NotSupported("async only"); }
  void PutIfAsync(std::string key, std::string value, Condition condition,
                  std::function<void(Result<bool>)> done) override {
    Later(key, [this, key, value = std::move(value), condition, done = std::move(done)] {
      if (key.starts_with("down")) return done(Status::Unavailable("node 1 is not answering"));
      if (data_.contains(key) != (condition == Condition::kIfPresent)) return done(false);
      data_[key] = value;
      done(true);
    });
  }
  void GetAsync(std::string key, std::function<void(Result<std::string>)> done) override {
    Later(key, [this, key, done = std::move(done)] {
      if (key.starts_with("down")) return done(Status::Unavailable("node 1 is not answering"));
      auto it = data_.find(key);
      if (it == data_.end()) return done(Status::NotFound());
      done(it->second);
    });
  }
  void DeleteAsync(std::string key, std::function<void(Status)> done) override {
    Later(key, [this, key, done = std::move(done)] {
      if (key.starts_with("down")) return done(Status::Timeout("no answer"));
      done(data_.erase(key) > 0 ? Status::Ok() : Status::NotFound());
    });
  }
  Result<std::vector<std::string>> NodeStats() override { return std::vector<std::string>{}; }
  Result<std::vector<NodeAnswer>> NodeStatsEach() override { return std::vector<NodeAnswer>{}; }
  uint64_t RoundTrips() override { return 0; }
  Sent RpcSent() override { return {}; }

 private:
  void Later(const std::string& key, std::function<void()> f) {
    const auto at = std::chrono::steady_clock::now() + (key.starts_with("slow") ? slow_delay : 0ms);
    {
      std::lock_guard<std::mutex> l(mu_);
      ++calls_;
      work_.emplace_back(at, std::move(f));
    }
    cv_.notify_all();
  }
  // Runs each callback once it is due (callbacks run with mu_ held: they
  // touch data_, and the server's callbacks only post to its mailbox).
  void Run() {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      if (held_ || work_.empty()) {
        cv_.wait_for(l, 5ms);
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      bool ran = false;
      for (auto it = work_.begin(); it != work_.end(); ++it) {
        if (it->first <= now) {
          auto f = std::move(it->second);
          work_.erase(it);
          f();
          ran = true;
          break;
        }
      }
      if (!ran) cv_.wait_for(l, 1ms);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::function<void()>>> work_;
  std::map<std::string, std::string> data_;
  size_t calls_ = 0;
  bool held_ = false, stop_ = false;
  std::thread thread_;
};

// A blocking TCP connection to the server, reading whole replies.
class Conn {
 public:
  explicit Conn(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  }
  ~Conn() { ::close(fd_); }

  void Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      ASSERT_GT(n, 0);
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }
  void Command(const resp::Command& args) {
    std::string s;
    AppendCommand(&s, args);
    Send(s);
  }
  // The next whole reply, as its raw bytes; "" if the server closed the
  // connection (or nothing came within 10 s).
  std::string Reply() {
    for (;;) {
      const size_t n = Complete(0);
      if (n > 0) {
        std::string r = buf_.substr(0, n);
        buf_.erase(0, n);
        return r;
      }
      if (!Fill()) return "";
    }
  }
  std::string Call(const resp::Command& args) {
    Command(args);
    return Reply();
  }
  // True when the server closed the connection (after what it sent).
  bool Closed() {
    while (Fill()) {
    }
    return closed_;
  }

 private:
  bool Fill() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) return false;
    char b[65536];
    const ssize_t n = ::recv(fd_, b, sizeof(b), 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    buf_.append(b, static_cast<size_t>(n));
    return true;
  }
  // The length of the whole reply starting at `at`, or 0 if incomplete.
  size_t Complete(size_t at) {
    const size_t nl = buf_.find("\r\n", at);
    if (at >= buf_.size() || nl == std::string::npos) return 0;
    const char t = buf_[at];
    const std::string line = buf_.substr(at + 1, nl - at - 1);
    size_t end = nl + 2;
    if (t == '$') {
      const long len = std::stol(line);
      if (len < 0) return end - at;
      if (buf_.size() < end + static_cast<size_t>(len) + 2) return 0;
      return end + static_cast<size_t>(len) + 2 - at;
    }
    if (t == '*') {
      const long n = std::stol(line);
      for (long i = 0; i < n; ++i) {
        const size_t e = Complete(end);
        if (e == 0) return 0;
        end += e;
      }
    }
    return end - at;
  }

  int fd_ = -1;
  std::string buf_;
  bool closed_ = false;
};

std::string Bulk(std::string_view s) { return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n"; }

class RespServerTest : public ::testing::Test {
 protected:
  void Start(ServerOptions o = {}) {
    auto s = Server::Start(&client_, std::move(o));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
  }
  FakeClient client_;
  std::unique_ptr<Server> server_;
};

TEST_F(RespServerTest, StringCommands) {
  Start();
  Conn c(server_->port());
  EXPECT_EQ(c.Call({"PING"}), "+PONG\r\n");
  EXPECT_EQ(c.Call({"ping", "hi"}), Bulk("hi"));
  EXPECT_EQ(c.Call({"ECHO", std::string("a\r\nb\0c", 6)}), Bulk(std::string("a\r\nb\0c", 6)));
  EXPECT_EQ(c.Call({"GET", "k"}), "$-1\r\n");
  EXPECT_EQ(c.Call({"SET", "k", "v1"}), "+OK\r\n");
  EXPECT_EQ(c.Call({"get", "k"}), Bulk("v1"));
  EXPECT_EQ(c.Call({"SET", "k", "v2", "KEEPTTL"}), "+OK\r\n");
  EXPECT_EQ(c.Call({"MSET", "a", "1", "b", "2"}), "+OK\r\n");
  EXPECT_EQ(c.Call({"MGET", "a", "nope", "b", "k"}), "*4\r\n" + Bulk("1") + "$-1\r\n" + Bulk("2") + Bulk("v2"));
  EXPECT_EQ(c.Call({"EXISTS", "a", "nope", "a"}), ":2\r\n");
  EXPECT_EQ(c.Call({"DEL", "a", "nope", "b"}), ":2\r\n");
  EXPECT_EQ(c.Call({"EXISTS", "a", "b"}), ":0\r\n");
  EXPECT_EQ(c.Call({"SELECT", "0"}), "+OK\r\n");
  EXPECT_EQ((client_.data()), (std::map<std::string, std::string>{{"k", "v2"}}));
}

TEST_F(RespServerTest, RefusesWhatItDoesNotDoAndChangesNothing) {
  Start();
  Conn c(server_->port());
  EXPECT_EQ(c.Call({"SET", "k", "v", "EX", "10"}), "-ERR SET EX: Slipstream keeps no expiry times\r\n");
  EXPECT_EQ(c.Call({"set", "k", "v", "px", "10"}), "-ERR SET px: Slipstream keeps no expiry times\r\n");
  EXPECT_EQ(c.Call({"SET", "k", "v", "NX", "XX"}), "-ERR syntax error\r\n");
  EXPECT_EQ(c.Call({"SET", "k", "v", "BOGUS"}), "-ERR syntax error\r\n");
  EXPECT_EQ(c.Call({"GET"}), "-ERR wrong number of arguments for 'get' command\r\n");
  EXPECT_EQ(c.Call({"GET", "a", "b"}), "-ERR wrong number of arguments for 'get' command\r\n");
  EXPECT_EQ(c.Call({"MSET", "a", "1", "b"}), "-ERR wrong number of arguments for 'mset' command\r\n");
  EXPECT_EQ(c.Call({"HSET", "x", "f", "v"}), "-ERR unknown command 'HSET', with args beginning with: 'x' 'f' 'v' \r\n");
  EXPECT_EQ(c.Call({"SELECT", "1"}), "-ERR DB index is out of range\r\n");
  EXPECT_TRUE(c.Call({"DBSIZE"}).starts_with("-ERR DBSIZE is not supported: keys live on many nodes"));
  EXPECT_EQ(c.Call({"SET", "", "v"}), "-ERR empty key\r\n");
  EXPECT_TRUE(client_.data().empty());
  EXPECT_EQ(client_.calls(), 1u);  // only the empty key reached the client
  EXPECT_EQ(c.Call({"PING"}), "+PONG\r\n");  // still usable
  EXPECT_GE(server_->counters().errors, 10u);
}

TEST_F(RespServerTest, ConditionalSets) {
  Start();
  Conn c(server_->port());
  EXPECT_EQ(c.Call({"SET", "k", "a", "XX"}), "$-1\r\n");  // absent: nothing written
  EXPECT_EQ(c.Call({"GET", "k"}), "$-1\r\n");
  EXPECT_EQ(c.Call({"SET", "k", "b", "nx"}), "+OK\r\n");
  EXPECT_EQ(c.Call({"SET", "k", "c", "NX"}), "$-1\r\n");  // present: kept
  EXPECT_EQ(c.Call({"GET", "k"}), Bulk("b"));
  EXPECT_EQ(c.Call({"SET", "k", "d", "XX", "KEEPTTL"}), "+OK\r\n");
  EXPECT_EQ(c.Call({"GET", "k"}), Bulk("d"));
  EXPECT_TRUE(c.Call({"SET", "down1", "v", "NX"}).starts_with("-TRYAGAIN"));
  // Pipelined on one key: each sees the one before it.
  std::string batch;
  AppendCommand(&batch, {"SET", "slowp", "1", "NX"});
  AppendCommand(&batch, {"SET", "slowp", "2", "NX"});
  AppendCommand(&batch, {"SET", "slowp", "3", "XX"});
  AppendCommand(&batch, {"GET", "slowp"});
  c.Send(batch);
  EXPECT_EQ(c.Reply(), "+OK\r\n");
  EXPECT_EQ(c.Reply(), "$-1\r\n");
  EXPECT_EQ(c.Reply(), "+OK\r\n");
  EXPECT_EQ(c.Reply(), Bulk("3"));
}

TEST_F(RespServerTest, AFailoverTheClientCouldNotRideOutIsRetryable) {
  Start();
  Conn c(server_->port());
  EXPECT_EQ(c.Call({"SET", "down1", "v"}),
            "-TRYAGAIN Unavailable: node 1 is not answering; the write may or may not have taken effect\r\n");
  EXPECT_EQ(c.Call({"GET", "down1"}), "-TRYAGAIN Unavailable: node 1 is not answering\r\n");
  EXPECT_TRUE(c.Call({"DEL", "x", "down2"}).starts_with("-TRYAGAIN Timeout"));
  EXPECT_TRUE(c.Call({"MGET", "x", "down2"}).starts_with("-TRYAGAIN"));
}

TEST_F(RespServerTest, PipelinedRepliesComeInRequestOrderAndCommandsGoOutTogether) {
  Start();
  Conn c(server_->port());
  auto key = [](int i) { return (i % 3 == 0 ? "slow" : "fast") + std::to_string(i); };
  // Slow keys answer 50 ms after the others: completions arrive out of order.
  for (const bool reads : {false, true}) {
    client_.Hold(true);
    const size_t calls_before = client_.calls();
    std::string batch;
    for (int i = 0; i < 200; ++i) {
      if (reads) {
        AppendCommand(&batch, {"GET", key(i)});
      } else {
        AppendCommand(&batch, {"SET", key(i), "v" + std::to_string(i)});
      }
      AppendCommand(&batch, {"PING", std::to_string(i)});
    }
    c.Send(batch);
    // Every command was issued before any answered.
    for (int i = 0; i < 500 && client_.calls() < calls_before + 200; ++i) std::this_thread::sleep_for(2ms);
    EXPECT_EQ(client_.calls(), calls_before + 200);
    client_.Hold(false);
    for (int i = 0; i < 200; ++i) {
      ASSERT_EQ(c.Reply(), reads ? Bulk("v" + std::to_string(i)) : "+OK\r\n") << i;
      ASSERT_EQ(c.Reply(), Bulk(std::to_string(i))) << i;
    }
  }
}

TEST_F(RespServerTest, CommandsOfOneConnectionOnOneKeyTakeEffectInOrder) {
  Start();
  Conn c(server_->port());
  // The first SET answers 50 ms late; what follows on its key waits for it,
  // while another key's commands go on.
  std::string batch;
  AppendCommand(&batch, {"SET", "slowk", "1"});
  AppendCommand(&batch, {"GET", "slowk"});
  AppendCommand(&batch, {"SET", "slowk", "2"});
  AppendCommand(&batch, {"MSET", "x", "a", "x", "b", "slowk", "3"});
  AppendCommand(&batch, {"DEL", "x", "x"});
  AppendCommand(&batch, {"MGET", "slowk", "x"});
  c.Send(batch);
  EXPECT_EQ(c.Reply(), "+OK\r\n");
  EXPECT_EQ(c.Reply(), Bulk("1"));
  EXPECT_EQ(c.Reply(), "+OK\r\n");
  EXPECT_EQ(c.Reply(), "+OK\r\n");
  EXPECT_EQ(c.Reply(), ":1\r\n");
  EXPECT_EQ(c.Reply(), "*2\r\n" + Bulk("3") + "$-1\r\n");
}

TEST_F(RespServerTest, AConnectionThatOutrunsItsRepliesIsHeldBackNotDropped) {
  ServerOptions o;
  o.max_in_flight = 4;
  Start(o);
  Conn c(server_->port());
  client_.Hold(true);
  std::string batch;
  for (int i = 0; i < 1000; ++i) AppendCommand(&batch, {"SET", "k" + std::to_string(i), std::to_string(i)});
  c.Send(batch);
  std::this_thread::sleep_for(50ms);
  EXPECT_LE(client_.calls(), 4u);
  client_.Hold(false);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(c.Reply(), "+OK\r\n") << i;
  EXPECT_EQ(client_.data().size(), 1000u);
}

TEST_F(RespServerTest, APipelineLongerThanTheInFlightLimitIsAllAnswered) {
  ServerOptions o;
  o.max_in_flight = 16;
  Start(o);
  Conn c(server_->port());
  // Answered at once, and all in one read: nothing but the replies going
  // out makes room for the rest, which wait in the parser.
  std::string batch;
  for (int i = 0; i < 3000; ++i) AppendCommand(&batch, {"PING"});
  for (int i = 0; i < 100; ++i) AppendCommand(&batch, {"GET", "slow" + std::to_string(i)});
  for (int i = 0; i < 100; ++i) AppendCommand(&batch, {"ECHO", std::to_string(i)});
  c.Send(batch);
  for (int i = 0; i < 3000; ++i) ASSERT_EQ(c.Reply(), "+PONG\r\n") << i;
  for (int i = 0; i < 100; ++i) ASSERT_EQ(c.Reply(), "$-1\r\n") << i;
  for (int i = 0; i < 100; ++i) ASSERT_EQ(c.Reply(), Bulk(std::to_string(i))) << i;
}

TEST_F(RespServerTest, WhatOneConnectionMayMakeTheServerHoldIsBounded) {
  ServerOptions o;
  o.max_query = 1 << 20;
  o.max_keys = 3;
  o.max_reply = 100;
  Start(o);
  {
    // A command bigger than the query limit: an error, then the connection closes.
    Conn c(server_->port());
    std::string big;
    AppendCommand(&big, {"MSET", "a", std::string(600 << 10, 'x'), "b", std::string(600 << 10, 'y')});
    c.Send(big);
    EXPECT_TRUE(c.Reply().starts_with("-ERR query buffer of ")) << "";
    EXPECT_TRUE(c.Closed());
  }
  Conn c(server_->port());
  EXPECT_EQ(c.Call({"MGET", "a", "b", "c", "d"}), "-ERR more than 3 keys in one command\r\n");
  EXPECT_EQ(c.Call({"SET", "a", std::string(60, 'a')}), "+OK\r\n");
  EXPECT_EQ(c.Call({"SET", "b", std::string(60, 'b')}), "+OK\r\n");
  EXPECT_EQ(c.Call({"MGET", "a"}), "*1\r\n" + Bulk(std::string(60, 'a')));
  EXPECT_TRUE(c.Call({"MGET", "a", "b"}).starts_with("-ERR the reply would exceed 100 bytes"));
  EXPECT_EQ(c.Call({"PING"}), "+PONG\r\n");
  EXPECT_TRUE(client_.data().count("a") && !client_.data().count("c"));
}

TEST_F(RespServerTest, InlineCommandsAsTelnetSendsThem) {
  Start();
  Conn c(server_->port());
  c.Send("SET greeting \"hello world\"\r\nGET greeting\nPING\r\n");
  EXPECT_EQ(c.Reply(), "+OK\r\n");
  EXPECT_EQ(c.Reply(), Bulk("hello world"));
  EXPECT_EQ(c.Reply(), "+PONG\r\n");
}

TEST_F(RespServerTest, AProtocolErrorIsAnsweredThenTheConnectionClosesAfterEarlierReplies) {
  Start();
  Conn c(server_->port());
  client_.Hold(true);
  std::string bytes;
  AppendCommand(&bytes, {"SET", "slow1", "v"});
  bytes += "*1\r\n$x\r\n";
  c.Send(bytes);
  std::this_thread::sleep_for(20ms);
  client_.Hold(false);
  EXPECT_EQ(c.Reply(), "+OK\r\n");  // the command before it still answers first
  EXPECT_TRUE(c.Reply().starts_with("-ERR Protocol error"));
  EXPECT_TRUE(c.Closed());
  Conn d(server_->port());
  EXPECT_EQ(d.Call({"GET", "slow1"}), Bulk("v"));
}

TEST_F(RespServerTest, AHugeBulkLengthIsRefusedBeforeAnyAllocation) {
  Start();
  Conn c(server_->port());
  c.Send("*2\r\n$3\r\nGET\r\n$99999999999\r\n");
  EXPECT_TRUE(c.Reply().starts_with("-ERR Protocol error: invalid bulk length"));
  EXPECT_TRUE(c.Closed());
  Conn d(server_->port());
  d.Send("*99999999999\r\n");
  EXPECT_TRUE(d.Reply().starts_with("-ERR Protocol error: invalid multibulk length"));
  EXPECT_EQ(client_.calls(), 0u);
}

TEST_F(RespServerTest, AuthenticationGatesEveryKeyCommand) {
  ServerOptions o;
  o.credentials = [] {
    return std::vector<ServerOptions::Credential>{{"default", "s3cret"}, {"default", "next"}, {"alice", "wonder"}};
  };
  Start(o);
  Conn c(server_->port());
  EXPECT_EQ(c.Call({"GET", "k"}), "-NOAUTH Authentication required.\r\n");
  EXPECT_EQ(c.Call({"SET", "k", "v"}), "-NOAUTH Authentication required.\r\n");
  EXPECT_EQ(c.Call({"AUTH", "wrong"}), "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_EQ(c.Call({"AUTH", "alice", "s3cret"}), "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_EQ(c.Call({"AUTH", "wonder"}), "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_TRUE(c.Call({"HELLO", "2"}).starts_with("-NOAUTH HELLO must be called"));
  EXPECT_EQ(client_.calls(), 0u);
  EXPECT_EQ(c.Call({"AUTH", "s3cret"}), "+OK\r\n");
  EXPECT_EQ(c.Call({"SET", "k", "v"}), "+OK\r\n");
  Conn d(server_->port());
  const std::string hello = d.Call({"HELLO", "2", "AUTH", "default", "next"});
  EXPECT_TRUE(hello.starts_with("*14\r\n$6\r\nserver\r\n$5\r\nredis\r\n")) << hello;
  EXPECT_EQ(d.Call({"GET", "k"}), Bulk("v"));
  EXPECT_EQ(d.Call({"HELLO", "3"}), "-NOPROTO sorry, this protocol version is not supported\r\n");
  Conn e(server_->port());
  EXPECT_EQ(e.Call({"AUTH", "alice", "wonder"}), "+OK\r\n");  // a user of its own
  EXPECT_EQ(e.Call({"GET", "k"}), Bulk("v"));
  // Before AUTH only small commands are parsed (no 16 MiB buffers for strangers) ...
  Conn f(server_->port());
  f.Send("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n");
  EXPECT_TRUE(f.Reply().starts_with("-ERR Protocol error: invalid bulk length"));
  EXPECT_TRUE(f.Closed());
  // ... after it, values of any size the store takes.
  EXPECT_EQ(e.Call({"SET", "big", std::string(100000, 'b')}), "+OK\r\n");
}

TEST_F(RespServerTest, WithoutPasswordsAuthIsAnErrorAndNothingIsGated) {
  Start();
  Conn c(server_->port());
  EXPECT_TRUE(c.Call({"AUTH", "x"}).starts_with("-ERR AUTH <password> called without any password"));
  EXPECT_EQ(c.Call({"SET", "k", "v"}), "+OK\r\n");
}

TEST_F(RespServerTest, IntrospectionForRedisTools) {
  ServerOptions o;
  o.info = [] { return std::string("node:7\r\ndesign:rowan-kv\r\n"); };
  Start(o);
  Conn c(server_->port());
  const std::string info = c.Call({"INFO"});
  EXPECT_NE(info.find("redis_version:"), std::string::npos);
  EXPECT_NE(info.find("connected_clients:1"), std::string::npos);
  EXPECT_NE(info.find("# Slipstream\r\nnode:7\r\ndesign:rowan-kv"), std::string::npos);
  const std::string only = c.Call({"INFO", "clients"});
  EXPECT_EQ(only.find("redis_version"), std::string::npos);
  EXPECT_NE(only.find("connected_clients"), std::string::npos);
  EXPECT_TRUE(c.Call({"COMMAND", "COUNT"}).starts_with(":"));
  EXPECT_TRUE(c.Call({"COMMAND", "INFO", "get", "nope"}).starts_with("*2\r\n*6\r\n$3\r\nget\r\n:2\r\n"));
  EXPECT_TRUE(c.Call({"COMMAND", "DOCS", "set"}).starts_with("*2\r\n$3\r\nset\r\n*6\r\n"));
  EXPECT_TRUE(c.Call({"COMMAND"}).starts_with("*"));
  EXPECT_EQ(c.Call({"CONFIG", "GET", "save"}), "*2\r\n" + Bulk("save") + Bulk(""));
  EXPECT_EQ(c.Call({"CONFIG", "GET", "maxmemory"}), "*0\r\n");
  EXPECT_TRUE(c.Call({"CONFIG", "SET", "save", ""}).starts_with("-ERR CONFIG SET is not supported"));
  EXPECT_EQ(c.Call({"QUIT"}), "+OK\r\n");
  EXPECT_TRUE(c.Closed());
}

TEST_F(RespServerTest, TooManyClientsAreRefusedWithAReason) {
  ServerOptions o;
  o.max_clients = 2;
  Start(o);
  Conn a(server_->port()), b(server_->port());
  EXPECT_EQ(a.Call({"PING"}), "+PONG\r\n");
  EXPECT_EQ(b.Call({"PING"}), "+PONG\r\n");
  Conn c(server_->port());
  EXPECT_EQ(c.Reply(), "-ERR max number of clients reached\r\n");
  EXPECT_TRUE(c.Closed());
  EXPECT_EQ(server_->counters().rejected, 1u);
}

TEST_F(RespServerTest, ClosingWithOperationsInFlightIsSafe) {
  Start();
  {
    Conn c(server_->port());
    client_.Hold(true);
    std::string batch;
    for (int i = 0; i < 50; ++i) AppendCommand(&batch, {"SET", "k" + std::to_string(i), "v"});
    c.Send(batch);
    for (int i = 0; i < 500 && client_.calls() < 50; ++i) std::this_thread::sleep_for(2ms);
  }  // the connection goes away with 50 replies owed
  std::this_thread::sleep_for(20ms);
  server_.reset();         // and then the server
  client_.Hold(false);     // callbacks run after both
  for (int i = 0; i < 500 && client_.data().size() < 50; ++i) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(client_.data().size(), 50u);
}

}  // namespace
}  // namespace slip::resp
