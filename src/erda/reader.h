// Erda's GET without the server's CPU (docs/papers/erda.md §2.2): a READ of
// the key's probe window, then a READ of the object an index word names;
// the client checks the CRC and the key itself and falls back to the old
// version when the newest one does not check out.
//
// With flip at commit (§6.4) the newest version is always complete, so a
// failing check means damage or a race with cleaning; when no version of
// the key checks out the reader answers Unavailable, and the caller asks
// the server (a two-sided GET), which never returns unchecked bytes either.
//
// Runs on the executor that polls `ep`; completions whose context the
// reader did not issue are not its own (OnCompletion returns false), so the
// endpoint can be shared with other users that tag their contexts apart.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "erda/engine.h"
#include "fabric/fabric.h"

namespace slip::erda {

struct ReaderOptions {
  // The first READ of an object fetches this many bytes; a larger object
  // costs a second READ of the rest.
  size_t first_read = 512;
  // Contexts this reader issues are (tag << 56) | sequence.
  uint8_t context_tag = 0xE5;
};

struct ReaderStats {
  uint64_t gets = 0;
  uint64_t reads = 0;            // one-sided READs issued
  uint64_t old_version = 0;      // GETs answered from an old offset
  uint64_t inconclusive = 0;     // GETs answered Unavailable (ask the server)
};

class OneSidedReader {
 public:
  // `remote`: the server's registration of its whole Erda region; `layout`
  // and `limits`: the server's (sent when the client connects).
  OneSidedReader(fabric::Endpoint* ep, fabric::PeerId server, fabric::RemoteMemory remote, Layout layout,
                 log::Limits limits, ReaderOptions options = {});
  ~OneSidedReader();

  using Done = std::function<void(Result<std::string>)>;
  // The value, NotFound (absent or deleted), Unavailable (inconclusive: ask
  // the server), or the fabric's error. `done` runs from OnCompletion.
  void Get(std::string key, Done done);

  // Feeds a completion polled from the endpoint; false if not this reader's.
  bool OnCompletion(const fabric::Completion& c);

  const ReaderStats& stats() const { return stats_; }
  size_t in_flight() const { return ops_.size(); }

 private:
  struct Op;
  void ReadWindow(std::shared_ptr<Op> op);
  void NextVersion(std::shared_ptr<Op> op);
  void ReadObject(std::shared_ptr<Op> op, uint64_t units, size_t len);
  void OnObject(std::shared_ptr<Op> op, size_t requested);
  void Issue(std::shared_ptr<Op> op, uint64_t remote_offset, size_t len);
  void Finish(std::shared_ptr<Op> op, Result<std::string> r);

  fabric::Endpoint* ep_;
  fabric::PeerId server_;
  fabric::RemoteMemory remote_;
  Layout layout_;
  log::Limits limits_;
  ReaderOptions options_;
  uint64_t next_ = 1;
  std::unordered_map<uint64_t, std::shared_ptr<Op>> ops_;  // by the context of their READ
  ReaderStats stats_;
};

}  // namespace slip::erda
