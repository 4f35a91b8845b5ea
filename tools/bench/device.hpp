// --device: device workloads through the client API against a real rpcie-exportd, started
// here on the target's CPU with an edu and a membar export; the raw baselines run on the link
// to the usual target, in the same rounds.
//   mmio_read     4 B MMIO read (edu liveness register)      vs raw round_trip 8 B       (us)
//   bar_write     1 MiB to the membar BAR from the window, one call at a time
//                                                             vs raw rma_write 1 MiB, window 1 (MB/s)
//   bar_read      1 MiB from the membar BAR into the window   vs raw rma_read 1 MiB, window 1  (MB/s)
//   edu_dma       4 KiB host->device DMA, command to interrupt seen (on-demand: the exporter
//                 reads the window)
//                 vs raw read_reply: an 8 B message, the target's fi_read of 4 KiB from the
//                 initiator, an 8 B reply, one at a time (us)
//   edu_dma_push  the same on a mirror-mode edu with streaming DMA: window_push of the 4 KiB,
//                 then the command; vs raw send_reply: a 4 KiB message and an 8 B reply (us)
//   edu_dma_to_ram  4 KiB device->host DMA on an on-demand edu, command to interrupt seen (the
//                 exporter writes the window and proves the write before the interrupt)
//                 vs raw write_reply: an 8 B message, the target's fi_write of 4 KiB into the
//                 initiator and a 1 B fi_read of its last byte, an 8 B reply (us)
// The raw target busy-polls; the exporter's attachment thread spins after activity and then
// sleeps on its CQ wait fd (docs/rpcie-bench.md, "What each raw row does").
#pragma once

#include "driver.hpp"
#include "link.hpp"
#include "options.hpp"

namespace rpcie::bench {

// The device table's columns.
Columns device_columns();

// Runs the device rows, prints them (text or JSON), ends the target; returns the exit status.
// Ctrl-C ends the run between rounds (the exporter is stopped, its directory removed).
int device_bench(Link& link, const Options& options);

}  // namespace rpcie::bench
