// RESP2 codec (resp/resp.h): commands come out whole and in order however
// the bytes are cut, pipelined or inline; malformed bytes are a final
// protocol error; lengths beyond the limits are refused before anything is
// allocated for them; replies encode as Redis's do.
#include "resp/resp.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/random.h"

namespace slip::resp {
namespace {

std::vector<Command> ParseAll(Parser& p, std::string* error = nullptr) {
  std::vector<Command> out;
  for (;;) {
    auto c = p.Next();
    if (!c.ok()) {
      if (error != nullptr) *error = c.status().message();
      return out;
    }
    if (!*c) return out;
    out.push_back(std::move(**c));
  }
}

TEST(RespParser, PipelinedCommandsComeOutWholeHoweverTheBytesAreCut) {
  const std::vector<Command> sent = {{"SET", "k", std::string("a\0b\r\nc", 6)},
                                     {"GET", "k"},
                                     {"MSET", "a", "1", "b", ""},
                                     {"PING"}};
  std::string wire;
  for (const Command& c : sent) AppendCommand(&wire, c);
  wire += "ECHO \"x y\"\r\n";  // an inline command between them
  AppendCommand(&wire, {"DEL", "k"});
  std::vector<Command> want = sent;
  want.push_back({"ECHO", "x y"});
  want.push_back({"DEL", "k"});

  // Every cut into two pieces, then random cuts into many.
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    Parser p;
    std::vector<Command> got;
    p.Feed(std::string_view(wire).substr(0, cut));
    for (auto& c : ParseAll(p)) got.push_back(std::move(c));
    p.Feed(std::string_view(wire).substr(cut));
    for (auto& c : ParseAll(p)) got.push_back(std::move(c));
    ASSERT_EQ(got, want) << "cut at " << cut;
    EXPECT_EQ(p.buffered(), 0u);
  }
  Random rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    Parser p;
    std::vector<Command> got;
    for (size_t at = 0; at < wire.size();) {
      const size_t n = 1 + rng.Uniform(9);
      p.Feed(std::string_view(wire).substr(at, n));
      at += n;
      for (auto& c : ParseAll(p)) got.push_back(std::move(c));
    }
    ASSERT_EQ(got, want) << "trial " << trial;
  }
}

TEST(RespParser, InlineCommandsSplitAsRedisDoes) {
  EXPECT_EQ(*SplitInline("  set  k   v "), (Command{"set", "k", "v"}));
  EXPECT_EQ(*SplitInline("set \"a b\\n\\x41\\\"\" 'it\\'s'"), (Command{"set", "a b\nA\"", "it's"}));
  EXPECT_EQ(*SplitInline(""), Command{});
  EXPECT_EQ(*SplitInline("get \"\""), (Command{"get", ""}));
  EXPECT_FALSE(SplitInline("get \"k").ok());
  EXPECT_FALSE(SplitInline("get \"k\"x").ok());
  EXPECT_FALSE(SplitInline("get 'k").ok());

  Parser p;
  p.Feed("PING\nPING\r\n\r\n   \r\nGET k\r\n");
  EXPECT_EQ(ParseAll(p), (std::vector<Command>{{"PING"}, {"PING"}, {"GET", "k"}})) << "blank lines are no commands";
}

