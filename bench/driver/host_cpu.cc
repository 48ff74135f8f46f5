#include "bench/driver/host_cpu.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <string>

namespace slip::bench {

std::optional<HostCpuTimes> ParseProcStat(std::string_view text) {
  const std::string_view line = text.substr(0, text.find('\n'));
  if (!line.starts_with("cpu ")) return std::nullopt;
  uint64_t v[8] = {};
  size_t n = 0;
  size_t pos = 3;
  while (n < 8) {
    while (pos < line.size() && line[pos] == ' ') ++pos;
    if (pos >= line.size()) break;
    const auto [end, ec] = std::from_chars(line.data() + pos, line.data() + line.size(), v[n]);
    if (ec != std::errc() || (end != line.data() + line.size() && *end != ' ')) return std::nullopt;
    pos = static_cast<size_t>(end - line.data());
    ++n;
  }
  if (n < 7) return std::nullopt;  // steal came with Linux 2.6.11; the rest are older
  return HostCpuTimes{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
}

std::optional<HostCpuTimes> ReadHostCpu() {
  std::ifstream f("/proc/stat");
  if (!f) return std::nullopt;
  std::string first;
  std::getline(f, first);
  return ParseProcStat(first);
}

std::optional<HostCpuShare> ShareBetween(const HostCpuTimes& a, const HostCpuTimes& b) {
  auto d = [](uint64_t x, uint64_t y) { return y >= x ? static_cast<double>(y - x) : -1.0; };
  const double user = d(a.user, b.user), nice = d(a.nice, b.nice), system = d(a.system, b.system),
               irq = d(a.irq, b.irq), softirq = d(a.softirq, b.softirq), steal = d(a.steal, b.steal);
  for (double x : {user, nice, system, irq, softirq, steal}) {
    if (x < 0) return std::nullopt;  // samples out of order
  }
  // proc(5): iowait can go down, and idle has on some tickless kernels; such
  // a step counts as none rather than losing the window.
  const double idle = std::max(0.0, d(a.idle, b.idle)), iowait = std::max(0.0, d(a.iowait, b.iowait));
  const double busy = user + nice + system + irq + softirq;
  const double total = busy + idle + iowait + steal;
  if (total <= 0) return std::nullopt;
  return HostCpuShare{busy / total, softirq / total, (idle + iowait) / total, steal / total};
}

}  // namespace slip::bench
