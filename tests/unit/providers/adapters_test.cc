// Each adapter against synthetic fi_info objects (fi_allocinfo + fields filled by hand),
// and one real fi_getinfo: tcp;ofi_rxm, which every Linux libfabric build has.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <doctest/doctest.h>
#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext.h>

#include "rpcie/providers/provider.hpp"

using rpcie::providers::provider_available;
using rpcie::providers::provider_get;
using rpcie::providers::provider_registry;
using rpcie::providers::ProviderAdapter;
using rpcie::providers::ProviderKind;
using rpcie::providers::RmaSupport;

namespace {

using InfoPtr = std::unique_ptr<fi_info, decltype(&fi_freeinfo)>;

InfoPtr info_make() {
  InfoPtr info(fi_allocinfo(), &fi_freeinfo);
  REQUIRE(info != nullptr);
  return info;
}

// What a provider would return for a usable RDM endpoint.
InfoPtr info_rdm_make(std::uint64_t caps = FI_MSG | FI_RMA, const char* domain = nullptr) {
  InfoPtr info = info_make();
  info->caps = caps;
  info->ep_attr->type = FI_EP_RDM;
  if (domain != nullptr) info->domain_attr->name = strdup(domain);
  return info;
}

const ProviderAdapter& efa() { return provider_get(ProviderKind::efa); }
const ProviderAdapter& verbs() { return provider_get(ProviderKind::verbs); }
const ProviderAdapter& shm() { return provider_get(ProviderKind::shm); }
const ProviderAdapter& tcp() { return provider_get(ProviderKind::tcp); }

const std::array<const ProviderAdapter*, 3> kNonEfa{&verbs(), &shm(), &tcp()};

constexpr std::uint32_t kFabric117 = FI_VERSION(1, 17);
constexpr std::uint32_t kFabric118 = FI_VERSION(1, 18);

// Sets or unsets one environment variable for one test and puts the previous value back.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~EnvGuard() {
    if (saved_) {
      setenv(name_, saved_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

// A fid_ep whose only operation is a setopt that records its arguments and returns a preset code.
struct SetoptRecord {
  int calls = 0;
  int level = 0;
  int optname = 0;
  std::size_t optlen = 0;
  std::size_t value = 0;
  int rc = 0;
};
SetoptRecord g_setopt;

int setopt_fake(fid_t /*fid*/, int level, int optname, const void* optval, std::size_t optlen) {
  ++g_setopt.calls;
  g_setopt.level = level;
  g_setopt.optname = optname;
  g_setopt.optlen = optlen;
  if (optlen == sizeof(std::size_t)) std::memcpy(&g_setopt.value, optval, optlen);
  return g_setopt.rc;
}

struct FakeEndpoint {
  fi_ops_ep ops{};
  fid_ep ep{};
  FakeEndpoint() {
    ops.size = sizeof ops;
    ops.setopt = &setopt_fake;
    ep.fid.fclass = FI_CLASS_EP;
    ep.ops = &ops;
    g_setopt = SetoptRecord{};
  }
};

}  // namespace

TEST_CASE("each adapter names its provider and the fi_info spelling it asks for") {
  CHECK(tcp().fabric_name() == "tcp;ofi_rxm");
  CHECK(shm().fabric_name() == "shm");
  CHECK(verbs().fabric_name() == "verbs;ofi_rxm");
  CHECK(efa().fabric_name() == "efa");
  CHECK(tcp().kind() == ProviderKind::tcp);
  CHECK(shm().kind() == ProviderKind::shm);
  CHECK(verbs().kind() == ProviderKind::verbs);
  CHECK(efa().kind() == ProviderKind::efa);
}

TEST_CASE("only tcp and verbs bind the endpoint to the bootstrap socket's address") {
  CHECK(tcp().node_binds_address());
  CHECK(verbs().node_binds_address());
  CHECK_FALSE(shm().node_binds_address());
  CHECK_FALSE(efa().node_binds_address());
}

TEST_CASE("every adapter fills hints for an RDM endpoint with messages and one-sided RMA") {
  for (const ProviderAdapter* adapter : provider_registry()) {
    CAPTURE(adapter->name());
    InfoPtr hints = info_make();
    adapter->hints_fill(*hints);
    CHECK(hints->ep_attr->type == FI_EP_RDM);
    CHECK(hints->caps == (FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE));
    CHECK((hints->caps & (FI_SOURCE | FI_TAGGED | FI_HMEM | FI_ATOMIC)) == 0);
    CHECK(hints->mode == FI_CONTEXT);
    CHECK(static_cast<std::uint64_t>(hints->domain_attr->mr_mode) == adapter->mr_mode_accepted());
    CHECK(hints->domain_attr->threading == FI_THREAD_SAFE);
    REQUIRE(hints->fabric_attr->prov_name != nullptr);
    CHECK(std::string_view(hints->fabric_attr->prov_name) == adapter->fabric_name());
  }
}

TEST_CASE("hints ask for send-after-send ordering everywhere and send-after-write on tcp and verbs") {
  for (const ProviderAdapter* adapter : {&tcp(), &verbs()}) {
    CAPTURE(adapter->name());
    InfoPtr hints = info_make();
    adapter->hints_fill(*hints);
    CHECK(hints->tx_attr->msg_order == (FI_ORDER_SAS | FI_ORDER_SAW));
    CHECK(hints->rx_attr->msg_order == (FI_ORDER_SAS | FI_ORDER_SAW));
  }
  // efa lacks SAW; shm would grant it but only by leaving its fast (single-copy) RMA path.
  for (const ProviderAdapter* adapter : {&efa(), &shm()}) {
    CAPTURE(adapter->name());
    InfoPtr hints = info_make();
    adapter->hints_fill(*hints);
    CHECK(hints->tx_attr->msg_order == FI_ORDER_SAS);
    CHECK(hints->rx_attr->msg_order == FI_ORDER_SAS);
  }
}

TEST_CASE("shm grants send-after-send ordering with its fast RMA path (FI_MR_VIRT_ADDR)") {
  InfoPtr hints = info_make();
  shm().hints_fill(*hints);
  fi_info* infos = nullptr;
  REQUIRE(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints.get(), &infos) == 0);
  const InfoPtr owned(infos, &fi_freeinfo);
  CHECK((infos->tx_attr->msg_order & FI_ORDER_SAS) != 0);
  CHECK((infos->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0);
}

TEST_CASE("hints_fill replaces a provider name that is already there") {
  InfoPtr hints = info_make();
  hints->fabric_attr->prov_name = strdup("sockets");
  shm().hints_fill(*hints);
  CHECK(std::string_view(hints->fabric_attr->prov_name) == "shm");
}

TEST_CASE("mr_mode_accepted covers what each provider may require and never FI_MR_RAW") {
  constexpr std::uint64_t all = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  CHECK(tcp().mr_mode_accepted() == all);
  CHECK(shm().mr_mode_accepted() == all);
  CHECK(verbs().mr_mode_accepted() == all);
  CHECK(efa().mr_mode_accepted() == (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY));
  for (const ProviderAdapter* adapter : provider_registry()) {
    CHECK((adapter->mr_mode_accepted() & FI_MR_RAW) == 0);
  }
}

TEST_CASE("efa accepts its -rdm domains and rejects -dgrm domains") {
  CHECK(efa().info_accept(*info_rdm_make(FI_MSG | FI_RMA, "rdmap0s31-rdm")));
  CHECK(efa().info_accept(*info_rdm_make(FI_MSG | FI_RMA, "efa_0-rdm")));
  CHECK_FALSE(efa().info_accept(*info_rdm_make(FI_MSG | FI_RMA, "rdmap0s31-dgrm")));
  CHECK(efa().info_accept(*info_rdm_make(FI_MSG | FI_RMA)));  // no domain name: nothing to hold against it
}

TEST_CASE("every adapter rejects endpoints other than RDM and infos without messages") {
  for (const ProviderAdapter* adapter : provider_registry()) {
    CAPTURE(adapter->name());
    CHECK(adapter->info_accept(*info_rdm_make()));
    CHECK(adapter->info_accept(*info_rdm_make(FI_MSG)));  // FI_RMA is the core's to require (sealed: none)
    InfoPtr dgram = info_rdm_make();
    dgram->ep_attr->type = FI_EP_DGRAM;
    CHECK_FALSE(adapter->info_accept(*dgram));
    InfoPtr msg = info_rdm_make();
    msg->ep_attr->type = FI_EP_MSG;
    CHECK_FALSE(adapter->info_accept(*msg));
    CHECK_FALSE(adapter->info_accept(*info_rdm_make(FI_RMA)));
  }
}

TEST_CASE("tcp, shm and verbs accept any domain name, including one ending in -dgrm") {
  for (const ProviderAdapter* adapter : kNonEfa) {
    CAPTURE(adapter->name());
    CHECK(adapter->info_accept(*info_rdm_make(FI_MSG | FI_RMA, "eth0")));
    CHECK(adapter->info_accept(*info_rdm_make(FI_MSG | FI_RMA, "odd-dgrm")));
  }
}

TEST_CASE("inject_size comes from tx_attr, capped at one page, and is 0 without tx_attr") {
  for (const ProviderAdapter* adapter : provider_registry()) {
    CAPTURE(adapter->name());
    InfoPtr info = info_rdm_make();
    info->tx_attr->inject_size = 64;
    CHECK(adapter->inject_size(*info) == 64);
    info->tx_attr->inject_size = 4096;
    CHECK(adapter->inject_size(*info) == 4096);
    info->tx_attr->inject_size = 1 << 20;
    CHECK(adapter->inject_size(*info) == 4096);
    info->tx_attr->inject_size = 0;
    CHECK(adapter->inject_size(*info) == 0);
    std::free(info->tx_attr);
    info->tx_attr = nullptr;
    CHECK(adapter->inject_size(*info) == 0);
  }
}

TEST_CASE("efa reports RMA as emulated with libfabric 1.17 and native from 1.18") {
  const InfoPtr rma = info_rdm_make(FI_MSG | FI_RMA);
  const RmaSupport on_117 = efa().rma_support(*rma, kFabric117);
  CHECK_FALSE(on_117.read_native);
  CHECK_FALSE(on_117.write_native);
  const RmaSupport on_118 = efa().rma_support(*rma, kFabric118);
  CHECK(on_118.read_native);
  CHECK(on_118.write_native);
  CHECK(efa().rma_support(*rma, FI_VERSION(2, 0)).write_native);
}

TEST_CASE("efa reports nothing native without FI_RMA, whatever the version") {
  const InfoPtr msg_only = info_rdm_make(FI_MSG);
  const RmaSupport support = efa().rma_support(*msg_only, kFabric118);
  CHECK_FALSE(support.read_native);
  CHECK_FALSE(support.write_native);
}

TEST_CASE("tcp, shm and verbs report native RMA exactly when FI_RMA is granted") {
  for (const ProviderAdapter* adapter : kNonEfa) {
    CAPTURE(adapter->name());
    for (std::uint32_t version : {kFabric117, kFabric118}) {
      const RmaSupport with = adapter->rma_support(*info_rdm_make(FI_MSG | FI_RMA), version);
      CHECK(with.read_native);
      CHECK(with.write_native);
      const RmaSupport without = adapter->rma_support(*info_rdm_make(FI_MSG), version);
      CHECK_FALSE(without.read_native);
      CHECK_FALSE(without.write_native);
    }
  }
}

TEST_CASE("endpoint_configure on tcp, shm and verbs returns 0 and leaves the endpoint alone") {
  const InfoPtr info = info_rdm_make();
  for (const ProviderAdapter* adapter : kNonEfa) {
    CAPTURE(adapter->name());
    fid_ep ep{};  // a zeroed endpoint: any use of it would crash or show up below
    CHECK(adapter->endpoint_configure(ep, *info) == 0);
    const fid_ep zero{};
    CHECK(std::memcmp(&ep, &zero, sizeof ep) == 0);
  }
}

TEST_CASE("endpoint_configure on efa makes the hardware retry receiver-not-ready forever") {
  EnvGuard env("RPCIE_EFA_RNR_RETRY", nullptr);
  FakeEndpoint fake;
  CHECK(efa().endpoint_configure(fake.ep, *info_rdm_make()) == 0);
  CHECK(g_setopt.calls == 1);
  CHECK(g_setopt.level == FI_OPT_ENDPOINT);
  CHECK(g_setopt.optname == FI_OPT_EFA_RNR_RETRY);
  CHECK(g_setopt.optlen == sizeof(std::size_t));
  CHECK(g_setopt.value == 7);
}

TEST_CASE("RPCIE_EFA_RNR_RETRY overrides the efa retry count") {
  for (const char* text : {"0", "3", "7"}) {
    EnvGuard env("RPCIE_EFA_RNR_RETRY", text);
    FakeEndpoint fake;
    CHECK(efa().endpoint_configure(fake.ep, *info_rdm_make()) == 0);
    CHECK(g_setopt.value == std::stoul(text));
  }
}

TEST_CASE("an invalid RPCIE_EFA_RNR_RETRY fails with -FI_EINVAL before touching the endpoint") {
  for (const char* text : {"8", "-1", "abc", "3x", " 3", "99999999999999999999999"}) {
    CAPTURE(text);
    EnvGuard env("RPCIE_EFA_RNR_RETRY", text);
    FakeEndpoint fake;
    CHECK(efa().endpoint_configure(fake.ep, *info_rdm_make()) == -FI_EINVAL);
    CHECK(g_setopt.calls == 0);
  }
}

TEST_CASE("efa tolerates a device that cannot change rnr_retry unless the operator asked for it") {
  {
    EnvGuard env("RPCIE_EFA_RNR_RETRY", nullptr);
    FakeEndpoint fake;
    g_setopt.rc = -FI_ENOSYS;
    CHECK(efa().endpoint_configure(fake.ep, *info_rdm_make()) == 0);
  }
  {
    EnvGuard env("RPCIE_EFA_RNR_RETRY", "5");
    FakeEndpoint fake;
    g_setopt.rc = -FI_ENOSYS;
    CHECK(efa().endpoint_configure(fake.ep, *info_rdm_make()) == -FI_ENOSYS);
  }
}

TEST_CASE("efa passes on any other fi_setopt failure, e.g. an endpoint already enabled") {
  EnvGuard env("RPCIE_EFA_RNR_RETRY", nullptr);
  FakeEndpoint fake;
  g_setopt.rc = -FI_EINVAL;
  CHECK(efa().endpoint_configure(fake.ep, *info_rdm_make()) == -FI_EINVAL);
}

TEST_CASE("every adapter documents its environment variables under FI_ or RPCIE_ names") {
  for (const ProviderAdapter* adapter : provider_registry()) {
    CAPTURE(adapter->name());
    CHECK_FALSE(adapter->env_vars().empty());
    std::set<std::string_view> seen;
    for (const auto& var : adapter->env_vars()) {
      CAPTURE(var.name);
      CHECK((var.name.starts_with("FI_") || var.name.starts_with("RPCIE_")));
      CHECK_FALSE(var.meaning.empty());
      CHECK(seen.insert(var.name).second);
    }
  }
}

TEST_CASE("the FI_ variables of tcp, shm and verbs are parameters this libfabric defines") {
  // fi_getparams lists the parameters of the providers libfabric loaded; efa only loads with
  // a device, and verbs may be missing from a build, so they are checked only when present.
  fi_param* params = nullptr;
  int count = 0;
  REQUIRE(fi_getparams(&params, &count) == 0);
  std::set<std::string_view> defined;
  for (int i = 0; i < count; ++i) defined.insert(params[i].name);
  const bool verbs_built =
      std::any_of(defined.begin(), defined.end(), [](std::string_view name) { return name.starts_with("FI_VERBS_"); });
  for (const ProviderAdapter* adapter : kNonEfa) {
    if (adapter == &verbs() && !verbs_built) continue;
    for (const auto& var : adapter->env_vars()) {
      CAPTURE(var.name);
      if (var.name.starts_with("FI_")) CHECK(defined.contains(var.name));
    }
  }
  fi_freeparams(params);
}

TEST_CASE("the efa variables include the RNR retry override") {
  bool found = false;
  for (const auto& var : efa().env_vars()) found = found || var.name == "RPCIE_EFA_RNR_RETRY";
  CHECK(found);
}

TEST_CASE("tcp;ofi_rxm is available on this machine") { CHECK(provider_available(tcp())); }

TEST_CASE("tcp;ofi_rxm grants the send-after-write ordering rpcie asks for") {
  InfoPtr hints = info_make();
  tcp().hints_fill(*hints);
  fi_info* infos = nullptr;
  REQUIRE(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints.get(), &infos) == 0);
  const InfoPtr owned(infos, &fi_freeinfo);
  for (const fi_info* info = infos; info != nullptr; info = info->next) {
    CHECK(tcp().info_accept(*info));
    CHECK((info->tx_attr->msg_order & FI_ORDER_SAW) != 0);
  }
}

// Runs in a forked child: the adapter cleans once per PID, and the child's PID is fresh.
TEST_CASE("shm's fabric_prepare removes region files named after this PID, once, and nothing else") {
  const ProviderAdapter& shm = provider_get(ProviderKind::shm);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const std::string mine = "/dev/shm/" + std::to_string(::getpid()) + ":7:7";
    const std::string other = "/dev/shm/9999999:7:7";  // over any pid_max: never a live process
    int failures = 0;
    for (const auto& f : {mine, other}) std::fclose(std::fopen(f.c_str(), "w"));
    const auto removed = shm.fabric_prepare();
    failures += !(removed.size() == 1 && removed.front() == mine);
    failures += ::access(mine.c_str(), F_OK) == 0;   // gone
    failures += ::access(other.c_str(), F_OK) != 0;  // left alone
    std::fclose(std::fopen(mine.c_str(), "w"));
    failures += !shm.fabric_prepare().empty();  // once per PID: now it could be ours
    failures += ::access(mine.c_str(), F_OK) != 0;
    ::unlink(mine.c_str());
    ::unlink(other.c_str());
    ::_exit(failures);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(provider_get(ProviderKind::tcp).fabric_prepare().empty());
}

TEST_CASE(
    "eager_max is rxm's eager limit less its header for tcp and verbs: FI_OFI_RXM_EAGER_LIMIT, else "
    "FI_OFI_RXM_BUFFER_SIZE") {
  using rpcie::providers::ProviderKind;
  struct Saved {
    const char* name;
    std::optional<std::string> value;
  };
  Saved saved[] = {{"FI_OFI_RXM_EAGER_LIMIT", {}}, {"FI_OFI_RXM_BUFFER_SIZE", {}}};
  for (auto& v : saved)
    if (const char* e = std::getenv(v.name)) v.value = e;
  auto env_put = [](const char* name, const char* value) {
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  };
  struct Case {
    const char* eager;   // nullptr: unset
    const char* buffer;  // nullptr: unset
    std::size_t expected;
  };
  const Case cases[] = {
      {nullptr, nullptr, 16384 - 256}, {nullptr, "65600", 65600 - 256}, {nullptr, "0x10000", 65536 - 256},
      {nullptr, "lots", 16384 - 256},  {nullptr, "", 16384 - 256},      {nullptr, "100", 4096},
      {"65536", nullptr, 65536 - 256}, {"65536", "32768", 65536 - 256}, {"8192", "65600", 8192 - 256},
      {"many", "32768", 32768 - 256},  {"0", nullptr, 16384 - 256}};
  for (const Case& c : cases) {
    CAPTURE((c.eager ? c.eager : "(unset)"));
    CAPTURE((c.buffer ? c.buffer : "(unset)"));
    env_put("FI_OFI_RXM_EAGER_LIMIT", c.eager);
    env_put("FI_OFI_RXM_BUFFER_SIZE", c.buffer);
    CHECK(provider_get(ProviderKind::tcp).eager_max() == c.expected);
    CHECK(provider_get(ProviderKind::verbs).eager_max() == c.expected);
    CHECK(provider_get(ProviderKind::shm).eager_max() == 0);  // no rendezvous that matters here
    CHECK(provider_get(ProviderKind::efa).eager_max() == 0);
  }
  for (const auto& v : saved) env_put(v.name, v.value ? v.value->c_str() : nullptr);
}

TEST_CASE(
    "environment_defaults_apply sets rxm's posted buffers and context sizes to 256 where unset and keeps an "
    "operator's value") {
  for (const char* name : {"FI_OFI_RXM_MSG_RX_SIZE", "FI_OFI_RXM_TX_SIZE", "FI_OFI_RXM_RX_SIZE"}) {
    const std::string variable = name;
    CAPTURE(variable);
    std::optional<std::string> saved;
    if (const char* e = std::getenv(name)) saved = e;
    ::unsetenv(name);
    rpcie::providers::environment_defaults_apply();
    const char* set = std::getenv(name);
    REQUIRE(set != nullptr);
    CHECK(std::string(set) == "256");
    ::setenv(name, "512", 1);
    rpcie::providers::environment_defaults_apply();
    CHECK(std::string(std::getenv(name)) == "512");
    ::setenv(name, "", 1);  // set though empty: still the operator's, left alone
    rpcie::providers::environment_defaults_apply();
    CHECK(std::string(std::getenv(name)).empty());
    if (saved)
      ::setenv(name, saved->c_str(), 1);
    else
      ::unsetenv(name);
  }
}

TEST_CASE(
    "environment_defaults_apply shrinks rxm's bounce buffers to 256 bytes with the eager limit kept at 16384, only "
    "without an RDMA device and without an operator's buffer size") {
  using rpcie::providers::ProviderKind;
  constexpr const char* kBuffer = "FI_OFI_RXM_BUFFER_SIZE";
  constexpr const char* kEager = "FI_OFI_RXM_EAGER_LIMIT";
  std::optional<std::string> saved_buffer, saved_eager;
  if (const char* e = std::getenv(kBuffer)) saved_buffer = e;
  if (const char* e = std::getenv(kEager)) saved_eager = e;
  auto env_put = [](const char* name, const char* value) {
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  };
  auto env_get = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value ? value : "(unset)";
  };
  struct Case {
    bool rdma;
    const char* buffer;  // the operator's; nullptr: unset
    const char* eager;
    const char* buffer_after;
    const char* eager_after;
  };
  const Case cases[] = {
      {false, nullptr, nullptr, "256", "16384"},       // ours: small buffers, libfabric's eager limit
      {true, nullptr, nullptr, "(unset)", "(unset)"},  // verbs needs eager == buffer: libfabric's
      {false, "4096", nullptr, "4096", "(unset)"},     // the operator's buffer, and the eager limit it implies
      {false, "", nullptr, "", "(unset)"},             // set though empty: the operator's
      {false, nullptr, "65536", "256", "65536"},       // the operator's eager limit, our buffers
      {true, nullptr, "65536", "(unset)", "65536"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.rdma);
    CAPTURE((c.buffer ? c.buffer : "(unset)"));
    CAPTURE((c.eager ? c.eager : "(unset)"));
    env_put(kBuffer, c.buffer);
    env_put(kEager, c.eager);
    rpcie::providers::environment_defaults_apply(c.rdma);
    CHECK(env_get(kBuffer) == c.buffer_after);
    CHECK(env_get(kEager) == c.eager_after);
    if (!c.rdma && !c.buffer && !c.eager)  // the sealed path's chunks stay as they were
      CHECK(provider_get(ProviderKind::tcp).eager_max() == 16384 - 256);
  }
  env_put(kBuffer, saved_buffer ? saved_buffer->c_str() : nullptr);
  env_put(kEager, saved_eager ? saved_eager->c_str() : nullptr);
}
