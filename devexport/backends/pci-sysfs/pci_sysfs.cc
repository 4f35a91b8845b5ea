#include "pci_sysfs.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "config_policy.hpp"
#include "rpcie/log.hpp"
#include "rpcie/mapping.hpp"
#include "sysfs_files.hpp"

namespace rpcie::dev {

// Config space and BARs are little-endian; values travel through pread/pwrite and loads of
// the host's integer types unswapped.
static_assert(std::endian::native == std::endian::little, "pci-sysfs assumes a little-endian host");

namespace {

constexpr std::string_view kDefaultRoot = "/sys/bus/pci/devices";

struct Params {
  std::string bdf;  // normalised to lower case, as sysfs names functions
  bool config_write = false;
  std::string root{kDefaultRoot};
};

// DDDD:BB:DD.F with hex digits, device 00-1f, function 0-7.
std::optional<std::string> bdf_normalize(std::string_view text) {
  if (text.size() != 12 || text[4] != ':' || text[7] != ':' || text[10] != '.') return std::nullopt;
  std::string bdf(text);
  for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11}) {
    const auto c = static_cast<unsigned char>(bdf[i]);
    if (!std::isxdigit(c)) return std::nullopt;
    bdf[i] = static_cast<char>(std::tolower(c));
  }
  if (bdf[8] > '1' || bdf[11] > '7') return std::nullopt;
  return bdf;
}

Result<Params> params_parse(const std::map<std::string, std::string>& params) {
  Params p;
  bool have_bdf = false;
  for (const auto& [key, value] : params) {
    if (key == "bdf") {
      auto bdf = bdf_normalize(value);
      if (!bdf)
        return fail(EINVAL, "pci-sysfs: bdf '" + value +
                                "' is not DDDD:BB:DD.F (hex domain and bus, device 00-1f, function 0-7)");
      p.bdf = *bdf;
      have_bdf = true;
    } else if (key == "config-write") {
      if (value != "yes" && value != "no")
        return fail(EINVAL, "pci-sysfs: config-write '" + value + "' is neither yes nor no");
      p.config_write = value == "yes";
    } else if (key == "sysfs-root") {
      if (value.empty()) return fail(EINVAL, "pci-sysfs: sysfs-root is empty");
      p.root = value;
    } else {
      return fail(EINVAL, "pci-sysfs: unknown parameter '" + key + "' (pci-sysfs takes: bdf, config-write)");
    }
  }
  if (!have_bdf) return fail(EINVAL, "pci-sysfs: bdf= is required, e.g. bdf=0000:00:01.0");
  return p;
}

Result<std::uint64_t> attribute_hex(const std::string& dir, const char* name, std::uint64_t max) {
  const std::string path = dir + "/" + name;
  auto text = sysfs::text_read(path);
  if (!text) return tl::unexpected(text.error());
  auto value = sysfs::hex_parse(*text, max);
  if (!value) return fail(EIO, path + ": '" + *text + "' is not a hex value up to " + std::to_string(max));
  return *value;
}

std::uint32_t all_ones(unsigned width) { return width == 4 ? 0xffffffffu : (1u << (8 * width)) - 1; }

// What a bridge's subclass calls it, for the refusal.
const char* bridge_kind(std::uint32_t class_code) {
  switch ((class_code >> 8) & 0xff) {
    case 0x00:
      return "a host bridge";
    case 0x01:
      return "an ISA bridge";
    case 0x04:
      return "a PCI-to-PCI bridge";
    case 0x07:
      return "a CardBus bridge";
    case 0x09:
      return "a semi-transparent PCI-to-PCI bridge";
    default:
      return "a bridge";
  }
}

struct BarAccess {
  Fd fd;
  Mapping map;  // empty where the file cannot be mapped: pread/pwrite on fd instead
};

class PciSysfs final : public Backend {
 public:
  static Result<std::unique_ptr<Backend>> open(const Params& p);

  std::string_view name() const noexcept override { return "pci-sysfs"; }
  const Identity& identity() const noexcept override { return identity_; }
  std::span<const Region> regions() const noexcept override { return regions_; }

