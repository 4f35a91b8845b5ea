#include "rpcie/fabric.hpp"

#include <cerrno>
#include <cstring>
#include <string>

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include "local_doorbell.hpp"
#include "rpcie/log.hpp"

namespace rpcie {
namespace {

struct InfoDeleter {
  void operator()(fi_info* i) const { fi_freeinfo(i); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

}  // namespace

namespace {

// The adapter's hints through fi_getinfo, and the first info the adapter accepts.
Result<InfoPtr> info_choose(const providers::ProviderAdapter& adapter, const FabricOptions& options) {
  providers::environment_defaults_apply();
  InfoPtr hints(fi_allocinfo());
  if (!hints) return fail(ENOMEM, "fi_allocinfo");
  adapter.hints_fill(*hints);
  const char* node = nullptr;
  std::uint64_t flags = 0;
  if (adapter.node_binds_address() && !options.node.empty()) {
    node = options.node.c_str();
    flags = FI_SOURCE;
  }
  if (options.source_check) hints->caps |= FI_SOURCE;
  if (!options.rma) hints->caps &= ~(FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
  fi_info* raw_list = nullptr;
  int rc = fi_getinfo(providers::kFabricApiVersion, node, nullptr, flags, hints.get(), &raw_list);
  if (rc == -FI_ENODATA && options.source_check) {
    // No FI_SOURCE here: open without it (source_known() false) rather than not at all.
    hints->caps &= ~FI_SOURCE;
    rc = fi_getinfo(providers::kFabricApiVersion, node, nullptr, flags, hints.get(), &raw_list);
  }
  if (rc)
    return fail_fabric(rc, "fi_getinfo for provider " + std::string(adapter.fabric_name()) +
                               (node ? std::string(" on ") + node : std::string()));
  InfoPtr list(raw_list);
  const fi_info* chosen = nullptr;
  for (const fi_info* i = list.get(); i && !chosen; i = i->next)
    if (adapter.info_accept(*i) && (!options.rma || (i->caps & FI_RMA) != 0)) chosen = i;
  if (!chosen) return fail(ENODEV, "provider " + std::string(adapter.fabric_name()) + " offers no usable endpoint");
  // The channel's in-order delivery rests on send-after-send ordering (adapters ask for it).
  if (!chosen->tx_attr || !(chosen->tx_attr->msg_order & FI_ORDER_SAS))
    return fail(ENOTSUP, "provider " + std::string(adapter.fabric_name()) + " does not order messages (FI_ORDER_SAS)");
  InfoPtr copy(fi_dupinfo(chosen));
  if (!copy) return fail(ENOMEM, "fi_dupinfo");
  return copy;
}

}  // namespace

Result<void> Fabric::domain_open(const FabricOptions& options) {
  int rc = fi_fabric(info_->fabric_attr, &fabric_, nullptr);
  if (rc) return fail_fabric(rc, "fi_fabric");
  rc = fi_domain(fabric_, info_, &domain_, nullptr);
  if (rc) return fail_fabric(rc, "fi_domain");
  // A CQ with a wait fd lets an idle thread sleep in poll(2), but the provider then signals
  // it on completions (measured on tcp;ofi_rxm 1.17: ~1 us per message). So it is asked for
  // only where sleeping matters more than latency; providers without one (shm in 1.17) get
  // a CQ without a wait object and are spun with back-off instead.
  fi_cq_attr cq_attr{};
  cq_attr.size = options.cq_size;
  cq_attr.format = FI_CQ_FORMAT_DATA;
  cq_attr.wait_obj = options.cq_wait_fd ? FI_WAIT_FD : FI_WAIT_NONE;
  rc = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
  if (rc && cq_attr.wait_obj != FI_WAIT_NONE) {
    cq_attr.wait_obj = FI_WAIT_NONE;
    rc = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
    if (rc) return fail_fabric(rc, "fi_cq_open");
  } else if (rc) {
    return fail_fabric(rc, "fi_cq_open");
  } else if (cq_attr.wait_obj == FI_WAIT_FD) {
    int fd = -1;
    if (fi_control(&cq_->fid, FI_GETWAIT, &fd) == 0) wait_fd_ = fd;
  }
  fi_av_attr av_attr{};
  av_attr.type = info_->domain_attr->av_type == FI_AV_UNSPEC ? FI_AV_TABLE : info_->domain_attr->av_type;
  rc = fi_av_open(domain_, &av_attr, &av_, nullptr);
  if (rc) return fail_fabric(rc, "fi_av_open");
  return {};
}

Result<void> Fabric::endpoint_open() {
  int rc = fi_endpoint(domain_, info_, &ep_, nullptr);
  if (rc) return fail_fabric(rc, "fi_endpoint");
  rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV);
  if (rc) return fail_fabric(rc, "fi_ep_bind cq");
  rc = fi_ep_bind(ep_, &av_->fid, 0);
  if (rc) return fail_fabric(rc, "fi_ep_bind av");
  rc = adapter_->endpoint_configure(*ep_, *info_);
  if (rc) return fail_fabric(rc, "endpoint options for " + std::string(adapter_->name()));
  rc = fi_enable(ep_);
  if (rc) return fail_fabric(rc, "fi_enable");
  std::size_t len = 0;
  rc = fi_getname(&ep_->fid, nullptr, &len);
  if (rc != -FI_ETOOSMALL || len == 0 || len > proto::kMaxFabricAddress)
    return fail_fabric(rc ? rc : -FI_EOTHER, "fi_getname size");
  address_.resize(len);
  rc = fi_getname(&ep_->fid, address_.data(), &len);
  if (rc) return fail_fabric(rc, "fi_getname");
  address_.resize(len);
  return {};
}

Result<std::unique_ptr<Fabric>> Fabric::open(const FabricOptions& options) {
  if (options.adapter == nullptr) return fail(EINVAL, "no provider adapter given");
  const auto& adapter = *options.adapter;
  for (const auto& left : adapter.fabric_prepare())
    RPCIE_LOG_INFO("fabric", "removed {}: left behind by a dead process that had this PID", left);
  RPCIE_TRY_ASSIGN(auto chosen, info_choose(adapter, options));
  std::unique_ptr<Fabric> f(new Fabric());
  f->adapter_ = &adapter;
  f->info_ = chosen.release();
  RPCIE_TRY(f->domain_open(options));
  RPCIE_TRY(f->endpoint_open());
  const fi_info& info = *f->info_;
  f->mr_policy_ = MrPolicy::from_mode(info.domain_attr->mr_mode);
  f->order_saw_ = info.tx_attr && (info.tx_attr->msg_order & FI_ORDER_SAW);
  f->order_raw_ = info.tx_attr && (info.tx_attr->msg_order & FI_ORDER_RAW);
  f->max_msg_size_ = info.ep_attr && info.ep_attr->max_msg_size ? info.ep_attr->max_msg_size : (1u << 20);
  f->inject_size_ = adapter.inject_size(info);
  f->rma_support_ = adapter.rma_support(info, fi_version());
  f->source_known_ = options.source_check && (info.caps & FI_SOURCE) != 0;
  f->rma_enabled_ = (info.caps & FI_RMA) != 0;
  if (f->wait_fd_ < 0 && adapter.kind() == providers::ProviderKind::shm) {
    auto bell = LocalDoorbell::create(f->address_);
    if (bell)
      f->doorbell_ = std::make_unique<LocalDoorbell>(std::move(*bell));
    else
      RPCIE_LOG_WARN("fabric", "no doorbell ({}): idle waits on this endpoint back off with sleeps",
                     bell.error().describe());
  }
  RPCIE_LOG_DEBUG("fabric", "opened {} domain {} mr_mode {:#x} saw {} raw {} max_msg {} inject {} wait_fd {}",
                  info.fabric_attr->prov_name, info.domain_attr->name, info.domain_attr->mr_mode, f->order_saw_,
                  f->order_raw_, f->max_msg_size_, f->inject_size_, f->wait_fd_);
  return f;
}

void Fabric::ep_close() noexcept {
  if (ep_) fi_close(&ep_->fid);
  ep_ = nullptr;
}

Fabric::~Fabric() {
  // Reverse order of creation; the endpoint first so that nothing references the rest.
  ep_close();
  if (av_) fi_close(&av_->fid);
  if (cq_) fi_close(&cq_->fid);
  if (domain_) fi_close(&domain_->fid);
  if (fabric_) fi_close(&fabric_->fid);
  if (info_) fi_freeinfo(info_);
  doorbell_.reset();
}

Result<fi_addr_t> Fabric::peer_insert(std::span<const std::uint8_t> address) {
  if (address.empty() || address.size() > proto::kMaxFabricAddress) return fail(EINVAL, "peer fabric address size");
  fi_addr_t out = FI_ADDR_UNSPEC;
  int n = fi_av_insert(av_, address.data(), 1, &out, 0, nullptr);
  if (n != 1) return fail_fabric(n < 0 ? n : -FI_EINVAL, "fi_av_insert of the peer address");
  return out;
}

bool Fabric::cq_trywait() noexcept {
  if (wait_fd_ < 0) return false;
  fid* f = &cq_->fid;
  return fi_trywait(fabric_, &f, 1) == 0;
}

}  // namespace rpcie
