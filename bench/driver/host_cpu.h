// The whole host's CPU over a window, from /proc/stat: what the machine did
// beside the threads a run measures. A benchmark's cores can sit idle while
// every client thread waits (a closed loop's wake-ups), work in softirq
// (loopback TCP's receive path), or be taken by the hypervisor (steal: a
// noisy neighbour). The cost model predicts one number for this, its host's
// busy share (docs/model.md), which validation holds against it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace slip::bench {

// The aggregate "cpu" line of /proc/stat, in clock ticks since boot.
struct HostCpuTimes {
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
};

// Shares of all the host's cores over a window, each in [0, 1]. busy is
// user + nice + system + irq + softirq (guest is inside user, guest_nice
// inside nice); idle is idle + iowait; steal is time the hypervisor ran
// something else.
struct HostCpuShare {
  double busy = 0, softirq = 0, idle = 0, steal = 0;
};

// Parses /proc/stat's text; nullopt if its first line is not an aggregate
// "cpu" line with the seven fields user..softirq at least (a kernel older
// than 2.6.11 has no steal: it is then 0).
std::optional<HostCpuTimes> ParseProcStat(std::string_view text);

// Reads /proc/stat; nullopt where there is none (not Linux, no /proc).
std::optional<HostCpuTimes> ReadHostCpu();

// The window between two samples; nullopt if no tick passed or a busy or
// steal counter went down (samples out of order). idle and iowait may go
// down (proc(5)): such a step counts as 0.
std::optional<HostCpuShare> ShareBetween(const HostCpuTimes& before, const HostCpuTimes& after);

}  // namespace slip::bench
