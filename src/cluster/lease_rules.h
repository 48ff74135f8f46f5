// The lease rules every ConfigStore backend applies the same way (private
// to cluster/): which names and arguments are valid, and when a lease has
// expired.
#pragma once

#include <limits>
#include <string>

#include "common/status.h"
#include "runtime/runtime.h"

namespace slip::cluster::internal {

inline Status CheckLeaseName(const std::string& name) {
  if (name.empty() || name.size() > 100 ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
          std::string::npos ||
      name[0] == '.') {
    return Status::InvalidArgument("lease name \"" + name + "\": use [A-Za-z0-9_.-], 1..100 chars");
  }
  return Status::Ok();
}

inline Status CheckLeaseArgs(const std::string& name, const std::string& holder, runtime::Nanos ttl,
                             runtime::Nanos now) {
  SLIP_RETURN_IF_ERROR(CheckLeaseName(name));
  if (holder.empty()) return Status::InvalidArgument("lease holder is empty");
  if (ttl <= 0 || now < 0 || now > std::numeric_limits<runtime::Nanos>::max() - ttl) {
    return Status::InvalidArgument("lease ttl must be positive and now + ttl representable");
  }
  return Status::Ok();
}

// An expiry far ahead of `now` was granted by a clock that has since gone
// back (a reboot, for CLOCK_MONOTONIC): the holder is gone with it. "Far" is
// two ttls, not one: callers read `now` before they wait for the store, so a
// manager probing with a `now` a few milliseconds old meets leases granted
// after it, up to a ttl ahead plus that lag — live leases, which one ttl of
// tolerance would have voided (a node lost its lease right after taking it).
inline bool LeaseExpired(runtime::Nanos expiry, runtime::Nanos ttl, runtime::Nanos now) {
  return now >= expiry || expiry - now > 2 * ttl;
}

}  // namespace slip::cluster::internal