  Result<std::uint32_t> config_read(std::uint32_t offset, unsigned width) override {
    if (!pci::access_valid(offset, width, pci::kConfigSpaceSize, pci::kConfigWidthMax))
      return fail(EINVAL, where() + "config read of width " + std::to_string(width) + " at " + hex(offset));
    std::uint32_t value = 0;
    ssize_t n;
    do n = ::pread(config_fd_.get(), &value, width, offset);
    while (n < 0 && errno == EINTR);
    if (n < 0) return fail(errno, where() + "config read at " + hex(offset));
    // Past the file's end, or past what the kernel shows an unprivileged reader: the
    // register is not there for us, and an absent register reads all-ones.
    if (static_cast<std::size_t>(n) < width) return all_ones(width);
    return value;
  }

  Result<void> config_write(std::uint32_t offset, unsigned width, std::uint32_t value) override {
    if (!pci::access_valid(offset, width, pci::kConfigSpaceSize, pci::kConfigWidthMax))
      return fail(EINVAL, where() + "config write of width " + std::to_string(width) + " at " + hex(offset));
    if (width < 4) value &= all_ones(width);
    const std::string what = fmt::format("config write of {:#x} at {:#x} (width {})", value, offset, width);
    if (auto free = unbound(what); !free) return free;
    if (!config_write_) return refuse(what + " refused: config writes need config-write=yes");
    // Not decoded (past the file's end): ignored, as by a device without the register; and
    // never extend a file by writing past it.
    if (offset + width > policy_.size()) return {};
    RPCIE_TRY_ASSIGN(const std::uint32_t current, config_exact_read(offset, width));
    auto merged = policy_.write_merge(offset, width, value, current);
    if (!merged) return refuse(what + " refused: " + merged.error().message);
    if (!merged->any) return {};  // nothing in it the client may write: dropped
    return config_exact_write(config_fd_.get(), offset, width, merged->value);
  }

  Result<std::uint64_t> mmio_read(std::uint8_t bar, std::uint64_t offset, unsigned width) override {
    const std::string what = "read of BAR" + std::to_string(bar) + "+" + hex(offset);
    if (auto ok = bar_check(bar, offset, width, what); !ok) return tl::unexpected(ok.error());
    BarAccess& a = bars_[bar];
    if (a.map) {
      const std::uint8_t* at = a.map.data() + offset;
      return pci::width_visit(width, [&]<class T>(T) { return mmio_load<T>(at); });
    }
    std::uint64_t value = 0;
    ssize_t n;
    do n = ::pread(a.fd.get(), &value, width, static_cast<off_t>(offset));
    while (n < 0 && errno == EINTR);
    if (n < 0) return fail(errno, where() + what);
    if (static_cast<std::size_t>(n) != width) return fail(EIO, where() + what + ": short read");
    return value;
  }

  Result<void> mmio_write(std::uint8_t bar, std::uint64_t offset, unsigned width, std::uint64_t value) override {
    const std::string what = "write of BAR" + std::to_string(bar) + "+" + hex(offset);
    if (auto ok = bar_check(bar, offset, width, what); !ok) return ok;
    if (msix_ && bar == msix_->bar && offset < msix_->offset + msix_->length && offset + width > msix_->offset)
      return refuse(
          fmt::format("{} refused: the MSI-X table (BAR{} {:#x}..{:#x}) holds interrupt message addresses "
                      "and data, which stay the host's",
                      what, bar, msix_->offset, msix_->offset + msix_->length - 1));
    BarAccess& a = bars_[bar];
    if (a.map) {
      std::uint8_t* at = a.map.data() + offset;
      pci::width_visit(width, [&]<class T>(T) { mmio_store<T>(at, value); });
      return {};
    }
    ssize_t n;
    do n = ::pwrite(a.fd.get(), &value, width, static_cast<off_t>(offset));
    while (n < 0 && errno == EINTR);
    if (n < 0) return fail(errno, where() + what);
    if (static_cast<std::size_t>(n) != width) return fail(EIO, where() + what + ": short write");
    return {};
  }

  // Bus mastering must be off before a client reaches the function: with it on, a register
  // write could start DMA into the device server's memory (no IOMMU confines it), and no
  // client can turn it on (the config policy). The config space is saved for detach.
  Result<void> attach(DmaPort* dma, IrqSink* irq) override {
    (void)dma, (void)irq;
    if (!driver_.empty()) return {};  // read-only export: nothing of the client reaches the device
    RPCIE_TRY(unbound("attach"));
    RPCIE_TRY(bus_master_off("attach"));
    if (config_write_) {
      RPCIE_TRY_ASSIGN(saved_config_, config_image_read());
    }
    return {};
  }

