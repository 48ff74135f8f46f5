// kv_example: the client library's calls, against a running cluster.
//
//   kv_example --dir DIR          (a cluster started with `slip cluster up --dir DIR`)
//   kv_example --zookeeper H:P    (a cluster configured in ZooKeeper)
//
// Writes, reads and deletes a few keys with the blocking calls, then many
// with the asynchronous ones, and shows what an error looks like. Prints one
// line per step; exits non-zero at the first surprise.
#include <slip/client.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

namespace {

int Fail(const char* what, const slip::Status& s) {
  std::fprintf(stderr, "kv_example: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

// Counts asynchronous completions down to zero and remembers the first error.
class Countdown {
 public:
  explicit Countdown(int n) : left_(n) {}
  void Done(const slip::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok() && first_error_.ok()) first_error_ = s;
    if (--left_ == 0) cv_.notify_all();
  }
  slip::Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return left_ == 0; });
    return first_error_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
  slip::Status first_error_;
};

}  // namespace

int main(int argc, char** argv) {
  slip::ClientOptions options;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--dir") == 0) options.dir = argv[i + 1];
    if (std::strcmp(argv[i], "--zookeeper") == 0) options.zookeeper = argv[i + 1];
  }
  if (options.dir.empty() && options.zookeeper.empty()) {
    std::fprintf(stderr, "usage: kv_example --dir DIR | --zookeeper HOST:PORT\n");
    return 2;
  }

  auto client = slip::Client::Open(options);
  if (!client.ok()) return Fail("open", client.status());
  slip::Client& kv = **client;

  // Blocking calls. OK means the write is persistent on every replica.
  if (auto s = kv.Put("greeting", "hello, slipstream"); !s.ok()) return Fail("put", s);
  auto v = kv.Get("greeting");
  if (!v.ok()) return Fail("get", v.status());
  std::printf("get greeting -> %s\n", v->c_str());
  if (auto s = kv.Delete("greeting"); !s.ok()) return Fail("delete", s);
  auto gone = kv.Get("greeting");
  if (gone.ok() || gone.status().code() != slip::Code::kNotFound) {
    return Fail("get after delete (want NotFound)", gone.status());
  }
  std::printf("after delete: %s\n", gone.status().ToString().c_str());

  // Asynchronous calls: many in flight; callbacks run on the client's thread.
  constexpr int kKeys = 100;
  Countdown puts(kKeys);
  for (int i = 0; i < kKeys; ++i) {
    kv.PutAsync("key" + std::to_string(i), "value" + std::to_string(i), [&](slip::Status s) { puts.Done(s); });
  }
  if (auto s = puts.Wait(); !s.ok()) return Fail("async put", s);
  std::atomic<int> matched{0};
  Countdown gets(kKeys);
  for (int i = 0; i < kKeys; ++i) {
    kv.GetAsync("key" + std::to_string(i), [&, want = "value" + std::to_string(i)](slip::Result<std::string> r) {
      if (r.ok() && *r == want) ++matched;
      gets.Done(r.ok() ? slip::Status::Ok() : r.status());
    });
  }
  if (auto s = gets.Wait(); !s.ok()) return Fail("async get", s);
  std::printf("async: %d of %d keys read back\n", matched.load(), kKeys);
  if (matched != kKeys) return 1;
  Countdown dels(kKeys);
  for (int i = 0; i < kKeys; ++i) {
    kv.DeleteAsync("key" + std::to_string(i), [&](slip::Status s) { dels.Done(s); });
  }
  if (auto s = dels.Wait(); !s.ok()) return Fail("async delete", s);

  // Bad input is refused with a reason and changes nothing.
  auto bad = kv.Put(std::string(70000, 'k'), "v");
  std::printf("oversized key: %s\n", bad.ToString().c_str());
  if (bad.ok()) return 1;

  std::printf("ok\n");
  return 0;
}
