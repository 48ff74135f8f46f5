// ErdaNode: the node-wide half of the erda family — the index mirror hooked
// to the store, the bucket table registered for clients' one-sided reads on
// the node's one-sided endpoint (erda only), and the layout ERDA_GRANT
// answers (docs/papers/erda.md §6). The per-worker half is ErdaHeads.
//
// Clients reach the node through the endpoint the backup log already
// serves (its NIC role polls it, so on software providers their READs and
// WRITEs progress there) and its registration of the store's segment area.
#pragma once

#include <cstdint>
#include <memory>

#include "common/status.h"
#include "fabric/fabric.h"
#include "replication/backup_log.h"
#include "runtime/runtime.h"
#include "server/erda_heads.h"
#include "server/erda_mirror.h"
#include "server/node_core.h"
#include "store/store.h"

namespace slip::server {

struct ErdaNodeOptions {
  uint32_t buckets = 0;  // 0: ErdaMirror::DefaultBuckets of the store region
  // A grant never outlasts the node's lease; this caps it further.
  runtime::Nanos max_grant = 100 * runtime::kMillisecond;
  // A one-sided GET slower than this asks the server; freed segments are
  // held at least this long before reuse (Store::ReleaseHeldSegments).
  runtime::Nanos max_read = 50 * runtime::kMillisecond;
  // The largest entry a client writes one-sidedly (larger: a two-sided PUT).
  uint32_t max_entry_bytes = 64 << 10;
  // Clients read the bucket table one-sidedly (erda); false: no mirror, no
  // table, GETs stay two-sided (erda-raw, erda-redo).
  bool readable_table = true;
  // ErdaLayout::copy_puts (erda-raw, erda-redo).
  bool copy_puts = false;
};

class ErdaNode {
 public:
  // Before anything polls `ep` (registration is the endpoint owner's call).
  // REQUIRES: the store was opened with hold_freed_segments when clients
  // read the table.
  static Result<std::unique_ptr<ErdaNode>> Create(store::Store* store, fabric::Endpoint* ep,
                                                  const replication::BackupLog& backup,
                                                  const ErdaNodeOptions& options);
  ~ErdaNode();

  std::shared_ptr<const ErdaLayout> layout() const { return layout_; }
  // Null without a readable table.
  const ErdaMirror* mirror() const { return mirror_.get(); }

 private:
  ErdaNode() = default;

  store::Store* store_ = nullptr;
  fabric::Endpoint* ep_ = nullptr;
  std::unique_ptr<ErdaMirror> mirror_;
  fabric::MemoryRegion table_mr_;
  std::shared_ptr<ErdaLayout> layout_;
};

}  // namespace slip::server
