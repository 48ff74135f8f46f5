#include "replication/registry.h"

#include <string>

#include "replication/batch/batch.h"
#include "replication/erda/erda.h"
#include "replication/rowan/rowan.h"
#include "replication/rpc/rpc.h"
#include "replication/rwrite/rwrite.h"
#include "replication/share/share.h"
#include "replication/tailwind/tailwind.h"

namespace slip::replication {

// The registry: one line per design.
const std::vector<const Design*>& AllDesigns() {
  static const std::vector<const Design*> all = {
      &RpcDesign(),    // rpc-kv
      &RowanDesign(),  // rowan-kv
      &RWriteDesign(),  // rwrite-kv
      &BatchDesign(),  // batch-kv
      &ShareDesign(),  // share-kv
      &TailwindDesign(),  // tailwind
      &ErdaDesign(),      // erda
      &ErdaRawDesign(),   // erda-raw
      &ErdaRedoDesign(),  // erda-redo
  };
  return all;
}

const Design& DesignOf(Protocol protocol) {
  for (const Design* d : AllDesigns()) {
    if (d->protocol == protocol) return *d;
  }
  // Every Protocol value has a registered design (registry_test checks it).
  return *AllDesigns().front();
}

Result<const Design*> FindDesign(std::string_view name) {
  std::string known;
  for (const Design* d : AllDesigns()) {
    if (name == d->name) return d;
    known += known.empty() ? "" : ", ";
    known += d->name;
  }
  return Status::InvalidArgument("unknown design '" + std::string(name) + "' (known: " + known + ")");
}

std::unique_ptr<Replicator> MakeReplicator(Protocol protocol, const ReplicatorContext& context) {
  return DesignOf(protocol).make_replicator(context);
}

const char* DesignName(Protocol p) { return DesignOf(p).name.data(); }

Result<Protocol> ParseDesign(std::string_view name) {
  SLIP_ASSIGN_OR_RETURN(const Design* d, FindDesign(name));
  return d->protocol;
}

const std::vector<Protocol>& AllProtocols() {
  static const std::vector<Protocol> all = [] {
    std::vector<Protocol> v;
    for (const Design* d : AllDesigns()) v.push_back(d->protocol);
    return v;
  }();
  return all;
}

bool IsOneSided(Protocol p) { return DesignOf(p).one_sided(); }

}  // namespace slip::replication
