// Child process of kill_test: opens (recovering) the store in a file and
// applies the deterministic workload forever, reporting on fd 1:
//   "I <index>\n" before an operation, "A <index> <ok|notfound>\n" after it.
// The parent SIGKILLs it at a random moment.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "store/store.h"
#include "crash/workload.h"

namespace {

void Report(const std::string& line) {
  // One write() per line: the parent sees whole lines even at a kill.
  ssize_t n = write(1, line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) std::_Exit(3);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: store_child PATH SEED\n");
    return 2;
  }
  const std::string path = argv[1];
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  auto region = slip::pm::PmRegion::OpenFile(path, 16 << 20, {});
  if (!region.ok()) {
    std::fprintf(stderr, "open region: %s\n", region.status().ToString().c_str());
    return 1;
  }
  slip::store::StoreOptions o;
  o.geometry.segment_size = 256 << 10;
  o.max_block_bytes = 16 << 10;
  o.limits.max_key = 1024;  // must match kill_test.cc ChildOptions()
  auto store = slip::store::Store::Open(region->get(), o);
  if (!store.ok()) {
    std::fprintf(stderr, "open store: %s\n", store.status().ToString().c_str());
    return 1;
  }
  for (uint64_t i = 0;; ++i) {
    slip::crashtest::Op op = slip::crashtest::MakeOp(seed, i);
    Report("I " + std::to_string(i) + "\n");
    slip::Status s = op.is_delete ? (*store)->Delete(0, op.key) : (*store)->Put(0, op.key, op.value);
    while (s.Is(slip::Code::kNoSpace)) {
      auto c = (*store)->CleanStep();
      if (!c.ok() || !*c) {
        std::fprintf(stderr, "store full and nothing to clean\n");
        return 1;
      }
      s = op.is_delete ? (*store)->Delete(0, op.key) : (*store)->Put(0, op.key, op.value);
    }
    if (!s.ok() && !s.Is(slip::Code::kNotFound)) {
      std::fprintf(stderr, "op %llu: %s\n", static_cast<unsigned long long>(i), s.ToString().c_str());
      return 1;
    }
    if (i % 64 == 0) (void)(*store)->CleanStep();
    Report("A " + std::to_string(i) + (s.ok() ? " ok\n" : " notfound\n"));
  }
}
