#include "dinomo/pool_server.h"

#include "proto/kv.h"
#include "proto/pool.h"

namespace slip::dinomo {

Result<std::unique_ptr<PoolServer>> PoolServer::Create(Pool* pool, pm::PmRegion* region, fabric::Endpoint* ep) {
  std::unique_ptr<PoolServer> s(new PoolServer());
  s->pool_ = pool;
  s->ep_ = ep;
  SLIP_ASSIGN_OR_RETURN(s->mr_, ep->Register(region->base(), region->size(),
                                             fabric::Endpoint::kRemoteRead | fabric::Endpoint::kRemoteWrite));
  return s;
}

PoolServer::~PoolServer() {
  if (ep_ && mr_.base) (void)ep_->Deregister(mr_);
}

void PoolServer::Handle(uint16_t method, std::span<const std::byte> payload, const Reply& reply) {
  auto fail = [&](const Status& s) { reply(s.code(), s.message()); };
  switch (static_cast<proto::Method>(method)) {
    case proto::Method::kPoolLayout: {
      auto r = proto::DecodePoolNodeRequest(payload);
      if (!r.ok()) return fail(r.status());
      const PoolIndex& index = pool_->index();
      const std::string address = ep_->address();
      proto::PoolLayoutResponse l{mr_.remote.addr,       mr_.remote.key,       mr_.remote.len,
                                  index.table_offset(),  index.overflow_offset(), index.num_buckets(),
                                  pool_->segment_bytes(), address};
      return reply(Code::kOk, proto::Encode(l));
    }
    case proto::Method::kPoolAllocate: {
      auto r = proto::DecodePoolNodeRequest(payload);
      if (!r.ok()) return fail(r.status());
      auto s = pool_->Allocate(r->node);
      if (!s.ok()) return fail(s.status());
      return reply(Code::kOk, proto::Encode(proto::PoolAllocateResponse{*s}));
    }
    case proto::Method::kPoolSeal: {
      auto r = proto::DecodePoolSealRequest(payload);
      if (!r.ok()) return fail(r.status());
      auto m = pool_->Seal(r->node, r->segment, r->end);
      if (!m.ok()) return fail(m.status());
      return reply(Code::kOk, proto::Encode(proto::PoolMergedResponse{m->entries, m->applied}));
    }
    case proto::Method::kPoolMergeAll: {
      auto r = proto::DecodePoolNodeRequest(payload);
      if (!r.ok()) return fail(r.status());
      auto m = pool_->MergeAll(r->node);
      if (!m.ok()) return fail(m.status());
      return reply(Code::kOk, proto::Encode(proto::PoolMergedResponse{*m, *m}));
    }
    default:
      return fail(Status::NotSupported(std::string("the pool does not serve ") + proto::MethodName(method)));
  }
}

}  // namespace slip::dinomo
