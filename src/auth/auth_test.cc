#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "auth/key_source.h"
#include "auth/keyring.h"
#include "auth/session_key.h"

namespace slip::auth {
namespace {

std::string TempDir() {
  std::string d = std::filesystem::temp_directory_path() / ("slip-auth-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

TEST(KeyringTest, GenerateSerializeParseRoundTrip) {
  const Keyring k = Keyring::Generate();
  EXPECT_EQ(k.current().id, 1u);
  auto back = Keyring::Parse(k.Serialize());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->current().bytes, k.current().bytes);
  EXPECT_NE(Keyring::Generate().current().bytes, k.current().bytes) << "two secrets alike";
}

TEST(KeyringTest, ParseRefusesMalformedFiles) {
  const std::string hex(64, 'a');
  for (const std::string& bad : std::vector<std::string>{"", "accept 1 " + hex, "current 0 " + hex, std::string("current 1 abc"),
                                 "current 1 " + hex + "\ncurrent 2 " + hex, "current 1 " + hex + "\naccept 1 " + hex,
                                 "current x " + hex, "current 1 " + hex + " extra", "use 1 " + hex,
                                 "current 99999999999 " + hex, "current 1 " + std::string(64, 'g')}) {
    EXPECT_FALSE(Keyring::Parse(bad).ok()) << bad;
  }
  EXPECT_TRUE(Keyring::Parse("# c\n\ncurrent 7 " + hex + "\naccept 3 " + hex + "\n").ok());
}

TEST(KeyringTest, RotationStepsKeepACommonKey) {
  const Keyring a = Keyring::Generate();
  const Keyring b = a.WithNewKey();
  ASSERT_EQ(b.keys().size(), 2u);
  EXPECT_EQ(b.current().id, a.current().id) << "step 1 only adds";
  const uint32_t fresh = b.keys().back().id;
  auto c = b.WithCurrent(fresh);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->Find(a.current().id), nullptr) << "step 2 still accepts the old key";
  const Keyring d = c->OnlyCurrent();
  EXPECT_EQ(d.keys().size(), 1u);
  EXPECT_EQ(d.Find(a.current().id), nullptr);
  EXPECT_FALSE(a.WithCurrent(42).ok());
}

TEST(KeyringTest, FileIsOwnerOnlyAndUnsafeFilesAreRefused) {
  const std::string path = TempDir() + "/secret";
  const Keyring k = Keyring::Generate();
  ASSERT_TRUE(WriteKeyringFile(path, k).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto back = ReadKeyringFile(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->current().bytes, k.current().bytes);
  ::chmod(path.c_str(), 0644);
  auto refused = ReadKeyringFile(path);
  EXPECT_TRUE(refused.status().Is(Code::kInvalidArgument)) << refused.status().ToString();
  EXPECT_TRUE(ReadKeyringFile(path + ".missing").status().Is(Code::kNotFound));
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

TEST(KeySourceTest, ReloadPicksUpARotationAndKeepsTheOldKeyringOnAGarbledFile) {
  const std::string path = TempDir() + "/secret2";
  const Keyring k = Keyring::Generate();
  ASSERT_TRUE(WriteKeyringFile(path, k).ok());
  auto src = KeySource::Open(path);
  ASSERT_TRUE(src.ok());
  const uint64_t g0 = (*src)->generation();
  ASSERT_TRUE((*src)->Reload().ok());
  EXPECT_EQ((*src)->generation(), g0) << "unchanged file, no new generation";
  ASSERT_TRUE(WriteKeyringFile(path, k.WithNewKey()).ok());
  ASSERT_TRUE((*src)->Reload().ok());
  EXPECT_GT((*src)->generation(), g0);
  EXPECT_EQ((*src)->keys()->keys().size(), 2u);
  {
    std::ofstream f(path, std::ios::trunc);
    f << "garbage that is longer than before\n";
  }
  EXPECT_FALSE((*src)->Reload().ok());
  EXPECT_EQ((*src)->keys()->keys().size(), 2u) << "the keyring in use survives a bad file";
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

TEST(SessionKeyTest, EveryInputChangesTheKeyAndTagsDetectChanges) {
  const Keyring k = Keyring::Generate();
  Nonce cn{}, sn{};
  cn[0] = 1;
  sn[0] = 2;
  const SessionKey base = DeriveSessionKey(k.current(), cn, sn, 5, "addr");
  EXPECT_EQ(DeriveSessionKey(k.current(), cn, sn, 5, "addr").bytes, base.bytes);
  EXPECT_NE(DeriveSessionKey(k.current(), sn, cn, 5, "addr").bytes, base.bytes);
  EXPECT_NE(DeriveSessionKey(k.current(), cn, sn, 6, "addr").bytes, base.bytes);
  EXPECT_NE(DeriveSessionKey(k.current(), cn, sn, 5, "addr2").bytes, base.bytes);
  EXPECT_NE(DeriveSessionKey(Keyring::Generate().current(), cn, sn, 5, "addr").bytes, base.bytes);
  std::string frame(200, 'x');
  const uint64_t t = Tag(base, frame.data(), frame.size());
  EXPECT_TRUE(TagsEqual(t, Tag(base, frame.data(), frame.size())));
  for (size_t i = 0; i < frame.size(); i += 37) {
    std::string flipped = frame;
    flipped[i] ^= 1;
    EXPECT_FALSE(TagsEqual(t, Tag(base, flipped.data(), flipped.size()))) << i;
  }
}

}  // namespace
}  // namespace slip::auth
