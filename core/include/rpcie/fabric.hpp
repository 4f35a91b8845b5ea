// rpcie::Fabric — one libfabric endpoint and everything it stands on.
//
// Owns (and closes, in reverse order) fabric, domain, completion queue, address vector and
// an FI_EP_RDM endpoint opened with the hints of one provider adapter. One Fabric serves
// one peer relationship (one attachment): separate endpoints keep completion queues, keys
// and failure domains apart.
//
// Binding: when the adapter binds by address (tcp, verbs), fi_getinfo is given the local
// address of the bootstrap socket as node with FI_SOURCE, so the endpoint uses the same
// interface as the bootstrap connection rather than whatever fi_getinfo lists first.
//
// Thread-safety: the accessors are const and safe from any thread; posting and polling are
// serialised by the Channel that uses the Fabric.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include "rpcie/memory.hpp"
#include "rpcie/providers/provider.hpp"
#include "rpcie/result.hpp"

namespace rpcie {

class LocalDoorbell;

struct FabricOptions {
  const providers::ProviderAdapter* adapter = nullptr;  // required
  std::string node;  // local IP of the bootstrap socket (used if the adapter binds by address)
  std::size_t cq_size = 1024;
  // Give the CQ a wait fd (where the provider has one) so that an idle thread can sleep in
  // poll(2) instead of backing off with sleeps of up to ChannelOptions::backoff_max. The
  // provider then signals it on completions: measured on tcp;ofi_rxm 1.17, a round trip
  // with wait fds on both ends ran 11-17 % slower. So latency-bound request/response
  // sessions leave it off; a side driven by a ProgressThread (only an RMA target, idle for
  // long stretches) turns it on.
  bool cq_wait_fd = false;
  // Ask for FI_SOURCE so that every received message names its sender: the Channel then
  // drops messages that do not come from its peer (an attachment accepts data-path
  // messages only from the fabric address bound at attach). Where the provider does not
  // offer FI_SOURCE the fabric opens without it and source_known() is false.
  bool source_check = false;
  // Ask for one-sided RMA (FI_RMA and the remote access bits). Off for the sealed data path
  // (data_path.hpp): the endpoint is then opened for messages only, so the provider itself
  // refuses any RMA aimed at it, whatever key an attacker holds.
  bool rma = true;
};

class Fabric {
 public:
  static Result<std::unique_ptr<Fabric>> open(const FabricOptions& options);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  const providers::ProviderAdapter& adapter() const noexcept { return *adapter_; }
  const fi_info& info() const noexcept { return *info_; }
  fid_fabric* fabric() const noexcept { return fabric_; }
  fid_domain* domain() const noexcept { return domain_; }
  fid_ep* ep() const noexcept { return ep_; }
  fid_cq* cq() const noexcept { return cq_; }
  fid_av* av() const noexcept { return av_; }

  // The endpoint's own address (fi_getname), to hand to the peer.
  const std::vector<std::uint8_t>& address() const noexcept { return address_; }
  // Adds a peer's address to the AV.
  Result<fi_addr_t> peer_insert(std::span<const std::uint8_t> address);

  MrPolicy mr_policy() const noexcept { return mr_policy_; }
  // True when the provider granted FI_ORDER_SAW: a message sent after an RMA write is
  // handled at the target after the write is visible there.
  bool order_saw() const noexcept { return order_saw_; }
  // True when the provider grants FI_ORDER_RAW (not asked for: what the chosen info says): an
  // RMA read posted after an RMA write is not performed at the target before the write, so
  // its completion proves the write there.
  bool order_raw() const noexcept { return order_raw_; }
  std::size_t max_msg_size() const noexcept { return max_msg_size_; }
  std::size_t inject_size() const noexcept { return inject_size_; }
  providers::RmaSupport rma_support() const noexcept { return rma_support_; }
  // Whether the endpoint was opened with FI_RMA (FabricOptions::rma).
  bool rma_enabled() const noexcept { return rma_enabled_; }
  // True when completions carry the sender's address (FI_SOURCE granted).
  bool source_known() const noexcept { return source_known_; }

  // File descriptor that becomes readable when the CQ may have work (FI_WAIT_FD), or -1
  // when the provider offers none (shm in 1.17): the caller then spins and backs off.
  int wait_fd() const noexcept { return wait_fd_; }
  // fi_trywait on the CQ: true if it is safe to block on wait_fd().
  bool cq_trywait() noexcept;
  // Where the CQ has no wait fd and the peer is on this host (shm): this endpoint's doorbell,
  // which its peer rings after posting (core/src/local_doorbell.hpp), so that an idle waiter
  // sleeps on it rather than backing off. Null elsewhere, or when it could not be made.
  LocalDoorbell* doorbell() const noexcept { return doorbell_.get(); }
  // Closes the endpoint ahead of the rest (cancelling what is posted), so that its owner can
  // release memory regions before the domain closes. Idempotent; ep() is null afterwards.
  void ep_close() noexcept;

 private:
  Fabric() = default;
  // The steps of open(): fabric, domain, CQ and AV; then the endpoint, enabled, and its address.
  Result<void> domain_open(const FabricOptions& options);
  Result<void> endpoint_open();

  const providers::ProviderAdapter* adapter_ = nullptr;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  std::vector<std::uint8_t> address_;
  MrPolicy mr_policy_;
  bool order_saw_ = false;
  bool order_raw_ = false;
  std::size_t max_msg_size_ = 0;
  std::size_t inject_size_ = 0;
  providers::RmaSupport rma_support_;
  bool rma_enabled_ = true;
  int wait_fd_ = -1;
  bool source_known_ = false;
  std::unique_ptr<LocalDoorbell> doorbell_;
};

}  // namespace rpcie
