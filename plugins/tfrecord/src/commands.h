// The plugin's command-line tools, registered as `command` components:
//   reel synth --out DIR --videos N --classes C --level frame|video --shards K [--seed S] ...
//   reel inspect FILES... [--json] [--limit N] [--compression C] [--id-key K]
//
// Thread-safety: each Command is run once from the host's main thread.
#ifndef REEL_PLUGINS_TFRECORD_SRC_COMMANDS_H_
#define REEL_PLUGINS_TFRECORD_SRC_COMMANDS_H_

#include <memory>

#include "reel/command.h"

namespace reel::tfrecord {

std::unique_ptr<Command> MakeSynthCommand();
std::unique_ptr<Command> MakeInspectCommand();

}  // namespace reel::tfrecord

#endif  // REEL_PLUGINS_TFRECORD_SRC_COMMANDS_H_
