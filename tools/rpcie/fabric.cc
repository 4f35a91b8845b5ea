// `rpcie fabric`: one fi_getinfo per provider adapter with the adapter's own hints (exactly
// what rpcie asks for when it opens a fabric, minus the bootstrap socket's node), then one
// with plain FI_EP_RDM hints to show what else libfabric has and why rpcie would not use it.
#include "fabric.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <rdma/fabric.h>
#include <nlohmann/json.hpp>

#include "rpcie/providers/provider.hpp"

namespace rpcie::cli {
namespace {

namespace prov = rpcie::providers;

struct Row {
  std::string provider;   // rpcie's name for it ("tcp"), or libfabric's when rpcie has none
  std::string libfabric;  // prov_name as libfabric reports it ("tcp;ofi_rxm")
  std::string fabric;     // fabric name (tcp: the subnet)
  std::string domain;     // domain name (tcp: the interface)
  std::string addr_format;
  std::string address;  // the source address, where it is an IP address or a string
  bool supported = false;
  bool order_saw = false;  // DMA data before the interrupt message without waiting
  std::string note;        // why it is not supported, or what rpcie does with it
};
using RowKey = std::tuple<std::string, std::string, std::string, std::string, std::string>;

struct InfoDeleter {
  void operator()(fi_info* info) const noexcept { fi_freeinfo(info); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

const char* addr_format_name(std::uint32_t format) {
  switch (format) {
    case FI_FORMAT_UNSPEC:
      return "unspec";
    case FI_SOCKADDR:
      return "sockaddr";
    case FI_SOCKADDR_IN:
      return "sockaddr_in";
    case FI_SOCKADDR_IN6:
      return "sockaddr_in6";
    case FI_SOCKADDR_IB:
      return "sockaddr_ib";
    case FI_ADDR_PSMX:
      return "psmx";
    case FI_ADDR_GNI:
      return "gni";
    case FI_ADDR_BGQ:
      return "bgq";
    case FI_ADDR_MLX:
      return "mlx";
    case FI_ADDR_STR:
      return "str";
    case FI_ADDR_PSMX2:
      return "psmx2";
    case FI_ADDR_IB_UD:
      return "ib_ud";
    case FI_ADDR_EFA:
      return "efa";
    default:
      return "other";
  }
}

// IP addresses as text, which name the interface. String addresses (shm's
// "fi_shm://PID") are made up per process, and binary ones are provider specific: neither
// says anything about the host, so they are left out.
std::string address_text(const fi_info& info) {
  if (info.src_addr == nullptr) return {};
  char buf[INET6_ADDRSTRLEN] = {};
  if (info.addr_format == FI_SOCKADDR_IN && info.src_addrlen >= sizeof(sockaddr_in)) {
    sockaddr_in sin{};
    std::memcpy(&sin, info.src_addr, sizeof sin);
    if (inet_ntop(AF_INET, &sin.sin_addr, buf, sizeof buf) != nullptr) return buf;
  } else if (info.addr_format == FI_SOCKADDR_IN6 && info.src_addrlen >= sizeof(sockaddr_in6)) {
    sockaddr_in6 sin6{};
    std::memcpy(&sin6, info.src_addr, sizeof sin6);
    if (inet_ntop(AF_INET6, &sin6.sin6_addr, buf, sizeof buf) != nullptr) return buf;
  }
  return {};
}

Row row_make(const fi_info& info) {
  Row row;
  if (info.fabric_attr != nullptr) {
    if (info.fabric_attr->prov_name != nullptr) row.libfabric = info.fabric_attr->prov_name;
    if (info.fabric_attr->name != nullptr) row.fabric = info.fabric_attr->name;
  }
  if (info.domain_attr != nullptr && info.domain_attr->name != nullptr) row.domain = info.domain_attr->name;
  row.addr_format = addr_format_name(info.addr_format);
  row.address = address_text(info);
  row.order_saw = info.tx_attr != nullptr && (info.tx_attr->msg_order & FI_ORDER_SAW) != 0;
  return row;
}

// fi_getinfo; FI_ENODATA (nothing matches) is an empty list, not an error.
int infos_get(fi_info* hints, InfoPtr& infos) {
  prov::environment_defaults_apply();
  fi_info* raw = nullptr;
  const int rc = fi_getinfo(prov::kFabricApiVersion, nullptr, nullptr, 0, hints, &raw);
  infos.reset(raw);
  return rc == -FI_ENODATA ? 0 : rc;
}

// The rpcie adapter whose libfabric spelling this is, if any.
const prov::ProviderAdapter* adapter_of(std::string_view libfabric_name) {
  for (const prov::ProviderAdapter* adapter : prov::provider_registry())
    if (adapter->fabric_name() == libfabric_name) return adapter;
  return nullptr;
}

void rows_add(std::vector<Row>& rows, std::set<RowKey>& seen, Row row) {
  RowKey key(row.libfabric, row.fabric, row.domain, row.addr_format, row.address);
  if (!seen.insert(std::move(key)).second) return;  // libfabric repeats infos that differ only in caps
  rows.push_back(std::move(row));
}

nlohmann::json row_json(const Row& row) {
  return {{"provider", row.provider},   {"libfabric", row.libfabric},     {"fabric", row.fabric},
          {"domain", row.domain},       {"addr_format", row.addr_format}, {"address", row.address},
          {"supported", row.supported}, {"order_saw", row.order_saw},     {"note", row.note}};
}

void rows_print_text(const std::vector<Row>& rows) {
  const char* header[] = {"PROVIDER", "LIBFABRIC", "FABRIC", "DOMAIN", "FORMAT", "ADDRESS", "SUPPORTED"};
  auto cells = [](const Row& row) {
    return std::array<std::string, 7>{row.provider,
                                      row.libfabric,
                                      row.fabric,
                                      row.domain,
                                      row.addr_format,
                                      row.address.empty() ? "-" : row.address,
                                      row.supported ? "yes" : "no (" + row.note + ")"};
  };
  std::array<std::size_t, 7> width{};
  for (std::size_t i = 0; i < width.size(); ++i) width[i] = std::strlen(header[i]);
  for (const Row& row : rows) {
    const auto c = cells(row);
    for (std::size_t i = 0; i < width.size(); ++i) width[i] = std::max(width[i], c[i].size());
  }
  auto line = [&](const std::array<std::string, 7>& c) {
    std::string text;
    for (std::size_t i = 0; i < c.size(); ++i) {
      text += c[i];
      if (i + 1 < c.size()) text += std::string(width[i] - c[i].size() + 2, ' ');
    }
    std::printf("%s\n", text.c_str());
  };
  if (rows.empty()) return;  // the error on stderr says it all
  line({header[0], header[1], header[2], header[3], header[4], header[5], header[6]});
  for (const Row& row : rows) line(cells(row));
}

}  // namespace

int error_exit(const std::string& text, int code) {
  std::fprintf(stderr, "rpcie: error: %s\n", text.c_str());
  return code;
}

FabricCommand& fabric_add(CLI::App& parent, std::string& output) {
  static FabricCommand command;
  command.app =
      parent.add_subcommand("fabric", "list the libfabric providers usable here and whether rpcie supports them");
  command.app->add_option("-p,--provider", command.provider, "only this provider: tcp, shm, verbs, efa");
  command.app->add_flag("-a,--all", command.all, "also list the RDM providers rpcie does not use");
  command.app->add_option("-o,--output", output, "text or json")->check(CLI::IsMember({"text", "json"}));
  return command;
}

namespace {

// Pass 1: what rpcie would open, provider by provider, in `auto` preference order. False
// when fi_allocinfo fails.
bool rows_of_adapters(const prov::ProviderAdapter* only, std::vector<Row>& rows, std::set<RowKey>& seen) {
  for (const prov::ProviderAdapter* adapter : prov::provider_registry()) {
    if (only != nullptr && adapter != only) continue;
    InfoPtr hints(fi_allocinfo());
    if (!hints) return false;
    adapter->hints_fill(*hints);
    InfoPtr infos;
    if (const int rc = infos_get(hints.get(), infos); rc != 0) {
      // One provider failing (e.g. verbs without devices) must not hide the others.
      Row row;
      row.provider = adapter->name();
      row.libfabric = adapter->fabric_name();
      row.note = std::string("fi_getinfo: ") + fi_strerror(-rc);
      rows_add(rows, seen, std::move(row));
      continue;
    }
    for (const fi_info* info = infos.get(); info != nullptr; info = info->next) {
      Row row = row_make(*info);
      row.provider = adapter->name();
      row.supported = adapter->info_accept(*info);
      if (!row.supported)
        row.note = "offers no RDM endpoint with messages and RMA";
      else if (!row.order_saw)
        row.note = "no FI_ORDER_SAW: interrupts wait for DMA write completions";
      rows_add(rows, seen, std::move(row));
    }
  }
  return true;
}

// Pass 2 (--all): every other RDM provider, with hints that accept any mode (as fi_info does), so
// that an operator sees e.g. udp;ofi_rxd and learns why rpcie passes it by. 0 or an exit status.
int rows_of_others(std::vector<Row>& rows, std::set<RowKey>& seen) {
  InfoPtr hints(fi_allocinfo());
  if (!hints) return error_exit("fi_allocinfo: out of memory", 1);
  hints->mode = ~0ULL;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mode = ~0ULL;
  hints->domain_attr->mr_mode = ~(FI_MR_BASIC | FI_MR_SCALABLE);
  InfoPtr infos;
  if (const int rc = infos_get(hints.get(), infos); rc != 0)
    return error_exit(std::string("fi_getinfo (FI_EP_RDM): ") + fi_strerror(-rc), 1);
  for (const fi_info* info = infos.get(); info != nullptr; info = info->next) {
    Row row = row_make(*info);
    const prov::ProviderAdapter* adapter = adapter_of(row.libfabric);
    row.provider = adapter != nullptr ? std::string(adapter->name()) : row.libfabric;
    if (adapter != nullptr)
      row.note = "does not grant what rpcie asks for (caps, ordering or mr_mode)";
    else if (row.libfabric == "tcp" || row.libfabric == "verbs")
      row.note = "rpcie uses it through ofi_rxm";
    else
      row.note = "rpcie has no adapter for it";
    rows_add(rows, seen, std::move(row));
  }
  return 0;
}

int fabric_list(const FabricCommand& command, bool json) {
  const prov::ProviderAdapter* only = nullptr;
  if (!command.provider.empty()) {
    std::string why;
    auto choice = prov::provider_parse(command.provider, &why);
    if (!choice) return error_exit(why, 2);
    if (!choice->automatic) only = &prov::provider_get(choice->kind);
  }
  std::vector<Row> rows;
  std::set<RowKey> seen;
  if (!rows_of_adapters(only, rows, seen)) return error_exit("fi_allocinfo: out of memory", 1);
  if (command.all && only == nullptr) {
    if (const int rc = rows_of_others(rows, seen); rc != 0) return rc;
  }
  bool any_supported = false;
  for (const Row& row : rows) any_supported = any_supported || row.supported;
  if (json) {
    nlohmann::json out = {{"providers", nlohmann::json::array()}};
    for (const Row& row : rows) out["providers"].push_back(row_json(row));
    // replace: a provider's name in another encoding must not make dump() throw.
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    rows_print_text(rows);
  }
  if (!any_supported) {
    std::string names;
    for (const prov::ProviderAdapter* adapter : prov::provider_registry())
      if (only == nullptr || adapter == only) names += (names.empty() ? "" : ", ") + std::string(adapter->name());
    return error_exit("no usable libfabric provider (looked for " + names + ")", 1);
  }
  return 0;
}

}  // namespace

int fabric_run(const FabricCommand& command, bool json) {
  try {
    return fabric_list(command, json);
  } catch (const std::exception& e) {  // std::bad_alloc from the containers: report, do not abort
    return error_exit(std::string("fabric: ") + e.what(), 1);
  }
}

}  // namespace rpcie::cli
