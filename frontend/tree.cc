#include "tree.hpp"

#include <cerrno>

#include "dev_links.hpp"
#include "remote_device.hpp"
#include "rpcie/log.hpp"
#include "rpcie/pci.hpp"
#include "tree_impl.hpp"

namespace rpcie::hostd {

TreeImpl::TreeImpl(const TreeOptions& options)
    : opt(options), watchdog(options.timeout, [](fuse_req_t req) { fuse_reply_err(req, EIO); }) {}

bool TreeImpl::attr_fill(fuse_ino_t ino, struct stat* st) const {
  const auto node = ino_fixed(ino) ? nullptr : nodes.find(ino);
  return hostd::attr_fill(ino, node.get(), opt.group, opt.mode, st);
}

void TreeImpl::entry_reply(fuse_req_t req, fuse_ino_t ino) const {
  fuse_entry_param e{};
  if (!attr_fill(ino, &e.attr)) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  e.ino = ino;
  e.attr_timeout = kAttrTimeout;
  e.entry_timeout = kAttrTimeout;
  fuse_reply_entry(req, &e);
}

Tree::Tree(const TreeOptions& options) : impl_(std::make_unique<TreeImpl>(options)) {}

Result<std::unique_ptr<Tree>> Tree::mount(const TreeOptions& options) {
  std::unique_ptr<Tree> t(new Tree(options));
  RPCIE_TRY_ASSIGN(t->impl_->fuse, FuseMount::open(options.mount, fuse_ops_table(), t->impl_.get()));
  t->impl_->watchdog.start();
  return t;
}

int Tree::run() { return impl_->fuse->run(); }

unsigned Tree::index_reserve() { return impl_->nodes.index_reserve(); }

bool Tree::index_reserve_at(unsigned index) { return impl_->nodes.index_reserve_at(index); }

void Tree::index_release(unsigned index) { impl_->nodes.index_release(index); }

Result<Tree::Published> Tree::publish(std::shared_ptr<RemoteDevice> device) {
  auto& m = *impl_;
  auto node = std::make_shared<Node>();
  node->dev = std::move(device);
  node->name = device_name(node->dev->index());
  node->bdf = device_bdf(node->dev->index());
  Published p{node->name, dev_link_path(m.opt.dev_dir, node->name), m.sysfs_path(*node)};
  const auto& prm = node->dev->params();
  RPCIE_TRY_ASSIGN(node->links, dev_links_create(m.opt.dev_dir, node->name, prm, p.sysfs));
  m.nodes.insert(node);
  // Interrupts and link changes reach the events files; a new attachment makes what the
  // page cache holds of memory BARs stale.
  node->dev->listen([&m, raw = node.get()](DeviceChange c) {
    m.events.changed(raw, false);
    if (c == DeviceChange::reconnected)
      for (const auto& b : raw->dev->desc().bars)
        if (b.kind == pci::BarKind::memory && b.bar < pci::kBarCount)
          fuse_lowlevel_notify_inval_inode(m.fuse->session(), raw->ino(kBar0 + b.bar), 0, 0);
  });
  RPCIE_LOG_INFO("hostd", "{}: {} on {}:{} at {}", node->name, prm.export_name, prm.host, prm.port, p.sysfs);
  return p;
}

Result<void> Tree::withdraw(const std::string& name, Deadline deadline) {
  auto& m = *impl_;
  auto node = m.nodes.remove_named(name);
  if (!node) return fail(ENOENT, "no device " + name);
  node->dev->listen(nullptr);
  dev_links_remove(node->links, m.sysfs_path(*node));
  // The kernel forgets the directory and its entries now (no stale cached lookups).
  auto* se = m.fuse->session();
  for (const auto& [fname, id] : node->files())
    (void)fuse_lowlevel_notify_inval_entry(se, node->ino(), fname.c_str(), fname.size());
  (void)fuse_lowlevel_notify_delete(se, kInoDevices, node->ino(), node->bdf.c_str(), node->bdf.size());
  m.events.changed(node.get(), true);
  auto r = node->dev->detach(deadline);
  index_release(node->dev->index());
  RPCIE_LOG_INFO("hostd", "{}: detached{}", name, r ? "" : " (" + r.error().describe() + ")");
  return r;
}

std::vector<std::string> Tree::names() const {
  std::vector<std::string> out;
  for (const auto& n : impl_->nodes.list()) out.push_back(n->name);
  return out;
}

std::vector<Tree::DeviceView> Tree::devices() const {
  std::vector<DeviceView> out;
  for (const auto& n : impl_->nodes.list())
    out.push_back({n->name, dev_link_path(impl_->opt.dev_dir, n->name), impl_->sysfs_path(*n), n->dev});
  return out;
}

Tree::~Tree() {
  auto& m = *impl_;
  // Every device stops reconnecting first, so that the detaches below do not wait out one
  // reconnect attempt after another (an exporter going down with us).
  for (const auto& d : devices()) d.device->stop_request();
  for (const auto& name : names()) (void)withdraw(name, Deadline::after(std::chrono::seconds(1)));
  m.watchdog.stop();
  m.fuse.reset();
}

}  // namespace rpcie::hostd
