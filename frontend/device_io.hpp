// Reads and writes of a device's config space and BARs (`config`, `resourceN`), and their
// flush: each request goes to the device over the attachment current at its start, is tracked
// by the watchdog from the start, carries a deadline a little under the timeout, and is
// answered exactly once.
//
// What a file takes: `config` any range inside config space, split into aligned accesses of
// at most 4 bytes (little-endian, as the kernel's file); a register or I/O BAR exactly one
// naturally aligned 1/2/4/8-byte access inside it (else EINVAL); a memory BAR any range
// inside it. Reads at or past the end return 0 bytes, writes there EFBIG (as sysfs).
// Thread-safety: no state of its own; called concurrently from FUSE workers.
#pragma once

#include <fuse_lowlevel.h>

#include <cstddef>
#include <vector>

#include "open_file.hpp"
#include "rpcie/result.hpp"
#include "watchdog.hpp"

namespace rpcie::hostd {

// The errno a FUSE reply carries for `e`: what the device or the arguments refuse passes
// through; every way of losing the exporter is EIO (a FUSE caller cannot act on ETIMEDOUT
// vs ENOTCONN).
int errno_of(const Error& e);

void device_read(Watchdog& watchdog, fuse_req_t req, const OpenFile& f, std::size_t size, off_t off);
// The bytes of a write are `src`: in memory, or in the pipe the request was spliced into
// (FUSE_CAP_SPLICE_READ), which a memory BAR's write empties straight into the attachment's
// staging buffer (one copy fewer). What is left unread of `src` the caller discards.
void device_write(Watchdog& watchdog, fuse_req_t req, const OpenFile& f, fuse_bufvec& src, off_t off);
// The first `size` bytes of a write (at most its size) in memory: in `src` itself when it is
// there, else read out of its pipe into `copy`. Null when the pipe cannot be read.
const char* write_bytes(fuse_bufvec& src, std::size_t size, std::vector<char>& copy);
// fsync (`sync`) or flush (close): every earlier write has reached the device, or its error.
// A flush of a file not opened for writing, and of a file that is no device file, answers 0 at once.
void device_flush(Watchdog& watchdog, fuse_req_t req, const OpenFile& f, bool sync);

}  // namespace rpcie::hostd
