// The core's subcommands, in the order `reel --help` lists them. Each lives in its own cmd_*.cc;
// add a line here for a new one.
#include "cli.h"

namespace reel::cli {

CliCommand PluginsCliCommand();
CliCommand VersionCliCommand();
CliCommand TrainCliCommand();
CliCommand EvalCliCommand();
CliCommand PredictCliCommand();
CliCommand DemoCliCommand();
CliCommand LaunchCliCommand();
CliCommand TuneCliCommand();
CliCommand BenchCliCommand();
CliCommand PlanCliCommand();

std::vector<CliCommand> CoreCommands() {
  return {
      DemoCliCommand(),    TrainCliCommand(),   EvalCliCommand(),  PredictCliCommand(),
      LaunchCliCommand(),  TuneCliCommand(),    BenchCliCommand(), PlanCliCommand(),
      PluginsCliCommand(), VersionCliCommand(),
  };
}

}  // namespace reel::cli
