// erda (docs/papers/erda.md §6): clients read a primary's index words and
// entries one-sidedly and write their entries into places it reserved; the
// node side is server/node_core_erda.cc and server/erda_mirror.h. What is
// decided here is how a committed entry reaches the backups: rowan-kv's
// path (a Send into each backup's shared multi-receive log), so backups
// stay as idle as Rowan's and failover, re-replication and cold start are
// the ones every design shares.
#include "replication/erda/erda.h"

#include "replication/rowan/rowan.h"

namespace slip::replication {

const Design& ErdaDesign() {
  static const Design d{.protocol = Protocol::kErda,
                        .name = "erda",
                        .receive = BackupReceive::kSharedLog,
                        .senders_share_a_log = true,
                        .make_replicator = RowanDesign().make_replicator,
                        .direct_clients = true};
  return d;
}

}  // namespace slip::replication