  // The function back as the client found it: reset through sysfs where it has a reset
  // method, then the registers a client may write restored to their values at attach
  // (needed after a reset too: the kernel restores what the function had before it, the
  // client's values), Command last; bus mastering checked off again.
  void detach() noexcept override {
    if (!driver_.empty()) return;
    if (auto free = unbound("detach"); !free) {
      RPCIE_LOG_WARN("pci-sysfs", "{}; the function is left as it is", free.error().message);
      return;
    }
    if (auto reset = function_reset(); !reset)
      RPCIE_LOG_WARN("pci-sysfs", "{}: reset at detach failed: {}", bdf_, reset.error().describe());
    if (!saved_config_.empty()) {
      if (auto restored = config_restore(); !restored)
        RPCIE_LOG_WARN("pci-sysfs", "{}: config space not restored at detach: {}", bdf_, restored.error().describe());
      saved_config_.clear();
    }
    if (auto off = bus_master_off("detach"); !off) RPCIE_LOG_ERROR("pci-sysfs", "{}", off.error().describe());
  }

  Result<void> reset() override {
    if (auto free = unbound("reset"); !free) return free;
    RPCIE_TRY_ASSIGN(const bool done, function_reset());
    if (!done) return fail(ENOTSUP, where() + "reset: the function has no reset method (no sysfs reset file)");
    return {};
  }

 private:
  PciSysfs() = default;

  // Exactly one access of sizeof(T) bytes: a device register may react to the width.
  template <class T>
  static std::uint64_t mmio_load(const std::uint8_t* at) noexcept {
    return *reinterpret_cast<const volatile T*>(at);
  }
  template <class T>
  static void mmio_store(std::uint8_t* at, std::uint64_t value) noexcept {
    *reinterpret_cast<volatile T*>(at) = static_cast<T>(value);
  }

  static std::string hex(std::uint64_t value) { return fmt::format("{:#x}", value); }
  std::string where() const { return "pci-sysfs " + bdf_ + ": "; }

  // open()'s steps, in order. The function's identity from its sysfs attributes (bridges
  // refused); its config file (`writable`: read-write), header type 0 or refused; for an
  // unbound function the config write policy from the whole config space, and each memory
  // BAR's resource file, mapped where the kernel allows.
  Result<void> identity_read();
  Result<void> config_open(bool writable);
  Result<void> policy_build();
  Result<void> bars_open();

  // The safety policy for everything but config reads: refused while a host driver is
  // bound. A driver bound at creation is final; otherwise the link is looked up again on
  // every call (one readlink), because a driver may bind at any time and must then be the
  // function's only user.
  Result<void> unbound(const std::string& what) const {
    if (!driver_.empty())
      return fail(EPERM, where() + what + " refused: bound to host driver " + driver_ + ", exported read-only");
    const std::string now = sysfs::driver_bound(dir_);
    if (!now.empty())
      return fail(EPERM, where() + what + " refused: host driver " + now + " bound since the export was created");
    return {};
  }

  Result<void> bar_check(std::uint8_t bar, std::uint64_t offset, unsigned width, const std::string& what) const {
    auto r = std::find_if(regions_.begin(), regions_.end(), [&](const Region& x) { return x.bar == bar; });
    if (r == regions_.end()) return fail(EINVAL, where() + what + ": no such BAR");
    if (r->kind == RegionKind::io) return fail(EINVAL, where() + what + ": I/O port BARs are not accessible");
    if (!pci::access_valid(offset, width, r->size))
      return fail(EINVAL, where() + what + " of width " + std::to_string(width) + ": outside the BAR or misaligned");
    return unbound(what);
  }

  // A refusal a client can cause at will: logged, at a bounded rate.
  tl::unexpected<Error> refuse(const std::string& what) {
    std::string message = where() + what;
    RPCIE_LOG_LIMITED(refusals_, LogLevel::warn, "pci-sysfs", "{}", message);
    return fail(EPERM, std::move(message));
  }

  // Exactly `width` bytes of config space, or an error (EIO when the file gives fewer).
  Result<std::uint32_t> config_exact_read(std::uint32_t offset, unsigned width) const {
    std::uint32_t value = 0;
    ssize_t n;
    do n = ::pread(config_fd_.get(), &value, width, offset);
    while (n < 0 && errno == EINTR);
    if (n < 0) return fail(errno, where() + "config read at " + hex(offset));
    if (static_cast<std::size_t>(n) != width) return fail(EIO, where() + "config read at " + hex(offset) + ": short");
    return value;
  }

