#include "inode.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "sysfs_text.hpp"

namespace rpcie::hostd {

const client::BarDesc* file_bar(const client::ExportDesc& d, unsigned id) {
  return id >= kBar0 && id < kBar0 + pci::kBarCount ? d.bar_find(static_cast<std::uint8_t>(id - kBar0)) : nullptr;
}

std::uint16_t event_files(std::uint16_t vectors) {
  return std::max<std::uint16_t>(1, std::min<std::uint16_t>(vectors, kEventFilesMax));
}

std::vector<std::pair<std::string, unsigned>> files_list(const client::ExportDesc& d) {
  std::vector<std::pair<std::string, unsigned>> out;
  for (const auto& t : kTextFiles) out.emplace_back(t.name, t.id);
  out.emplace_back("config", kConfig);
  for (const auto& b : d.bars)
    if (b.bar < pci::kBarCount) out.emplace_back("resource" + std::to_string(b.bar), kBar0 + b.bar);
  out.emplace_back("dma", kDma);
  for (std::uint16_t v = 0; v < event_files(d.vectors); ++v)
    out.emplace_back(v == 0 ? std::string("events") : "events" + std::to_string(v), kEvents + v);
  return out;
}

bool file_exists(const client::ExportDesc& d, unsigned id) {
  if (id <= kConfig || id == kDma || id == kRemote) return true;  // directory, text files, config
  if (id >= kEvents) return id - kEvents < event_files(d.vectors);
  return file_bar(d, id) != nullptr;
}

std::string device_name(unsigned index) { return "rpcie" + std::to_string(index); }

std::string device_bdf(unsigned index) {
  char bdf[32];
  std::snprintf(bdf, sizeof bdf, "%05x:00:00.0", 0x10000 + index);
  return bdf;
}

void NodeTable::insert(const std::shared_ptr<Node>& node) {
  std::lock_guard g(lock_);
  node->serial = next_serial_++;
  nodes_.emplace(node->serial, node);
}

std::shared_ptr<Node> NodeTable::find(fuse_ino_t ino) const {
  std::lock_guard g(lock_);
  auto it = nodes_.find(ino_serial(ino));
  return it == nodes_.end() ? nullptr : it->second;
}

std::shared_ptr<Node> NodeTable::find_named(const std::string& bdf_or_name) const {
  std::lock_guard g(lock_);
  for (const auto& [s, n] : nodes_)
    if (n->bdf == bdf_or_name || n->name == bdf_or_name) return n;
  return nullptr;
}

std::shared_ptr<Node> NodeTable::remove_named(const std::string& name) {
  std::lock_guard g(lock_);
  for (auto it = nodes_.begin(); it != nodes_.end(); ++it)
    if (it->second->name == name) {
      auto node = std::move(it->second);
      nodes_.erase(it);
      return node;
    }
  return nullptr;
}

std::vector<std::shared_ptr<Node>> NodeTable::list() const {
  std::lock_guard g(lock_);
  std::vector<std::shared_ptr<Node>> out;
  for (const auto& [s, n] : nodes_) out.push_back(n);
  return out;
}

unsigned NodeTable::index_reserve() {
  std::lock_guard g(lock_);
  unsigned i = 0;
  while (indices_.count(i)) ++i;
  indices_.insert(i);
  return i;
}

bool NodeTable::index_reserve_at(unsigned index) {
  std::lock_guard g(lock_);
  return indices_.insert(index).second;
}

void NodeTable::index_release(unsigned index) {
  std::lock_guard g(lock_);
  indices_.erase(index);
}

bool attr_fill(fuse_ino_t ino, const Node* node, gid_t group, mode_t mode, struct stat* st) {
  std::memset(st, 0, sizeof *st);
  st->st_ino = ino;
  st->st_uid = 0;
  st->st_gid = group;
  st->st_nlink = 1;
  if (ino_fixed(ino)) {
    st->st_mode = S_IFDIR | 0755;
    st->st_nlink = 2;
    return true;
  }
  const unsigned id = ino_file(ino);
  if (!node || !node->has(id)) return false;
  file_attr_fill(id, node->dev->desc(), node->dev->config_size(), node->dev->window_path().size(), mode, st);
  if (id == kDir) st->st_nlink = 2;
  return true;
}

void file_attr_fill(unsigned id, const client::ExportDesc& d, std::uint32_t config_size, std::size_t dma_target_size,
                    mode_t mode, struct stat* st) {
  const mode_t dev_mode = mode & 0666;
  if (id == kDir) {
    st->st_mode = S_IFDIR | 0755;
  } else if (id == kConfig) {
    st->st_mode = S_IFREG | dev_mode;
    st->st_size = config_size;
  } else if (const auto* b = file_bar(d, id)) {
    st->st_mode = S_IFREG | (b->readonly ? (dev_mode & 0444) : dev_mode);
    st->st_size = static_cast<off_t>(b->size);
  } else if (id == kDma) {
    st->st_mode = S_IFLNK | 0777;
    st->st_size = static_cast<off_t>(dma_target_size);
  } else if (id >= kEvents) {
    st->st_mode = S_IFREG | dev_mode;
  } else {
    st->st_mode = S_IFREG | 0444;  // sysfs attributes: a page, read-only
    st->st_size = 4096;
  }
}

}  // namespace rpcie::hostd
