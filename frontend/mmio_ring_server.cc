#include "mmio_ring_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>

#include "rpcie/client.hpp"
#include "rpcie/log.hpp"
#include "rpcie/pci.hpp"

namespace rpcie::hostd {

namespace {
// How long the drainer spins on an empty ring before it sleeps: a burst of stores from the
// program then costs no wake-up per store.
constexpr std::int64_t kSpinNs = 50'000;
// How often an idle drainer looks at the connection and the device.
constexpr int kIdleCheckMs = 100;
}  // namespace

Result<std::unique_ptr<MmioRingServer>> MmioRingServer::create(std::shared_ptr<RemoteDevice> device,
                                                               std::chrono::milliseconds timeout) {
  std::unique_ptr<MmioRingServer> s(new MmioRingServer());
  bool any = false;
  for (const auto& b : device->desc().bars)
    if (b.kind == pci::BarKind::registers && b.bar < pci::kBarCount) {
      s->register_size_[b.bar] = b.size;
      any = true;
    }
  if (!any) return fail(ENODEV, "the device has no register BAR");
  s->device_ = std::move(device);
  s->timeout_ = timeout;
  s->memfd_ = Fd(::memfd_create("rpcie-mmio-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!s->memfd_) return fail(errno, "memfd_create for an MMIO ring");
  const std::size_t bytes = mmio::ring_bytes(kCapacity);
  if (::ftruncate(s->memfd_.get(), static_cast<off_t>(bytes)) != 0) return fail(errno, "size the MMIO ring");
  // The program must not be able to shrink the file under hostd's mapping (SIGBUS here).
  if (::fcntl(s->memfd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return fail(errno, "seal the MMIO ring");
  RPCIE_TRY_ASSIGN(s->memory_, Mapping::shared(s->memfd_.get(), bytes));
  if (!mmio::ring_format(s->memory_.data(), s->memory_.size(), kCapacity) ||
      !s->consumer_.attach(s->memory_.data(), s->memory_.size()))
    return fail(EINVAL, "format the MMIO ring");
  return s;
}

MmioRingServer::~MmioRingServer() { stop(); }

void MmioRingServer::serve(Fd connection) {
  connection_ = std::move(connection);
  drainer_ = std::thread([this] { drain_run(); });
}

void MmioRingServer::stop() {
  stop_.store(true);
  if (drainer_.joinable()) drainer_.join();
}

bool MmioRingServer::connection_ended() const {
  pollfd p{connection_.get(), POLLIN | POLLRDHUP, 0};
  // The program sends nothing after its request: anything readable is its end (or garbage).
  return ::poll(&p, 1, 0) != 0;
}

bool MmioRingServer::request_perform(const mmio::RingRequest& r, std::uint64_t& value) {
  // A hostile or confused program gets a failed access, nothing else: only its own ring sees it.
  if ((r.op != mmio::RingOp::store && r.op != mmio::RingOp::load) || r.bar >= pci::kBarCount ||
      register_size_[r.bar] == 0 || r.width > pci::kBarWidthMax ||
      !pci::access_valid(r.offset, r.width, register_size_[r.bar]))
    return false;
  auto link = device_->link();
  if (!link) return false;
  const Deadline deadline = Deadline::after(timeout_);
  if (r.op == mmio::RingOp::store) {
    auto done = (*link)->mmio_write(static_cast<std::uint8_t>(r.bar), r.offset, r.width, r.value, deadline);
    if (!done && done.error().to_errno() == ETIMEDOUT) device_->link_abandon(*link, done.error());
    return static_cast<bool>(done);
  }
  auto read = (*link)->mmio_read(static_cast<std::uint8_t>(r.bar), r.offset, r.width, deadline);
  if (!read) {
    if (read.error().to_errno() == ETIMEDOUT) device_->link_abandon(*link, read.error());
    return false;
  }
  value = *read;
  return true;
}

void MmioRingServer::drain_run() {
  ::prctl(PR_SET_NAME, "rpcie-mmio-ring");
  mmio::RingRequest request;
  while (!stop_.load()) {
    if (!consumer_.next(request, kIdleCheckMs, kSpinNs)) {
      if (connection_ended()) break;
      auto link = device_->link();
      if (!link && link.error().code == ENOTCONN) break;  // detached
      continue;
    }
    std::uint64_t value = 0;
    const bool ok = request_perform(request, value);
    if (request.op == mmio::RingOp::store)
      consumer_.store_done(ok);
    else
      consumer_.load_answer(ok, value);
  }
  consumer_.close();
  RPCIE_LOG_INFO("hostd", "MMIO ring of rpcie{} ended", device_->index());
  done_.store(true);
}

}  // namespace rpcie::hostd
