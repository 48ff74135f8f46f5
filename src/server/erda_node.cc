#include "server/erda_node.h"

#include <algorithm>

namespace slip::server {

Result<std::unique_ptr<ErdaNode>> ErdaNode::Create(store::Store* store, fabric::Endpoint* ep,
                                                   const replication::BackupLog& backup,
                                                   const ErdaNodeOptions& options) {
  if (options.readable_table && !store->options().hold_freed_segments) {
    return Status::InvalidArgument("erda needs a store that holds freed segments back from reuse");
  }
  std::unique_ptr<ErdaNode> n(new ErdaNode());
  n->store_ = store;
  n->ep_ = ep;
  if (options.readable_table) {
    const uint32_t buckets =
        options.buckets != 0 ? options.buckets : ErdaMirror::DefaultBuckets(store->region().size());
    SLIP_ASSIGN_OR_RETURN(n->mirror_, ErdaMirror::Create(store, buckets));
    n->mirror_->Rebuild();
    SLIP_ASSIGN_OR_RETURN(n->table_mr_, ep->Register(n->mirror_->table_base(), n->mirror_->table_bytes(),
                                                     fabric::Endpoint::kRemoteRead));
    ErdaMirror* m = n->mirror_.get();
    store->set_on_index_change([m](uint64_t hash, std::string_view key) { m->Changed(hash, key); });
  }

  auto layout = std::make_shared<ErdaLayout>();
  layout->address = backup.address();
  layout->max_grant = options.max_grant;
  proto::ErdaGrantResponse& g = layout->grant;
  g.max_read_ns = static_cast<uint64_t>(options.max_read);
  g.area_addr = backup.area().remote.addr;
  g.area_key = backup.area().remote.key;
  g.area_len = backup.area().remote.len;
  g.area_offset = backup.area_offset();
  if (n->mirror_) {
    g.table_addr = n->table_mr_.remote.addr;
    g.table_key = n->table_mr_.remote.key;
    g.table_len = n->table_mr_.remote.len;
    g.num_buckets = n->mirror_->num_buckets();
  }
  layout->copy_puts = options.copy_puts;
  g.max_entry_bytes = std::min<uint32_t>({options.max_entry_bytes, store->options().max_block_bytes,
                                          static_cast<uint32_t>(store->segments().segment_size() / 4)});
  n->layout_ = std::move(layout);
  return n;
}

ErdaNode::~ErdaNode() {
  if (store_ && mirror_) store_->set_on_index_change(nullptr);
  if (ep_ && table_mr_.base) (void)ep_->Deregister(table_mr_);
}

}  // namespace slip::server
