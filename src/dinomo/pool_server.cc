#include "dinomo/pool_server.h"

#include "proto/kv.h"
#include "proto/pool.h"

namespace slip::dinomo {

Result<std::unique_ptr<PoolServer>> PoolServer::Create(Pool* pool, pm::PmRegion* region, fabric::Endpoint* ep) {
  std::unique_ptr<PoolServer> s(new PoolServer());
  s->pool_ = pool;
  s->region_ = region;
  s->ep_ = ep;
  return s;
}

PoolServer::~PoolServer() {
  for (auto& [node, mr] : registrations_) (void)ep_->Deregister(mr);
}

void PoolServer::Revoke(uint32_t node) {
  auto it = registrations_.find(node);
  if (it == registrations_.end()) return;
  (void)ep_->Deregister(it->second);
  registrations_.erase(it);
}

void PoolServer::Handle(uint16_t method, std::span<const std::byte> payload, const Reply& reply) {
  auto fail = [&](const Status& s) { reply(s.code(), s.message()); };
  switch (static_cast<proto::Method>(method)) {
    case proto::Method::kPoolLayout: {
      auto r = proto::DecodePoolNodeRequest(payload);
      if (!r.ok()) return fail(r.status());
      if (Status s = pool_->Admit(r->node, r->epoch); !s.ok()) return fail(s);
      // A fresh registration per admission: whatever key an earlier
      // incarnation of the node held stops working.
      Revoke(r->node);
      auto mr = ep_->Register(region_->base(), region_->size(),
                              fabric::Endpoint::kRemoteRead | fabric::Endpoint::kRemoteWrite |
                                  fabric::Endpoint::kRemoteAtomic);  // Clover's chains (dinomo/clover.h)
      if (!mr.ok()) return fail(mr.status());
      registrations_[r->node] = *mr;
      const Pool::IndexPlace index = pool_->index_place();
      const std::string address = ep_->address();
      proto::PoolLayoutResponse l{mr->remote.addr,        mr->remote.key,          mr->remote.len,
                                  index.table_offset,     index.overflow_offset,   index.num_buckets,
                                  pool_->segment_bytes(), address,
                                  // One-sided writes are durable only once persisted, by
                                  // msync (a file) or cache-line write-back (DAX): no fabric
                                  // here promises to write through to PM.
                                  region_->mode() != pm::PersistMode::kNone};
      return reply(Code::kOk, proto::Encode(l));
    }
    case proto::Method::kPoolAllocate: {
      auto r = proto::DecodePoolNodeRequest(payload);
      if (!r.ok()) return fail(r.status());
      if (Status s = pool_->CheckToken(r->node, r->epoch); !s.ok()) return fail(s);
      auto s = pool_->Allocate(r->node);
      if (!s.ok()) return fail(s.status());
      return reply(Code::kOk, proto::Encode(proto::PoolAllocateResponse{*s}));
    }
    case proto::Method::kPoolSeal: {
      auto r = proto::DecodePoolSealRequest(payload);
      if (!r.ok()) return fail(r.status());
      if (Status s = pool_->CheckToken(r->node, r->epoch); !s.ok()) return fail(s);
      auto m = pool_->Seal(r->node, r->segment, r->end);
      if (!m.ok()) return fail(m.status());
      return reply(Code::kOk, proto::Encode(proto::PoolMergedResponse{m->entries, m->applied}));
    }
    case proto::Method::kPoolIndex: {
      auto r = proto::DecodePoolNodeRequest(payload);
      if (!r.ok()) return fail(r.status());
      if (Status s = pool_->CheckToken(r->node, r->epoch); !s.ok()) return fail(s);
      const Pool::IndexPlace index = pool_->index_place();
      return reply(Code::kOk, proto::Encode(proto::PoolIndexResponse{index.table_offset, index.overflow_offset,
                                                                       index.num_buckets}));
    }
    case proto::Method::kPoolPersist: {
      auto r = proto::DecodePoolPersistRequest(payload);
      if (!r.ok()) return fail(r.status());
      if (Status s = pool_->CheckToken(r->node, r->epoch); !s.ok()) return fail(s);
      if (r->offset < pool_->segments_offset() || r->bytes > region_->size() || r->offset > region_->size() - r->bytes) {
        return fail(Status::InvalidArgument("pool persist: the range is not in the pool's segments"));
      }
      if (r->bytes > 0) region_->Persist(region_->at(r->offset), r->bytes);
      return reply(Code::kOk, "");
    }
    case proto::Method::kCloverInsert: {
      auto r = proto::DecodeCloverInsertRequest(payload);
      if (!r.ok()) return fail(r.status());
      if (Status s = pool_->CheckToken(r->node, r->epoch); !s.ok()) return fail(s);
      // The block follows its version's 64-byte line of the link word, both
      // inside one open segment of the node.
      if (r->offset % 64 != 0 || r->bytes == 0 || r->bytes % 64 != 0 || r->offset < 64) {
        return fail(Status::InvalidArgument("clover insert: no version at offset " + std::to_string(r->offset)));
      }
      if (Status in = pool_->CheckInOpenSegment(r->node, r->offset - 64, uint64_t{r->bytes} + 64); !in.ok()) {
        return fail(in);
      }
      auto head = pool_->CompareAndSetIndex(std::nullopt, IndexPointer{r->offset, r->bytes});
      if (!head.ok()) return fail(head.status());
      return reply(Code::kOk, proto::Encode(proto::CloverHeadResponse{head->offset, head->bytes}));
    }
    case proto::Method::kPoolShare:
    case proto::Method::kPoolUnshare: {
      auto r = proto::DecodePoolKeyRequest(payload);
      if (!r.ok()) return fail(r.status());
      if (Status s = pool_->CheckToken(r->node, r->epoch); !s.ok()) return fail(s);
      if (static_cast<proto::Method>(method) == proto::Method::kPoolUnshare) {
        Status s = pool_->Unshare(r->key);
        return s.ok() ? reply(Code::kOk, "") : fail(s);
      }
      auto cell = pool_->Share(r->key);
      if (!cell.ok()) return fail(cell.status());
      return reply(Code::kOk, proto::Encode(proto::CloverHeadResponse{cell->offset, cell->bytes}));
    }
    case proto::Method::kPoolShared: {
      auto r = proto::DecodePoolNodeRequest(payload);
      if (!r.ok()) return fail(r.status());
      if (Status s = pool_->CheckToken(r->node, r->epoch); !s.ok()) return fail(s);
      return reply(Code::kOk, proto::Encode(proto::PoolKeysResponse{pool_->SharedKeys()}));
    }
    case proto::Method::kPoolMergeAll: {
      // `epoch`: the configuration in which the node no longer works.
      auto r = proto::DecodePoolNodeRequest(payload);
      if (!r.ok()) return fail(r.status());
      if (Status s = pool_->Fence(r->node, r->epoch); !s.ok()) return fail(s);
      Revoke(r->node);
      auto m = pool_->MergeAll(r->node);
      if (!m.ok()) return fail(m.status());
      return reply(Code::kOk, proto::Encode(proto::PoolMergedResponse{*m, *m}));
    }
    default:
      return fail(Status::NotSupported(std::string("the pool does not serve ") + proto::MethodName(method)));
  }
}

}  // namespace slip::dinomo