  Result<void> config_exact_write(int fd, std::uint32_t offset, unsigned width, std::uint32_t value) const {
    ssize_t n;
    do n = ::pwrite(fd, &value, width, offset);
    while (n < 0 && errno == EINTR);
    if (n < 0) return fail(errno, where() + "config write at " + hex(offset));
    if (static_cast<std::size_t>(n) != width) return fail(EIO, where() + "config write at " + hex(offset) + ": short");
    return {};
  }

  // The whole config space as the file gives it to this process.
  Result<std::vector<std::uint8_t>> config_image_read() const {
    std::vector<std::uint8_t> image(config_file_size_);
    std::size_t got = 0;
    while (got < image.size()) {
      const ssize_t n = ::pread(config_fd_.get(), image.data() + got, image.size() - got, static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail(errno, where() + "config read");
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    image.resize(got);
    return image;
  }

  // Clears Command's bus master bit where it is on; EPERM when it does not clear.
  Result<void> bus_master_off(const char* when) const {
    RPCIE_TRY_ASSIGN(const std::uint32_t command, config_exact_read(pci::kCfgCommand, 2));
    if (!(command & pci::kCommandBusMaster)) return {};
    // config is open read-only without config-write=yes: this one write needs its own descriptor.
    Fd writable;
    int fd = config_fd_.get();
    if (!config_write_) {
      auto rw = sysfs::file_open(dir_ + "/config", O_RDWR);
      if (!rw)
        return fail(rw.error().code, where() + "bus mastering is on and cannot be cleared: " + rw.error().message);
      writable = std::move(*rw);
      fd = writable.get();
    }
    RPCIE_TRY(config_exact_write(fd, pci::kCfgCommand, 2, command & ~std::uint32_t{pci::kCommandBusMaster}));
    RPCIE_TRY_ASSIGN(const std::uint32_t after, config_exact_read(pci::kCfgCommand, 2));
    if (after & pci::kCommandBusMaster)
      return fail(EPERM, where() + "bus mastering is on and does not clear (Command " + hex(after) +
                             "): refusing to serve a function whose DMA would reach the device server's memory");
    RPCIE_LOG_WARN("pci-sysfs", "{}: bus mastering was on at {}: cleared", bdf_, when);
    return {};
  }

  // Writes the function's sysfs `reset` file; false when it has none (no reset method).
  Result<bool> function_reset() const {
    auto fd = sysfs::file_open(dir_ + "/reset", O_WRONLY);
    if (!fd && fd.error().code == ENOENT) return false;
    if (!fd) return fail(fd.error().code, where() + fd.error().message);
    ssize_t n;
    do n = ::write(fd->get(), "1", 1);
    while (n < 0 && errno == EINTR);
    if (n != 1) return fail(n < 0 ? errno : EIO, where() + "write " + dir_ + "/reset");
    return true;
  }

  // The writable registers back to saved_config_, from the end of config space down to
  // the header, Command last: the function stops decoding (if it did not at attach) only
  // once everything else is back. Each write is the narrowest aligned access that covers
  // the bytes to restore, so that no neighbouring register is written needlessly.
  Result<void> config_restore() const {
    RPCIE_TRY_ASSIGN(const std::vector<std::uint8_t> now, config_image_read());
    const auto end =
        static_cast<std::uint32_t>(std::min({saved_config_.size(), now.size(), std::size_t{policy_.size()}}));
    const auto le = [](const std::vector<std::uint8_t>& image, std::uint32_t at, unsigned width) {
      std::uint32_t v = 0;
      std::memcpy(&v, image.data() + at, width);
      return v;
    };
    const auto restore = [&](std::uint32_t at, unsigned width) {
      return policy_.restore_merge(at, width, le(saved_config_, at, width), le(now, at, width));
    };
    const auto dword_restore = [&](std::uint32_t dword) -> Result<void> {
      std::uint32_t first = 4, last = 0;  // the bytes that differ
      for (std::uint32_t i = 0; i < 4; ++i)
        if (restore(dword + i, 1)) first = std::min(first, i), last = i;
      if (first > last) return {};
      const unsigned width = last == first ? 1 : (first / 2 == last / 2 ? 2 : 4);
      const std::uint32_t at = dword + (width == 4 ? 0 : first & ~(width - 1));
      const auto value = restore(at, width);  // set: a byte inside differs
      return value ? config_exact_write(config_fd_.get(), at, width, *value) : Result<void>{};
    };
    for (std::uint32_t at = end & ~3u; at > pci::kCfgCommand + 4;) {
      at -= 4;
      RPCIE_TRY(dword_restore(at));
    }
    if (auto command = restore(pci::kCfgCommand, 2))
      return config_exact_write(config_fd_.get(), pci::kCfgCommand, 2, *command);
    return {};
  }

  std::string dir_;
  std::string bdf_;
  std::string driver_;  // bound at creation: the export is read-only for good
  bool config_write_ = false;
  Identity identity_;
  std::vector<Region> regions_;
  Fd config_fd_;
  std::uint64_t config_file_size_ = 0;
  ConfigPolicy policy_;                     // unbound functions: what a client may write
  std::optional<MsixTable> msix_;           // refused to register writes
  std::vector<std::uint8_t> saved_config_;  // at attach, with config-write=yes
  LogLimiter refusals_;
  std::array<BarAccess, pci::kBarCount> bars_;
};

Result<std::unique_ptr<Backend>> PciSysfs::open(const Params& p) {
  std::unique_ptr<PciSysfs> b(new PciSysfs());
  b->bdf_ = p.bdf;
  b->dir_ = p.root + "/" + p.bdf;
  const std::string& dir = b->dir_;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    const int e = errno;
    return fail(e, b->where() + dir + (e == ENOENT ? ": no such PCI function" : ": cannot stat"));
  }
  if (!S_ISDIR(st.st_mode)) return fail(ENOTDIR, b->where() + dir + " is not a function's directory");
  b->driver_ = sysfs::driver_bound(dir);
  const bool bound = !b->driver_.empty();
  b->config_write_ = p.config_write;
  RPCIE_TRY(b->identity_read());
  // Read-write only when a config write can be allowed at all.
  RPCIE_TRY(b->config_open(!bound && p.config_write));

  auto resource_text = sysfs::text_read(dir + "/resource");
  if (!resource_text) return fail(resource_text.error().code, b->where() + resource_text.error().message);
  auto regions = pci_resource_parse(*resource_text);
  if (!regions) return fail(regions.error().code, b->where() + dir + "/resource: " + regions.error().message);
  b->regions_ = std::move(*regions);

  if (bound) {
    // Nothing of the BARs is opened: the host driver owns them.
    for (Region& r : b->regions_) r.readonly = true;
    RPCIE_LOG_INFO("pci-sysfs", "{}: bound to host driver {}: exported read-only", p.bdf, b->driver_);
    return std::unique_ptr<Backend>(std::move(b));
  }
  RPCIE_TRY(b->policy_build());
  RPCIE_TRY(b->bars_open());
  return std::unique_ptr<Backend>(std::move(b));
}

Result<void> PciSysfs::identity_read() {
  struct Field {
    const char* file;
    std::uint64_t max;
    std::uint64_t value = 0;
  };
  std::array<Field, 6> fields{{{"vendor", 0xffff},
                               {"device", 0xffff},
                               {"class", 0xffffff},
                               {"subsystem_vendor", 0xffff},
                               {"subsystem_device", 0xffff},
                               {"revision", 0xff}}};
  for (Field& f : fields) {
    auto v = attribute_hex(dir_, f.file, f.max);
    if (!v) return fail(v.error().code, where() + v.error().message);
    f.value = *v;
  }
  identity_.vendor = static_cast<std::uint16_t>(fields[0].value);
  identity_.device = static_cast<std::uint16_t>(fields[1].value);
  identity_.class_code = static_cast<std::uint32_t>(fields[2].value);
  identity_.subsystem_vendor = static_cast<std::uint16_t>(fields[3].value);
  identity_.subsystem_device = static_cast<std::uint16_t>(fields[4].value);
  identity_.revision = static_cast<std::uint8_t>(fields[5].value);
  // What is done to a bridge (bus numbers, windows, secondary bus reset, its own resets)
  // reaches everything behind it: never exported, bound or not.
  if ((identity_.class_code >> 16) == 0x06)
    return fail(EPERM, where() + fmt::format("refused: {} is {} (class {:#08x}); bridges cannot be exported", bdf_,
                                             bridge_kind(identity_.class_code), identity_.class_code));
  return {};
}

Result<void> PciSysfs::config_open(bool writable) {
  auto config = sysfs::file_open(dir_ + "/config", writable ? O_RDWR : O_RDONLY);
  if (!config) return fail(config.error().code, where() + config.error().message);
  config_fd_ = std::move(*config);
  struct stat st {};
  if (::fstat(config_fd_.get(), &st) != 0) return fail(errno, where() + "fstat " + dir_ + "/config");
  config_file_size_ = static_cast<std::uint64_t>(st.st_size);
  RPCIE_TRY_ASSIGN(const std::uint32_t header_type, config_exact_read(pci::kCfgHeaderType, 1));
  if ((header_type & 0x7f) != 0)
    return fail(EPERM, where() + fmt::format("refused: {} has header type {:#x}, not 0 (1 is a PCI-to-PCI bridge's, "
                                             "2 a CardBus bridge's); bridges cannot be exported",
                                             bdf_, header_type & 0x7f));
  return {};
}

Result<void> PciSysfs::policy_build() {
  // The policy needs the capability lists, past the 64 bytes the kernel shows a reader
  // without CAP_SYS_ADMIN.
  RPCIE_TRY_ASSIGN(const std::vector<std::uint8_t> image, config_image_read());
  if (image.size() < config_file_size_)
    return fail(EACCES, where() + fmt::format("{}/config reads {} of {} bytes (the rest needs CAP_SYS_ADMIN): the "
                                              "capability list, which the safety policy needs, cannot be read",
                                              dir_, image.size(), config_file_size_));
  policy_ = ConfigPolicy::build(image);
  msix_ = policy_.msix_table();
  return {};
}

Result<void> PciSysfs::bars_open() {
  for (const Region& r : regions_) {
    if (r.kind == RegionKind::io) continue;
    const std::string path = dir_ + "/resource" + std::to_string(r.bar);
    auto fd = sysfs::file_open(path, O_RDWR);
    if (!fd) return fail(fd.error().code, where() + fd.error().message);
    BarAccess& a = bars_[r.bar];
    a.fd = std::move(*fd);
    if (auto map = Mapping::shared(a.fd.get(), r.size))
      a.map = std::move(*map);
    else
      RPCIE_LOG_WARN("pci-sysfs", "{}: {} cannot be mapped ({}); BAR{} goes through pread/pwrite", bdf_, path,
                     map.error().describe(), r.bar);
  }
  return {};
}

}  // namespace

