#include "mmio_ring_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "rpcie/client.hpp"
#include "rpcie/log.hpp"
#include "rpcie/pci.hpp"
#include "rpcie/thread_sched.hpp"

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
  s->generation_ = device->generation();
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
  if (!connection) {  // the answer never reached the program: nobody will use the ring
    consumer_.close();
    done_.store(true);
    return;
  }
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

bool MmioRingServer::request_valid(const mmio::RingRequest& r) const {
  // A hostile or confused program gets a failed access, nothing else: only its own ring sees it.
  return (r.op == mmio::RingOp::store || r.op == mmio::RingOp::load) && r.bar < pci::kBarCount &&
         register_size_[r.bar] != 0 && r.width <= pci::kBarWidthMax &&
         pci::access_valid(r.offset, r.width, register_size_[r.bar]);
}

bool MmioRingServer::load_perform(const mmio::RingRequest& r, std::uint64_t& value) {
  if (!request_valid(r)) return false;
  auto link = device_->link(generation_);
  if (!link) return false;
  auto read = (*link)->mmio_read(static_cast<std::uint8_t>(r.bar), r.offset, r.width, Deadline::after(timeout_));
  if (!read) return false;  // this load alone fails; the attachment stays (see device_io.cc)
  value = *read;
  return true;
}

void MmioRingServer::burst_send() {
  if (burst_.empty()) return;
  auto link = device_->link(generation_);
  if (!link) {
    consumer_.stores_failed(burst_.size());
  } else if (auto sent = (*link)->mmio_write_burst(burst_, Deadline::after(timeout_)); !sent) {
    consumer_.stores_failed(burst_.size());
  }
  burst_.clear();
}

bool MmioRingServer::burst_gather(const mmio::RingRequest& first, mmio::RingRequest& load) {
  mmio::RingRequest r = first;
  for (;;) {
    const bool valid = request_valid(r);
    if (valid) burst_.push_back({static_cast<std::uint8_t>(r.bar), r.width, r.offset, r.value});
    consumer_.store_done(valid, false);  // the slot is free: the burst holds a copy
    // Only what is there already: a posted store must not wait for company.
    if (burst_.size() == kBurstMax || !consumer_.next(r, 0, 0)) break;
    if (r.op != mmio::RingOp::store) {
      load = r;
      consumer_.producers_wake();
      return true;
    }
  }
  // Once per burst: a producer that waits for a slot (a ring filled by one `rep stos`) is
  // woken once for all the slots freed, not once per slot.
  consumer_.producers_wake();
  return false;
}

void MmioRingServer::drain_run() {
  rpcie::thread_name("rpcie-mmio-ring");
  burst_.reserve(kBurstMax);
  mmio::RingRequest request;
  while (!stop_.load()) {
    if (!consumer_.next(request, kIdleCheckMs, kSpinNs)) {
      if (connection_ended()) break;
      auto link = device_->link(generation_);
      // Detached, or reset since the program mapped it: what it maps is gone for good.
      if (!link && (link.error().code == ENOTCONN || device_->generation() != generation_)) break;
      continue;
    }
    // Stores ready together leave together; a load goes after them (it must not pass them).
    if (request.op == mmio::RingOp::store) {
      const bool load_next = burst_gather(request, request);
      burst_send();
      if (!load_next) continue;
    }
    std::uint64_t value = 0;
    const bool ok = load_perform(request, value);
    consumer_.load_answer(ok, value);
  }
  consumer_.close();
  RPCIE_LOG_INFO("hostd", "MMIO ring of rpcie{} ended", device_->index());
  done_.store(true);
}

}  // namespace rpcie::hostd
