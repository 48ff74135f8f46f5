#include "common/log.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace slip::logging {
namespace {

TEST(Log, ParseLevelKnowsEveryLevelAndRefusesOthers) {
  for (Level l : {Level::kTrace, Level::kDebug, Level::kInfo, Level::kWarn, Level::kError, Level::kOff}) {
    auto parsed = ParseLevel(LevelName(l));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, l);
  }
  auto bad = ParseLevel("loud");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().Is(Code::kInvalidArgument));
  EXPECT_NE(bad.status().message().find("warn"), std::string::npos);
}

TEST(Log, WritesNamedLinesAtOrAboveTheLevelToItsFile) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("slip_log_test_" + std::to_string(::getpid()) + ".log");
  std::filesystem::remove(path);
  ASSERT_TRUE(Configure({.name = "server-7", .file = path.string(), .to_stderr = false, .level = Level::kInfo}).ok());
  Debug("hidden {}", 1);
  Info("recovered {} entries", 42);
  Warn("lease lost");
  Flush();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  EXPECT_EQ(s.find("hidden"), std::string::npos);
  EXPECT_NE(s.find("info server-7: recovered 42 entries"), std::string::npos);
  EXPECT_NE(s.find("warning server-7: lease lost"), std::string::npos);
  std::filesystem::remove(path);
  ASSERT_TRUE(Configure({}).ok());
}

TEST(Log, AnUnwritableFileIsAnErrorAndKeepsTheLogger) {
  // Under a non-directory: no directory can be created for it.
  Status s = Configure({.file = "/dev/null/x.log"});
  EXPECT_TRUE(s.Is(Code::kIoError)) << s.ToString();
  Info("still logging");  // must not crash
}

}  // namespace
}  // namespace slip::logging
