#include "dinomo/partitioned_pool.h"

#include <cstring>
#include <set>

#include "common/hash.h"
#include "dinomo/shared_nothing.h"
#include "proto/kv.h"
#include "proto/pool.h"

namespace slip::dinomo {

Pool* PartitionedPool::pool(uint32_t node) {
  auto it = partitions_.find(node);
  return it == partitions_.end() ? nullptr : it->second.pool.get();
}

Status PartitionedPool::Open(uint32_t node) { return PartitionOf(node).status(); }

Result<PartitionedPool::Partition*> PartitionedPool::PartitionOf(uint32_t node) {
  if (auto it = partitions_.find(node); it != partitions_.end()) return &it->second;
  if (node >= Pool::kMaxNodes) return Status::InvalidArgument("no partition for node " + std::to_string(node));
  Partition p;
  SLIP_ASSIGN_OR_RETURN(p.region, open_(node));
  SLIP_ASSIGN_OR_RETURN(p.pool, Pool::Open(p.region.get(), options_));
  SLIP_ASSIGN_OR_RETURN(p.server, PoolServer::Create(p.pool.get(), p.region.get(), ep_));
  return &partitions_.emplace(node, std::move(p)).first->second;
}

void PartitionedPool::Handle(uint16_t method, std::span<const std::byte> payload, const Reply& reply) {
  if (method == static_cast<uint16_t>(proto::Method::kPoolAdopt)) return Adopt(payload, reply);
  // Every POOL_* request starts with the node's id: its partition serves it.
  if (payload.size() < 4) return reply(Code::kInvalidArgument, "a pool request too short to name its node");
  uint32_t node;
  std::memcpy(&node, payload.data(), 4);
  auto part = PartitionOf(node);
  if (!part.ok()) return reply(part.status().code(), part.status().message());
  (*part)->server->Handle(method, payload, reply);
}

void PartitionedPool::Adopt(std::span<const std::byte> payload, const Reply& reply) {
  auto r = proto::DecodePoolAdoptRequest(payload);
  if (!r.ok()) return reply(r.status().code(), r.status().message());
  auto to = PartitionOf(r->node);
  if (!to.ok()) return reply(to.status().code(), to.status().message());
  const std::set<uint32_t> shards(r->shards.begin(), r->shards.end());
  auto moving = [&](std::string_view key) { return shards.contains(ShardOfHash(HashKey(key), r->num_shards)); };
  proto::PoolAdoptResponse out;
  for (auto& [id, from] : partitions_) {
    if (id == r->node || shards.empty()) continue;
    auto c = CopyKeys(*from.pool, *from.region, *(*to)->pool, *(*to)->region, r->node, moving);
    if (!c.ok()) {
      return reply(c.status().code(),
                   "copying from node " + std::to_string(id) + "'s partition: " + c.status().message());
    }
    out.keys += c->keys;
    out.bytes += c->bytes;
  }
  adopted_keys_ += out.keys;
  adopted_bytes_ += out.bytes;
  reply(Code::kOk, proto::Encode(out));
}

}  // namespace slip::dinomo
