// Diagnostics: one logger per process, through spdlog.
//
//   logging::Configure({.name = "server-1", .file = dir + "/node-1.log"});
//   logging::Info("store recovered: {} entries", n);
//
// Output that is a command's result (what `slip get` prints, a benchmark's
// table) is not a diagnostic and goes to stdout as before; this is for what a
// person reads when something went wrong. Without Configure, messages go to
// stderr at level info, so tests and tools log with no ceremony.
//
// Thread-safe: any thread may log; Configure is meant to run once, early.
#pragma once

#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "common/status.h"

namespace slip::logging {

enum class Level : uint8_t { kTrace, kDebug, kInfo, kWarn, kError, kOff };

struct Options {
  std::string name = "slip";  // shown on every line: which process wrote it
  std::string file;           // append here too (empty: stderr only)
  bool to_stderr = true;
  Level level = Level::kInfo;
};

// "trace", "debug", "info", "warn", "error", "off"; InvalidArgument naming
// the levels for anything else.
Result<Level> ParseLevel(std::string_view name);
const char* LevelName(Level level);

// Replaces the process's logger. IoError if the file cannot be opened (the
// previous logger stays).
Status Configure(const Options& options);
void SetLevel(Level level);
// Writes out everything logged so far (before a deliberate exit).
void Flush();

template <typename... Args>
void Trace(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::trace(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void Debug(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::debug(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void Info(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::info(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void Warn(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::warn(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void Error(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::error(fmt, std::forward<Args>(args)...);
}

}  // namespace slip::logging
