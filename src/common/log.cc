#include "common/log.h"

#include <array>
#include <memory>
#include <vector>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace slip::logging {
namespace {

constexpr std::array<const char*, 6> kNames = {"trace", "debug", "info", "warn", "error", "off"};

spdlog::level::level_enum ToSpd(Level l) {
  switch (l) {
    case Level::kTrace: return spdlog::level::trace;
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: return spdlog::level::err;
    case Level::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

Result<Level> ParseLevel(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (name == kNames[i]) return static_cast<Level>(i);
  }
  return Status::InvalidArgument("unknown log level '" + std::string(name) +
                                 "' (trace, debug, info, warn, error, off)");
}

const char* LevelName(Level level) { return kNames[static_cast<size_t>(level)]; }

Status Configure(const Options& o) {
  std::vector<spdlog::sink_ptr> sinks;
  if (o.to_stderr) sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (!o.file.empty()) {
    try {
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(o.file, /*truncate=*/false));
    } catch (const spdlog::spdlog_ex& e) {
      return Status::IoError("cannot open log file " + o.file + ": " + e.what());
    }
  }
  auto logger = std::make_shared<spdlog::logger>(o.name, sinks.begin(), sinks.end());
  // Millisecond wall time, level, process name: lines from the processes of
  // one cluster can be merged by sorting.
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %n: %v");
  logger->set_level(ToSpd(o.level));
  // Warnings and errors reach the file at once: a process that is killed
  // right after must not take its last words with it.
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
  return Status::Ok();
}

void SetLevel(Level level) { spdlog::set_level(ToSpd(level)); }

void Flush() { spdlog::default_logger()->flush(); }

}  // namespace slip::logging
