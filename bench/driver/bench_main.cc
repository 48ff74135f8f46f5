// slip-bench: `slip bench` as a program of its own (same options, same
// code: bench/driver/bench_command.cc), so the harness can be built and run without
// the rest of the CLI.
//
//   slip-bench bench --target redis --workload a
//   slip-bench bench compare --targets local,rocksdb --workload c
#include <CLI/CLI.hpp>

#include "bench/driver/bench_command.h"

int main(int argc, char** argv) {
  CLI::App app{"Slipstream benchmark harness"};
  app.require_subcommand(1);
  slip::bench::BenchCommandOptions o;
  slip::bench::AddBenchCommand(app, &o);
  CLI11_PARSE(app, argc, argv);
  return slip::bench::RunBenchCommand(o);
}
