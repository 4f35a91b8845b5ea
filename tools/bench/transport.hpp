// The transport rows: raw libfabric against the rpcie core (Session, Channel).
//   rma_write, rma_read  at each size: one-sided transfers into the target's buffer, a window
//                        of 64 operations in flight                                    (MB/s)
//   round_trip           an 8 B message and its reply, one at a time (rpcie: ping/pong) (us)
// Both targets busy-poll (the rpcie RMA target: Channel::progress() in a loop) unless
// LinkOptions::target_progress_thread (then rpcie's is a ProgressThread that may sleep).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "driver.hpp"
#include "link.hpp"
#include "options.hpp"
#include "raw_loop.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/result.hpp"

namespace rpcie::bench {

// The initiator's side of one round (action raw or rpcie) of `iterations` operations; returns
// the seconds they took. `window`: raw RMA only (0: the raw loop's default). `samples`: the
// seconds of each operation are appended (round trips; raw RMA with window 1).
Result<double> round_run(Link& link, Action action, raw::Workload workload, std::size_t size, std::size_t iterations,
                         std::uint16_t window = 0, std::vector<double>* samples = nullptr);

// The target's end: accepts one initiator and serves its rounds until it quits; returns the
// exit status.
int target_run(Listener& listener, const LinkOptions& options);

// The transport table's columns.
Columns transport_columns();

// The initiator's end: runs the transport rows, prints them (text or JSON), ends the target;
// returns the exit status.
int transport_bench(Link& link, const Options& options);

}  // namespace rpcie::bench