Result<std::vector<Region>> pci_resource_parse(std::string_view text) {
  std::vector<Region> regions;
  bool upper_half = false;  // this line is the upper half of the 64-bit BAR before it
  for (unsigned bar = 0; bar < pci::kBarCount && !text.empty(); ++bar) {
    const auto newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    if (std::exchange(upper_half, false)) continue;
    std::array<std::uint64_t, 3> field{};  // start, end, flags
    std::string_view rest = line;
    for (std::uint64_t& f : field) {
      while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
      const auto space = rest.find(' ');
      auto v = sysfs::hex_parse(rest.substr(0, space), UINT64_MAX);
      if (!v)
        return fail(
            EIO, "line " + std::to_string(bar + 1) + " '" + std::string(line) + "' is not 0x<start> 0x<end> 0x<flags>");
      f = *v;
      rest = space == std::string_view::npos ? std::string_view() : rest.substr(space);
    }
    if (rest.find_first_not_of(' ') != std::string_view::npos)
      return fail(EIO, "line " + std::to_string(bar + 1) + " '" + std::string(line) + "' has more than three fields");
    const auto [start, end, flags] = field;
    if (start == 0 && end == 0) continue;
    if ((flags & (kIoresourceIo | kIoresourceMem)) == 0) continue;
    const std::uint64_t size = end - start + 1;  // 0 when the range wraps: caught below
    if (end < start || !std::has_single_bit(size))
      return fail(
          EIO, "line " + std::to_string(bar + 1) + " '" + std::string(line) + "': the BAR size is not a power of two");
    Region r;
    r.bar = static_cast<std::uint8_t>(bar);
    r.size = size;
    if (flags & kIoresourceIo)
      r.kind = RegionKind::io;
    else
      r.kind = (flags & kIoresourcePrefetch) ? RegionKind::memory : RegionKind::registers;
    r.is_64bit = (flags & kIoresourceMem) && (flags & kIoresourceMem64);
    regions.push_back(r);
    upper_half = r.is_64bit;
  }
  return regions;
}

Result<std::unique_ptr<Backend>> pci_sysfs_create(const std::map<std::string, std::string>& params) {
  auto p = params_parse(params);
  if (!p) return tl::unexpected(p.error());
  return PciSysfs::open(*p);
}

}  // namespace rpcie::dev
