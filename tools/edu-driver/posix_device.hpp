// PosixDevice: the edu driver's Device over a device directory of rpcie-hostd (or anything
// laid out like it), using only open/pread/pwrite/mmap/read/write/poll/close.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "edu_driver.hpp"

namespace rpcie::edu_driver {

// How BAR0's registers are reached: one pread/pwrite per access, or loads and stores on a
// mapping of resource0 (a register BAR maps only in a program run under `rpcie run`, which
// turns each load and store into one MMIO access; elsewhere mmap answers ENODEV).
enum class BarAccess { file, mapped };

class PosixDevice final : public Device {
 public:
  // Opens the directory and its config, resource0 and events files (and maps resource0 for
  // BarAccess::mapped). events is opened here, before any step, because an open file counts
  // interrupts from the moment it was opened.
  static Error open(const std::string& path, BarAccess access, std::unique_ptr<PosixDevice>& device);
  ~PosixDevice() override;
  PosixDevice(const PosixDevice&) = delete;
  PosixDevice& operator=(const PosixDevice&) = delete;

  Error attr_read(std::string_view name, std::string& text) override;
  Error config_read(std::uint32_t offset, std::span<std::uint8_t> into) override;
  Error bar_read(std::uint64_t offset, unsigned width, std::uint64_t& value) override;
  Error bar_write(std::uint64_t offset, unsigned width, std::uint64_t value) override;
  Error dma_map(std::span<std::uint8_t>& window) override;
  Error events_wait(std::chrono::milliseconds timeout, std::uint32_t& count) override;
  Error events_unmask() override;

 private:
  PosixDevice() = default;
  Error bar_map();
  Error bar_load(std::uint64_t offset, unsigned width, std::uint64_t& value) const;
  Error bar_store(std::uint64_t offset, unsigned width, std::uint64_t value) const;
  int dir_fd_ = -1;
  int config_fd_ = -1;
  int bar_fd_ = -1;
  int events_fd_ = -1;
  volatile std::uint8_t* bar_ = nullptr;  // BarAccess::mapped: resource0, bar_size_ bytes
  std::size_t bar_size_ = 0;
  void* dma_ = nullptr;
  std::size_t dma_size_ = 0;
};

}  // namespace rpcie::edu_driver
