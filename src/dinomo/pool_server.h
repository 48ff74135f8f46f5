// PoolServer: the pool's side of the wire (proto/pool.h) — the POOL_* calls
// on top of a Pool, and the pool's region registered on its endpoint for
// the KVS nodes' one-sided READs (index buckets, entries) and WRITEs (their
// logs).
//
// A seal is merged inside its call, on the calling executor (the paper's
// merge threads are the pool's executors; back-pressure keeps a node from
// sealing faster than that). Not built yet: fencing — a node the manager
// declared gone can still write one-sidedly until its registration key is
// revoked.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"
#include "dinomo/pool.h"
#include "fabric/fabric.h"
#include "pm/region.h"

namespace slip::dinomo {

class PoolServer {
 public:
  using Reply = std::function<void(Code, std::string)>;
  // Registers `region` (which `pool` lives in) on `ep` before anything
  // polls `ep` for peers' one-sided operations.
  static Result<std::unique_ptr<PoolServer>> Create(Pool* pool, pm::PmRegion* region, fabric::Endpoint* ep);
  ~PoolServer();

  // A POOL_* request. Replies once, inside the call.
  void Handle(uint16_t method, std::span<const std::byte> payload, const Reply& reply);

 private:
  PoolServer() = default;

  Pool* pool_ = nullptr;
  fabric::Endpoint* ep_ = nullptr;
  fabric::MemoryRegion mr_;
};

}  // namespace slip::dinomo
