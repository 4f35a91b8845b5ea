// PosixDevice: the edu driver's Device over a device directory of rpcie-hostd (or anything
// laid out like it), using only open/pread/pwrite/mmap/read/write/poll/close.
#pragma once

#include <memory>
#include <string>

#include "edu_driver.hpp"

namespace rpcie::edu_driver {

class PosixDevice final : public Device {
 public:
  // Opens the directory and its config, resource0 and events files. events is opened here,
  // before any step, because an open file counts interrupts from the moment it was opened.
  static Error open(const std::string& path, std::unique_ptr<PosixDevice>& device);
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
  int dir_fd_ = -1;
  int config_fd_ = -1;
  int bar_fd_ = -1;
  int events_fd_ = -1;
  void* dma_ = nullptr;
  std::size_t dma_size_ = 0;
};

}  // namespace rpcie::edu_driver
