// Changes to rpcie-hostd's configuration file made by hostd itself (`rpcie attach --persist`,
// `rpcie detach --persist`): an [[attach]] table appended, or one removed. Every other line of
// the file — comments included — is kept as it was.
//
// Each change replaces the file atomically (file_store_atomic): a reader — hostd at its next
// start, an operator's editor — sees the old file or the new one, never a mix, and a change
// that fails leaves the file as it was. The file keeps its mode (a new one is 0644).
// Thread-safety: no state; callers serialise their changes to one file.
#pragma once

#include <sys/types.h>

#include <string>

#include "rpcie/result.hpp"

namespace rpcie::hostd {

// Writes `text` to PATH.tmp (mode `mode`), flushes it (fsync) and renames it over `path`.
// Errors: "PATH: what: strerror" with the errno (EROFS, EACCES, ENOSPC...); no PATH.tmp is left.
Result<void> file_store_atomic(const std::string& path, const std::string& text, mode_t mode);

// Whether `path` could be replaced: its directory writable (and the file, if it exists).
// EROFS, EACCES or ENOENT naming the path otherwise. Checked before anything is attached, so
// that `attach --persist` fails whole rather than half.
Result<void> config_writable(const std::string& path);

// Appends `table` (an [[attach]] table's text) to the file at `path` (created when missing).
Result<void> config_table_append(const std::string& path, const std::string& table);

// Removes the table whose header is on line `line` (1-based, as toml++ counts) of `path`:
// that line up to the next table header or the end of the file, with the comment lines just
// above it and the blank line before them, but not the comments and blank lines just before
// the next header (which describe that one). EINVAL when line `line` is not a table header.
Result<void> config_table_remove(const std::string& path, unsigned line);

// The text half of config_table_remove (unit tests).
Result<std::string> config_text_table_remove(const std::string& text, unsigned line);

}  // namespace rpcie::hostd
