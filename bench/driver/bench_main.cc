// slip-bench: `slip bench` as a program of its own (same options, same
// code: cli/bench_command.cc), so the harness can be built and run without
// the rest of the CLI.
//
//   slip-bench bench --target redis --workload a
//   slip-bench bench compare --targets local,rocksdb --workload c
#include <CLI/CLI.hpp>

#include "cli/bench_command.h"

int main(int argc, char** argv) {
  CLI::App app{"Slipstream benchmark harness"};
  app.require_subcommand(1);
  slip::cli::BenchCommandOptions o;
  slip::cli::AddBenchCommand(app, &o);
  CLI11_PARSE(app, argc, argv);
  return slip::cli::RunBenchCommand(o);
}
