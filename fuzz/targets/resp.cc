// RESP2 requests (docs/formats/resp.md): bytes a Redis client sends,
// fed to the parser in pieces, as a connection delivers them.
#include <string>
#include <vector>

#include "fuzz/fuzz.h"
#include "resp/resp.h"

using namespace slip;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const resp::Limits limits{.max_bulk = 4096, .max_args = 64, .max_line = 1024};
  // The first byte picks how the bytes are cut into Feeds: whatever the
  // cut, the same commands come out, then the same error (if any).
  const size_t piece = 1 + data[0] % 16;
  auto run = [&](size_t step) {
    resp::Parser p(limits);
    std::vector<resp::Command> out;
    bool failed = false;
    for (size_t at = 0; at < in.size() && !failed; at += step) {
      p.Feed(in.substr(at, step));
      for (;;) {
        auto c = p.Next();
        if (!c.ok()) {
          failed = true;
          break;
        }
        if (!*c) break;
        fuzz::Check(!(*c)->empty(), "an empty command came out");
        fuzz::Check((*c)->size() <= limits.max_args, "more arguments than the limit");
        for (const std::string& a : **c) fuzz::Check(a.size() <= limits.max_bulk, "an argument beyond the limit");
        out.push_back(std::move(**c));
      }
    }
    return std::pair(out, failed);
  };
  const auto whole = run(in.size() == 0 ? 1 : in.size());
  const auto cut = run(piece);
  fuzz::Check(whole == cut, "the commands depend on how the bytes were cut");
  // What came out re-encodes to commands that parse the same.
  std::string again;
  for (const resp::Command& c : whole.first) resp::AppendCommand(&again, c);
  resp::Parser q(resp::Limits{.max_bulk = 4096, .max_args = 64, .max_line = 1024});
  q.Feed(again);
  for (const resp::Command& c : whole.first) {
    auto d = q.Next();
    fuzz::Check(d.ok() && d->has_value() && **d == c, "a re-encoded command parses differently");
  }
  return 0;
}

std::vector<std::string> SlipFuzzSeeds() {
  std::string pipelined = "\x03";
  resp::AppendCommand(&pipelined, {"SET", "key", "value"});
  resp::AppendCommand(&pipelined, {"GET", "key"});
  resp::AppendCommand(&pipelined, {"MSET", "a", "1", "b", std::string("\0\r\n", 3)});
  return {pipelined, std::string("\x01PING\r\nECHO \"a b\\x41\" 'c\\'d'\r\nGET k\n"),
          std::string("\x05*2\r\n$3\r\nGET\r\n$-1\r\n"), std::string("\x00*1\r\n$99999\r\n", 14)};
}
