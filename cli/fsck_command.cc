#include "cli/fsck_command.h"

#include <cstdio>
#include <cstring>
#include <fstream>

#include "cluster/cluster_config.h"
#include "cluster/config_access.h"
#include "node/node_process.h"
#include "pm/region.h"
#include "store/store.h"

namespace slip::cli {
namespace {

Result<std::string> PmFileOf(const FsckOptions& o) {
  if (!o.file.empty()) return o.file;
  if (o.dir.empty()) return Status::InvalidArgument("give --file F, or --dir DIR with --node N");
  SLIP_ASSIGN_OR_RETURN(auto store, cluster::OpenConfigStore(o.dir, o.zookeeper));
  SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig vc, store->Load());
  if (!vc.config.nodes.contains(o.node)) {
    return Status::InvalidArgument("node " + std::to_string(o.node) + " is not a member of the cluster");
  }
  if (cluster::UsesPool(vc.config.design) || cluster::UsesChain(vc.config.design)) {
    return Status::NotSupported("design " + vc.config.design + " keeps no PM log store on its nodes");
  }
  SLIP_ASSIGN_OR_RETURN(node::PmPlace place, node::PlacePm(vc.config.pm, o.dir, o.node));
  return place.path;
}

// The whole file in anonymous memory: recovery seals and erases what it
// finds, and a check must change nothing.
Result<std::unique_ptr<pm::PmRegion>> CopyOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Status::IoError("cannot open " + path + ": " + std::strerror(errno));
  const auto size = static_cast<size_t>(in.tellg());
  if (size == 0) return Status::Corruption(path + " is empty");
  SLIP_ASSIGN_OR_RETURN(auto region, pm::PmRegion::Anonymous(size, {}));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(region->base()), static_cast<std::streamsize>(size))) {
    return Status::IoError("cannot read " + path);
  }
  return region;
}

}  // namespace

int RunFsck(const FsckOptions& o) {
  auto path = PmFileOf(o);
  if (!path.ok()) {
    std::fprintf(stderr, "slip fsck: %s\n", path.status().ToString().c_str());
    return 2;
  }
  auto region = CopyOf(*path);
  if (!region.ok()) {
    std::fprintf(stderr, "slip fsck: %s\n", region.status().ToString().c_str());
    return 2;
  }
  store::StoreOptions so;
  so.tears_possible = node::PowerMayHaveFailed(*path);
  auto store = store::Store::Open(region->get(), so);
  if (!store.ok()) {
    // A damaged superblock or meta table: the file is not a store at all.
    std::printf("%s: DAMAGED: %s\n", path->c_str(), store.status().ToString().c_str());
    return 1;
  }
  if (so.tears_possible) {
    std::printf("%s: no record that it was last written in this boot: a broken block at the end of an open "
                "segment counts as a crash's tear\n", path->c_str());
  }
  const store::RecoveryStats& rs = (*store)->recovery_stats();
  std::printf("%s: %u segments, %llu entries, %llu incomplete, %llu torn places of a crash\n", path->c_str(),
              rs.segments_scanned, static_cast<unsigned long long>(rs.entries),
              static_cast<unsigned long long>(rs.incomplete_entries), static_cast<unsigned long long>(rs.torn_erased));
  if (rs.damaged == 0) {
    std::printf("no damage\n");
    return 0;
  }
  std::printf("DAMAGED: %s\n", rs.DescribeDamage().c_str());
  return 1;
}

}  // namespace slip::cli
