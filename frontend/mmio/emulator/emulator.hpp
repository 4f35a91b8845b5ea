// The MMIO emulator of librpcie-mmio.so: a load or store that faulted on a trapped
// register-BAR mapping (a PROT_NONE reservation) is decoded (Zydis), performed as MMIO
// accesses through the range's BarPort, its results written into the interrupted context,
// and the program resumed after the instruction.
//
// Async-signal-safe (called from the SIGSEGV handler; no allocation, no locks, errno kept)
// and thread-safe: each call touches only the context it is given and the ports.
//
// What an instruction does on the BAR is what it would do on a device: every access is
// issued in program order, at its own width when that width is 1, 2, 4 or 8 bytes and
// naturally aligned; a wider access (SSE/AVX) is split into 8-byte accesses in ascending
// order, as KVM does; an unaligned one into the widest aligned pieces (rpcie::pci::access_split).
// A read-modify-write (OR, ADD, XCHG, LOCK forms, ...) is a load then a store: there is no
// atomicity across a fabric.
#pragma once

#include <ucontext.h>

#include <cstddef>
#include <cstdint>

#include "bar_port.hpp"

namespace rpcie::mmio {

// x86-64's page: the unit in which memory is mapped, so the bytes of an instruction or an
// access are readable up to the next page boundary only.
constexpr std::uintptr_t kPage = 4096;

// What a failed access (BarPort returned false) does to the program: the PCIe answer (loads
// read all ones, stores are dropped, the instruction completes), or SIGBUS at the address.
enum class FailMode { all_ones, sigbus };

struct Emulation {
  enum class Kind {
    done,           // the context holds the results; RIP points after the instruction
    not_trapped,    // the fault is not on a trapped range: the program's own handler's business
    unsupported,    // not an instruction the emulator covers: the caller reports and ends the program
    access_failed,  // FailMode::sigbus and a port failed: the caller raises SIGBUS at `address`
  };
  Kind kind = Kind::not_trapped;
  std::uintptr_t rip = 0;       // the instruction's address
  std::uint8_t bytes[15] = {};  // its bytes, as many as were readable (`length`)
  std::uint8_t length = 0;
  std::uintptr_t address = 0;  // the faulting address; for access_failed the access's address
  unsigned failed = 0;         // this instruction's BAR accesses that failed (loads read all ones)
};

// Emulates the instruction at the context's RIP, which faulted at `fault_address`.
Emulation instruction_emulate(ucontext_t& context, std::uintptr_t fault_address, const TrapLookup& traps,
                              FailMode mode) noexcept;

// Failed accesses since the process started, in either mode, and those learnt of later
// (access_failures_add).
std::uint64_t access_failures() noexcept;
// Counts `count` more failed accesses the emulator did not see fail: posted stores that were
// accepted, then dropped on the device side. Async-signal-safe.
void access_failures_add(std::uint64_t count) noexcept;

// One line (no newline) naming what happened, e.g. "unsupported instruction at 0x401136:
// 0f 38 f5 07 (pdep)": into `text`, truncated to `size`; returns the length. Async-signal-safe.
std::size_t emulation_describe(const Emulation& emulation, char* text, std::size_t size) noexcept;

}  // namespace rpcie::mmio
