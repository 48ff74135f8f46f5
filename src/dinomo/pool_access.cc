#include "dinomo/pool_access.h"

#include "proto/kv.h"
#include "proto/pool.h"

namespace slip::dinomo {
namespace {

// The call's failure, or its payload decoded.
Status Answered(const Result<rpc::PeerResponse>& r, const char* what) {
  if (!r.ok()) return r.status();
  if (r->status != Code::kOk) return Status(r->status, std::string(what) + ": " + r->payload);
  return Status::Ok();
}

}  // namespace

void PoolCalls::Layout(fabric::Endpoint* ep, std::weak_ptr<int> alive,
                       std::function<void(Result<PoolAccess>)> done) const {
  calls->Call(pool, static_cast<uint16_t>(proto::Method::kPoolLayout), proto::Encode(proto::PoolNodeRequest{node, epoch}),
              [ep, alive = std::move(alive), done = std::move(done)](Result<rpc::PeerResponse> r) {
                if (alive.expired()) return;
                if (Status s = Answered(r, "pool layout"); !s.ok()) return done(s);
                auto l = proto::DecodePoolLayoutResponse(proto::AsBytes(r->payload));
                if (!l.ok()) return done(l.status());
                auto peer = ep->AddPeer(l->address);
                if (!peer.ok()) return done(peer.status());
                PoolAccess a;
                a.peer = *peer;
                a.region = fabric::RemoteMemory{l->region_addr, l->region_key, l->region_len};
                a.table_offset = l->table_offset;
                a.overflow_offset = l->overflow_offset;
                a.num_buckets = l->num_buckets;
                a.segment_bytes = l->segment_bytes;
                a.persist_by_request = l->persist_by_request;
                done(a);
              });
}

void PoolCalls::Index(PoolAccess* access, std::weak_ptr<int> alive, std::function<void(Status)> done) const {
  calls->Call(pool, static_cast<uint16_t>(proto::Method::kPoolIndex), proto::Encode(proto::PoolNodeRequest{node, epoch}),
              [access, alive = std::move(alive), done = std::move(done)](Result<rpc::PeerResponse> r) {
                if (alive.expired()) return;
                if (Status s = Answered(r, "pool index"); !s.ok()) return done(s);
                auto i = proto::DecodePoolIndexResponse(proto::AsBytes(r->payload), access->region.len);
                if (!i.ok()) return done(i.status());
                access->table_offset = i->table_offset;
                access->overflow_offset = i->overflow_offset;
                access->num_buckets = i->num_buckets;
                done(Status::Ok());
              });
}

}  // namespace slip::dinomo
