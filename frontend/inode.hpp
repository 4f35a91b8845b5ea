// The tree's inodes: how an inode number names a directory or file, the node of one published
// device (its directory), the table of nodes, and the attributes every inode shows.
//
// Numbering: 1 the mount, 2 pci/, 3 pci/devices/; a device directory is serial << 8 and its
// files serial << 8 | id. Serials are never reused, so neither are inode numbers: an inode
// the kernel still holds of a withdrawn device finds nothing rather than another device.
#pragma once

#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "remote_device.hpp"
#include "rpcie/client.hpp"
#include "rpcie/pci.hpp"

namespace rpcie::hostd {

inline constexpr fuse_ino_t kInoRoot = 1, kInoPci = 2, kInoDevices = 3;

// The files of a device directory (the low 8 bits of their inode numbers).
enum FileId : unsigned {
  kDir = 0,
  kVendor,
  kDevice,
  kClass,
  kRevision,
  kSubsysVendor,
  kSubsysDevice,
  kIrq,
  kResource,
  kConfig,
  kBar0 = 10,  // .. kBar0 + pci::kBarMax
  kDma = 16,
  kRemote = 17,
  kEvents = 64,  // + vector, up to kEventFilesMax vectors
};
inline constexpr unsigned kEventFilesMax = 64;

constexpr fuse_ino_t ino_make(std::uint64_t serial, unsigned id = kDir) noexcept { return (serial << 8) | id; }
constexpr std::uint64_t ino_serial(fuse_ino_t ino) noexcept { return ino >> 8; }
constexpr unsigned ino_file(fuse_ino_t ino) noexcept { return static_cast<unsigned>(ino & 0xff); }
// The mount, pci/ and pci/devices/: there whatever is attached.
constexpr bool ino_fixed(fuse_ino_t ino) noexcept { return ino == kInoRoot || ino == kInoPci || ino == kInoDevices; }

// A device's directory as its description makes it: which files exist, in listing order.
const client::BarDesc* file_bar(const client::ExportDesc& d, unsigned id);
std::uint16_t event_files(std::uint16_t vectors);  // one `events` file even without vectors
std::vector<std::pair<std::string, unsigned>> files_list(const client::ExportDesc& d);
// Without building files_list(): this runs on every getattr and open.
bool file_exists(const client::ExportDesc& d, unsigned id);

// Names of the device with index N: rpcieN, and the PCI address of its directory: domain
// 0x10000 + N (never a local device's), bus 0, device 0, function 0.
std::string device_name(unsigned index);
std::string device_bdf(unsigned index);

struct Node {
  std::shared_ptr<RemoteDevice> dev;
  std::uint64_t serial = 0;
  std::string name, bdf;
  std::vector<std::string> links;  // created in dev_dir, removed on withdraw
  bool gone = false;               // withdrawn (under Events' lock): events files answer ENODEV

  fuse_ino_t ino(unsigned id = kDir) const { return ino_make(serial, id); }
  const client::BarDesc* bar(unsigned id) const { return file_bar(dev->desc(), id); }
  std::vector<std::pair<std::string, unsigned>> files() const { return files_list(dev->desc()); }
  bool has(unsigned id) const { return file_exists(dev->desc(), id); }
};

// The published devices by serial, and the indices N of rpcieN in use. Thread-safe.
class NodeTable {
 public:
  // Gives `node` the next serial and makes it findable.
  void insert(const std::shared_ptr<Node>& node);
  // The node any inode of a device directory belongs to; null if withdrawn or never there.
  std::shared_ptr<Node> find(fuse_ino_t ino) const;
  std::shared_ptr<Node> find_named(const std::string& bdf_or_name) const;
  // Takes the node named rpcieN out; null if there is none.
  std::shared_ptr<Node> remove_named(const std::string& name);
  std::vector<std::shared_ptr<Node>> list() const;  // by serial: in publishing order

  // Lowest N for which rpcieN is free (reserved until index_release).
  unsigned index_reserve();
  // Reserves N itself (a restored attachment keeps its name); false when it is taken.
  bool index_reserve_at(unsigned index);
  void index_release(unsigned index);

 private:
  mutable std::mutex lock_;
  std::map<std::uint64_t, std::shared_ptr<Node>> nodes_;
  std::set<unsigned> indices_;
  std::uint64_t next_serial_ = 1;
};

// Attributes: owner root, group `group`; device files (config, resourceN, events) take
// `mode` (only its rw bits; a read-only BAR loses the w bits), sysfs text files are a
// read-only page, `dma` a symlink. False if `ino` names nothing (`node` null or without
// that file).
bool attr_fill(fuse_ino_t ino, const Node* node, gid_t group, mode_t mode, struct stat* st);
// The type, mode and size of file `id` (which exists) of device `d`.
void file_attr_fill(unsigned id, const client::ExportDesc& d, std::uint32_t config_size, std::size_t dma_target_size,
                    mode_t mode, struct stat* st);

}  // namespace rpcie::hostd
