// How rpcie's own threads present themselves to the kernel's scheduler: their names (for
// ps -L, top -H, /proc/PID/task) and how they compete for a CPU with other processes.
//
// Two kinds of thread need a rule, both found on a CPU shared with a busy process (a batch
// job on a cluster node; measured with tests/integration/posted_load.sh):
//  - A background helper of an application (the client's dispatcher, which sends a posted
//    write batch that became due and receives interrupts while the application does not):
//    it must not take the CPU from the application thread it helps. Each time it woke and
//    preempted a writer mid-burst, the scheduler could hand the CPU to the busy process next,
//    for a whole time slice (2-4 ms on this VM, a hundred round trips). thread_background()
//    makes it SCHED_BATCH: woken, it does not preempt; it runs on an idle CPU at once, or when
//    the thread it shares a CPU with blocks (as a writer does at its next read).
//  - The exporter's data threads, which stand in for the device's hardware: a client's
//    message that arrives while a busy process holds the CPU must not wait out its slice.
//    thread_responsive() gives them a nice value below the busy process's (rpcie-exportd's
//    `data-nice`, opt-in: a thread that busy-polls at -10 keeps nine tenths of a CPU, from a
//    client on the same host too) and a short time slice (kResponsiveSlice: woken, it
//    preempts a thread with the default slice at once, where an equal slice lets the running
//    thread finish its own; EEVDF, Linux 6.12 and later). Measured with posted_load.sh, busy
//    process on the exporter's CPU: 1 burst in 5-10 waited 2-4 ms at nice 0, 1 in 35 at nice
//    -10, none of 175 with both.
//
// Every function acts on the calling thread only. Thread-safety: any thread.
#pragma once

#include <chrono>

#include "rpcie/result.hpp"

namespace rpcie {

// Names the calling thread (at most 15 characters are kept).
void thread_name(const char* name) noexcept;

// SCHED_BATCH for the calling thread (see above). Cannot fail for an unprivileged process;
// an error is returned for what the kernel refuses (a seccomp filter, say).
Result<void> thread_background();

// The calling thread's time slice when responsive.
inline constexpr std::chrono::microseconds kResponsiveSlice{100};
// The calling thread's nice value (-20 to 19) and time slice (kResponsiveSlice). EACCES when
// lowering the nice value needs what the process lacks (CAP_SYS_NICE, or RLIMIT_NICE:
// systemd's LimitNICE=); EINVAL for a value out of range. Nothing changes on failure.
Result<void> thread_responsive(int nice);

}  // namespace rpcie
