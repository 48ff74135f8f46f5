// The cluster secret file (auth/keyring.h): what parses serializes to text
// that parses to the same keys.
#include "auth/keyring.h"
#include "fuzz/fuzz.h"

using namespace slip;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto k = auth::Keyring::Parse(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!k.ok()) return 0;
  auto again = auth::Keyring::Parse(k->Serialize());
  fuzz::Check(again.ok(), "a serialized keyring does not parse");
  fuzz::Check(again->current().id == k->current().id && again->current().bytes == k->current().bytes &&
                  again->keys().size() == k->keys().size(),
              "a keyring serializes differently");
  return 0;
}

std::vector<std::string> SlipFuzzSeeds() {
  const std::string hex(64, 'a');
  return {"current 1 " + hex + "\n", "# c\ncurrent 2 " + hex + "\naccept 1 " + std::string(64, '0') + "\n"};
}
