#include "gdrpeer/verify/rdma.hpp"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gdrpeer/verify/verbs_api.hpp"

namespace gdrpeer::verify {

namespace fs = std::filesystem;

std::string gid_type_name(GidType t) {
  switch (t) {
    case GidType::ib: return "IB";
    case GidType::roce_v1: return "RoCE v1";
    case GidType::roce_v2: return "RoCE v2";
    case GidType::unknown: return "unknown";
  }
  return "unknown";
}

bool gid_is_zero(const RawGid& g) {
  for (auto b : g)
    if (b != 0) return false;
  return true;
}

bool gid_is_link_local(const RawGid& g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

bool gid_is_ipv4_mapped(const RawGid& g) {
  for (int i = 0; i < 10; ++i)
    if (g[i] != 0) return false;
  return g[10] == 0xff && g[11] == 0xff;
}

std::string format_gid(const RawGid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (::inet_ntop(AF_INET6, g.data(), buf, sizeof buf) == nullptr) return "?";
  return buf;
}

std::optional<GidEntry> select_gid(bool ethernet, const std::vector<GidEntry>& gids, std::string* why) {
  if (!ethernet) {
    for (const auto& g : gids)
      if (g.index == 0 && !gid_is_zero(g.raw)) return g;
    if (why != nullptr) *why = "the port has no GID 0";
    return std::nullopt;
  }
  const GidEntry* best = nullptr;
  int best_score = -1;
  for (const auto& g : gids) {
    if (gid_is_zero(g.raw)) continue;
    if (g.type == GidType::ib) continue;  // not usable on an Ethernet port
    int score = 0;
    if (g.type == GidType::roce_v2)
      score += 100;
    else if (g.type == GidType::unknown)
      score += 50;  // old kernels do not say
    if (gid_is_ipv4_mapped(g.raw))
      score += 20;
    else if (!gid_is_link_local(g.raw))
      score += 10;
    if (score > best_score) {  // strict: the lowest index wins a tie
      best = &g;
      best_score = score;
    }
  }
  if (best == nullptr) {
    if (why != nullptr)
      *why =
          "the port has no usable RoCE GID (its interface has no IPv6 link-local or "
          "IP address; bring the interface up)";
    return std::nullopt;
  }
  return *best;
}

void use_gid_index(RdmaInventory& inv, int index) {
  for (auto& d : inv.devices)
    for (auto& p : d.ports) {
      p.gid.reset();
      for (const auto& g : p.gids)
        if (index >= 0 && g.index == static_cast<uint32_t>(index) && !gid_is_zero(g.raw)) p.gid = g;
      if (!p.gid) p.gid_problem = "no GID at index " + std::to_string(index) + " (-x, --gid-index)";
    }
}

bool rdma_device_gone(const std::string& name) {
  std::error_code ec;
  return !fs::exists("/sys/class/infiniband/" + name, ec);
}

namespace {

std::string read_line(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

}  // namespace

std::string rdma_port_state(const std::string& name, int port) {
  // sysfs says "4: ACTIVE"; keep the word.
  auto s = read_line("/sys/class/infiniband/" + name + "/ports/" + std::to_string(port) + "/state");
  const auto colon = s.find(": ");
  return colon == std::string::npos ? s : s.substr(colon + 2);
}

namespace {

std::string port_state_name(int s) {
  switch (s) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    default: return "state " + std::to_string(s);
  }
}

GidType sysfs_gid_type(const std::string& dev, int port, int index) {
  const auto t = read_line("/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) + "/gid_attrs/types/" + std::to_string(index));
  if (t == "RoCE v2") return GidType::roce_v2;
  if (t == "IB/RoCE v1") return GidType::roce_v1;
  return GidType::unknown;
}

void read_gids(const verbs::Api& api, ibv_context* ctx, const std::string& dev, const ibv_port_attr& pa, PortInfo& port) {
  for (int i = 0; i < pa.gid_tbl_len && i < 256; ++i) {
    GidEntry e;
    e.index = static_cast<uint32_t>(i);
    if (api.query_gid_ex != nullptr) {
      ibv_gid_entry ge{};
      if (api.query_gid_ex(ctx, port.port, e.index, &ge, 0, sizeof ge) != 0) continue;  // empty
      std::memcpy(e.raw.data(), ge.gid.raw, 16);
      e.type = ge.gid_type == IBV_GID_TYPE_ROCE_V2   ? GidType::roce_v2
               : ge.gid_type == IBV_GID_TYPE_ROCE_V1 ? (port.ethernet ? GidType::roce_v1 : GidType::ib)
                                                     : GidType::ib;
    } else {
      ibv_gid g{};
      if (api.query_gid(ctx, port.port, i, &g) != 0) continue;
      std::memcpy(e.raw.data(), g.raw, 16);
      e.type = port.ethernet ? sysfs_gid_type(dev, port.port, i) : GidType::ib;
    }
    if (gid_is_zero(e.raw)) continue;
    port.gids.push_back(e);
  }
}

}  // namespace

RdmaInventory enumerate_rdma() {
  RdmaInventory inv;
  std::string why;
  const verbs::Api* api = verbs::load(&why);
  if (api == nullptr) {
    inv.stack_problem = why;
    return inv;
  }
  inv.stack_loaded = true;
  int n = 0;
  ibv_device** list = api->get_device_list(&n);
  if (list == nullptr) {
    const int err = errno;
    // libibverbs answers ENOSYS when the kernel offers no RDMA userspace access at all.
    inv.stack_problem = err == ENOSYS ? "ibv_get_device_list: ENOSYS: the kernel has no RDMA device for userspace "
                                        "(no /sys/class/infiniband_verbs: no RDMA NIC, or ib_uverbs not loaded)"
                                      : std::string("ibv_get_device_list failed: ") + std::strerror(err);
    return inv;
  }
  for (int i = 0; i < n; ++i) {
    RdmaDevice d;
    d.name = api->get_device_name(list[i]);
    std::error_code ec;
    const fs::path sys = "/sys/class/infiniband/" + d.name;
    if (fs::exists(sys / "device" / "driver", ec)) d.kernel_driver = fs::read_symlink(sys / "device" / "driver", ec).filename().string();
    ibv_context* ctx = api->open_device(list[i]);
    if (ctx == nullptr) {
      d.problem = "ibv_open_device failed: " + std::string(std::strerror(errno));
      inv.devices.push_back(d);
      continue;
    }
    ibv_device_attr da{};
    if (api->query_device(ctx, &da) != 0) {
      d.problem = "ibv_query_device failed: " + std::string(std::strerror(errno));
    } else {
      d.vendor_id = da.vendor_id;
      d.vendor_part_id = da.vendor_part_id;
      d.max_mr_size = da.max_mr_size;
      d.max_qp_rd_atom = da.max_qp_rd_atom;
      d.max_qp_init_rd_atom = da.max_qp_init_rd_atom;
      d.atomic_cap = da.atomic_cap;
      // rdma_rxe reports vendor 0xffffff, siw 0x626d74 ("bmt"); neither has a PCI parent.
      d.software = da.vendor_id == 0xffffff || da.vendor_id == 0x626d74 || d.name.rfind("rxe", 0) == 0 || d.name.rfind("siw", 0) == 0;
      if (d.kernel_driver.empty() && d.software)
        d.kernel_driver = da.vendor_id == 0x626d74 || d.name.rfind("siw", 0) == 0 ? "siw" : "rdma_rxe";
      for (uint8_t p = 1; p <= da.phys_port_cnt; ++p) {
        PortInfo port;
        port.port = p;
        ibv_port_attr pa{};
        if (api->query_port(ctx, p, &pa) != 0) {
          port.state_name = "unknown";
          port.gid_problem = "ibv_query_port failed: " + std::string(std::strerror(errno));
          d.ports.push_back(port);
          continue;
        }
        port.state = pa.state;
        port.state_name = port_state_name(pa.state);
        port.ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
        port.lid = pa.lid;
        port.active_mtu = pa.active_mtu;
        port.max_msg_sz = pa.max_msg_sz;
        read_gids(*api, ctx, d.name, pa, port);
        port.gid = select_gid(port.ethernet, port.gids, &port.gid_problem);
        d.ports.push_back(port);
      }
    }
    api->close_device(ctx);
    inv.devices.push_back(d);
  }
  api->free_device_list(list);
  return inv;
}

}  // namespace gdrpeer::verify
