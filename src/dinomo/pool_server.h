// PoolServer: the pool's side of the wire (proto/pool.h) — the POOL_* calls
// on top of a Pool, and the pool's region registered on its endpoint for
// the KVS nodes' one-sided READs (index buckets, entries) and WRITEs (their
// logs).
//
// A seal is merged inside its call, on the calling executor (the paper's
// merge threads are the pool's executors; back-pressure keeps a node from
// sealing faster than that).
//
// Fencing: every call carries the node's token (Pool::Admit). Each node
// reaches the region through a registration of its own, made when it is
// admitted (POOL_LAYOUT); POOL_MERGE_ALL fences the node and revokes that
// registration before it merges, so a node cut off by a reconfiguration —
// even one still running — can neither write one-sidedly nor allocate or
// seal again, and nothing it writes afterwards is ever merged.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
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
  // `region` (which `pool` lives in) is registered on `ep` per node, as
  // nodes are admitted.
  static Result<std::unique_ptr<PoolServer>> Create(Pool* pool, pm::PmRegion* region, fabric::Endpoint* ep);
  ~PoolServer();

  // A POOL_* request. Replies once, inside the call.
  void Handle(uint16_t method, std::span<const std::byte> payload, const Reply& reply);

 private:
  PoolServer() = default;

  // Revokes `node`'s registration (if any).
  void Revoke(uint32_t node);

  Pool* pool_ = nullptr;
  pm::PmRegion* region_ = nullptr;
  fabric::Endpoint* ep_ = nullptr;
  std::map<uint32_t, fabric::MemoryRegion> registrations_;  // per admitted node
};

}  // namespace slip::dinomo
