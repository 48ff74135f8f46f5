// The erda family (docs/papers/erda.md §6). erda: clients read a primary's
// index words and entries one-sidedly and write their entries into places
// it reserved, which it adopts where they landed. Its baselines, from the
// same code: erda-raw (the paper's "read after write": clients write their
// entries one-sidedly into those places and read them back, the node
// copies each into its log) and erda-redo ("redo logging": two-sided; the
// node stages each PUT's entry as a redo record, then copies it into its
// log). Both read two-sidedly. The node side is server/node_core_erda.cc.
//
// What is decided here is how a committed entry reaches the backups:
// rowan-kv's path (a Send into each backup's shared multi-receive log), so
// backups stay as idle as Rowan's and failover, re-replication and cold
// start are the ones every design shares.
#include "replication/erda/erda.h"

#include "replication/rowan/rowan.h"

namespace slip::replication {

namespace {
Design ErdaFamily(Protocol p, std::string_view name, Design::ClientAccess clients) {
  return Design{.protocol = p,
                .name = name,
                .receive = BackupReceive::kSharedLog,
                .senders_share_a_log = true,
                .make_replicator = RowanDesign().make_replicator,
                .clients = clients};
}
}  // namespace

const Design& ErdaDesign() {
  static const Design d = ErdaFamily(Protocol::kErda, "erda", {.reads_one_sided = true, .writes_one_sided = true});
  return d;
}

const Design& ErdaRawDesign() {
  static const Design d =
      ErdaFamily(Protocol::kErdaRaw, "erda-raw", {.writes_one_sided = true, .copies_puts = true});
  return d;
}

const Design& ErdaRedoDesign() {
  static const Design d = ErdaFamily(Protocol::kErdaRedo, "erda-redo", {.copies_puts = true});
  return d;
}

}  // namespace slip::replication
