// `rpcie run [--sysfs-env] [--] PROGRAM [ARGS...]`: execs PROGRAM with librpcie-mmio.so
// preloaded (docs/rpcie-run.md), so a register BAR it maps answers loads and stores. No
// fork: PROGRAM's exit status and signals are its own. Writes nothing unless it fails.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace rpcie::cli {

inline constexpr std::string_view kMmioLibraryName = "librpcie-mmio.so";

struct RunCommand {
  CLI::App* app = nullptr;  // the subcommand; *app is true when it was given
  bool sysfs_env = false;   // --sysfs-env: SYSFS_PCI_DEVICES=$RPCIE_MOUNT/pci/devices (default /run/rpcie)
};

// Adds `run` to `parent`, for --help only: CLI11 would parse PROGRAM's own options, so main
// hands `run` to run_main before CLI11 sees it.
RunCommand& run_add(CLI::App& parent);

// The index of "run" when it is the command (after an optional -o/--output VALUE), else 0.
int run_position(int argc, char** argv);

// `run`'s arguments after the word "run": [--sysfs-env] [-h|--help] [--] PROGRAM [ARGS...];
// anything after PROGRAM is PROGRAM's. Execs, or returns the exit code (2: usage; `help`
// printed for -h).
int run_main(const std::vector<std::string>& args, const std::string& help);

// Remembers the SIGPIPE disposition rpcie was started with (before signals_init ignores it),
// so PROGRAM inherits what it would have without rpcie in between.
void run_signals_save() noexcept;

// `<dir of exe_path>/<bindir_to_libdir>/librpcie-mmio.so`: where an install puts the library
// relative to rpcie's own executable (bindir_to_libdir like "../lib/x86_64-linux-gnu").
std::string mmio_library_installed(std::string_view exe_path, std::string_view bindir_to_libdir);

// The library to preload: `override_path` when not empty (RPCIE_MMIO_LIBRARY), else the
// installed location next to `exe_path` when it exists, else `build_dir`/librpcie-mmio.so
// when that exists. Empty when none does; `tried` lists what was looked at.
std::string mmio_library_resolve(std::string_view exe_path, std::string_view bindir_to_libdir,
                                 std::string_view build_dir, std::string_view override_path,
                                 const std::function<bool(const std::string&)>& exists,
                                 std::vector<std::string>& tried);

// LD_PRELOAD with `library` first, before what `current` (the old value, may be null) holds.
std::string preload_prepend(std::string_view library, const char* current);

// Execs; returns only on failure: 127 when PROGRAM is not found, 126 when it cannot be
// executed, 1 when the library cannot be found, with "rpcie: error: ..." on stderr.
int run_exec(const RunCommand& command, const std::vector<std::string>& argv);

}  // namespace rpcie::cli
