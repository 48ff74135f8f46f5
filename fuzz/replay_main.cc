// The fuzz targets without libFuzzer (any compiler): runs every file given,
// or every file in every directory given, through LLVMFuzzerTestOneInput —
// the committed corpus and the kept crash inputs, as a regression test in
// the default build. `--write-seeds DIR` writes SlipFuzzSeeds() there.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--write-seeds") {
    fs::create_directories(argv[2]);
    const auto seeds = SlipFuzzSeeds();
    for (size_t i = 0; i < seeds.size(); ++i) {
      std::ofstream(fs::path(argv[2]) / ("seed-" + std::to_string(i)), std::ios::binary) << seeds[i];
    }
    std::printf("%zu seeds written to %s\n", seeds.size(), argv[2]);
    return 0;
  }
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path p = argv[i];
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else if (fs::exists(p)) {
      files.push_back(p);
    }
    // A target with no kept crash inputs has no regressions directory.
  }
  // The seeds run too: a decoder change that breaks a valid input shows here.
  size_t n = 0;
  for (const std::string& s : SlipFuzzSeeds()) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    ++n;
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++n;
  }
  std::printf("%zu inputs ran without a broken promise\n", n);
  return n == 0 ? 1 : 0;
}
