// `rpcie fabric`: the libfabric providers of this host as rpcie would open them (FI_EP_RDM,
// each adapter's hints from providers/); with --all also the other RDM providers
// libfabric offers, marked unsupported with the reason. Kept out of main.cc so that commands can be added side by side.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace rpcie::cli {

struct FabricCommand {
  CLI::App* app = nullptr;  // the subcommand; *app is true when it was given
  std::string provider;     // -p: only this one (any spelling provider_parse accepts)
  bool all = false;         // -a: also the RDM providers rpcie has no use for
};

// Adds the `fabric` subcommand to `parent`; its -o/--output binds to `output` like the
// other commands'. The returned object lives as long as the process.
FabricCommand& fabric_add(CLI::App& parent, std::string& output);

// Runs it. Exit code: 0 when at least one supported provider is usable, 1 when none is,
// 2 for a bad -p. Prints errors as "rpcie: error: ..." on stderr.
int fabric_run(const FabricCommand& command, bool json);

// Prints "rpcie: error: TEXT" on stderr and returns `code` (every command's error path).
int error_exit(const std::string& text, int code = 1);

}  // namespace rpcie::cli