TEST(RespParser, MalformedBytesAreAFinalProtocolError) {
  const std::vector<std::string> bad = {
      "*2\r\n$3\r\nGET\r\n:1\r\n",          // an argument that is not a bulk string
      "*x\r\n",                             // not a count
      "*1\r\n$-1\r\n",                      // a null argument
      "*1\r\n$3\r\nGETX\r\n",               // a bulk longer than it said
      "*1\r\n$3\nGET\r\n",                  // a length line without CR
      "*1\n",                               // a count line without CR
      "*1\r\n$1x\r\nk\r\n",                 // junk after a length
      "*1\r\n$\r\nk\r\n",                   // no length
      "*1\r\n$99999999999999999999\r\n",    // more digits than a length has
      "SET \"k v\r\n",                      // unbalanced quotes
  };
  for (const std::string& b : bad) {
    Parser p;
    p.Feed(b);
    std::string error;
    const auto got = ParseAll(p, &error);
    EXPECT_TRUE(got.empty()) << b;
    EXPECT_EQ(error.rfind("Protocol error: ", 0), 0u) << b << " gave '" << error << "'";
    // Final: more bytes change nothing.
    p.Feed("PING\r\n");
    auto again = p.Next();
    EXPECT_FALSE(again.ok()) << b;
  }
  // An error after good commands: those come out first.
  Parser p;
  p.Feed("PING\r\n*1\r\n$4\r\nPING\r\n*1\r\n%4\r\n");
  std::string error;
  EXPECT_EQ(ParseAll(p, &error), (std::vector<Command>{{"PING"}, {"PING"}}));
  EXPECT_NE(error.find("expected '$', got '%'"), std::string::npos) << error;
}

TEST(RespParser, LengthsBeyondTheLimitsAreRefusedBeforeAllocation) {
  const Limits small{.max_bulk = 100, .max_args = 4, .max_line = 32};
  {
    Parser p(small);
    p.Feed("*1\r\n$101\r\n");  // nothing of the argument sent yet
    std::string error;
    ParseAll(p, &error);
    EXPECT_NE(error.find("invalid bulk length"), std::string::npos) << error;
  }
  {
    Parser p;  // the defaults: a 2 GiB argument is refused from its length alone
    p.Feed("*1\r\n$2147483648\r\n");
    std::string error;
    ParseAll(p, &error);
    EXPECT_NE(error.find("invalid bulk length"), std::string::npos) << error;
    EXPECT_LT(p.buffered(), 64u);
  }
  {
    Parser p(small);
    p.Feed("*5\r\n");
    std::string error;
    ParseAll(p, &error);
    EXPECT_NE(error.find("invalid multibulk length"), std::string::npos) << error;
  }
  {
    Parser p(small);
    p.Feed(std::string(40, 'a'));  // an inline line that never ends
    std::string error;
    ParseAll(p, &error);
    EXPECT_NE(error.find("too big inline request"), std::string::npos) << error;
  }
  {
    Parser p(small);
    p.Feed("a b c d e\r\n");  // five inline arguments
    std::string error;
    ParseAll(p, &error);
    EXPECT_NE(error.find("too many arguments"), std::string::npos) << error;
  }
  {
    Parser p(small);
    p.Feed("*" + std::string(40, '1'));
    std::string error;
    ParseAll(p, &error);
    EXPECT_NE(error.find("too big count string"), std::string::npos) << error;
  }
  {
    // At the limits exactly: accepted.
    Parser p(small);
    Command c(4, std::string(100, 'v'));
    std::string wire;
    AppendCommand(&wire, c);
    p.Feed(wire);
    EXPECT_EQ(ParseAll(p), std::vector<Command>{c});
  }
}

TEST(RespParser, EmptyAndNullArraysAreNoCommands) {
  Parser p;
  p.Feed("*0\r\n*-1\r\n*1\r\n$0\r\n\r\n");
  EXPECT_EQ(ParseAll(p), (std::vector<Command>{{""}}));
}

TEST(RespReplies, EncodeAsRedisDoes) {
  std::string out;
  AppendSimple(&out, "OK");
  AppendError(&out, "ERR no\r\nsuch");
  AppendInteger(&out, -42);
  AppendBulk(&out, std::string("a\0b", 3));
  AppendNull(&out);
  AppendArray(&out, 2);
  AppendBulk(&out, "");
  AppendNull(&out);
  using namespace std::string_literals;
  EXPECT_EQ(out, "+OK\r\n-ERR no  such\r\n:-42\r\n$3\r\na\0b\r\n$-1\r\n*2\r\n$0\r\n\r\n$-1\r\n"s);
}

}  // namespace
}  // namespace slip::resp
