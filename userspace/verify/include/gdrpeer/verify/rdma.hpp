// RDMA devices, ports and GIDs as libibverbs sees them, and the choice of the
// GID that a loopback connection on one port uses.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gdrpeer::verify {

using RawGid = std::array<uint8_t, 16>;

enum class GidType { ib, roce_v1, roce_v2, unknown };
std::string gid_type_name(GidType t);  // "IB", "RoCE v1", "RoCE v2", "unknown"

struct GidEntry {
  uint32_t index = 0;
  RawGid raw{};
  GidType type = GidType::unknown;
};

// IPv6 text form; IPv4-mapped GIDs as ::ffff:192.0.2.1.
std::string format_gid(const RawGid& g);
bool gid_is_zero(const RawGid& g);
bool gid_is_link_local(const RawGid& g);   // fe80::/10
bool gid_is_ipv4_mapped(const RawGid& g);  // ::ffff:0:0/96

// Picks the GID a connection on this port should use, or nullopt with *why.
// InfiniBand: GID 0 (the port GID). Ethernet (RoCE): a non-zero GID, preferring
// RoCE v2 over v1, then IPv4-mapped over global IPv6 over link-local; the
// lowest index wins a tie. Link-local GIDs are fine for a loopback on one port
// (that is all rxe has when the interface has no IP address).
std::optional<GidEntry> select_gid(bool ethernet, const std::vector<GidEntry>& gids, std::string* why);

struct PortInfo {
  uint8_t port = 1;
  int state = 0;  // ibv_port_state
  std::string state_name;
  bool ethernet = false;
  uint16_t lid = 0;
  int active_mtu = 0;  // ibv_mtu
  uint32_t max_msg_sz = 0;
  std::vector<GidEntry> gids;
  std::optional<GidEntry> gid;  // the selected one
  std::string gid_problem;
  bool active() const { return state == 4; }  // IBV_PORT_ACTIVE
};

struct RdmaDevice {
  std::string name;
  std::string kernel_driver;  // from sysfs where known ("mlx5_core", "rxe")
  uint32_t vendor_id = 0;
  uint32_t vendor_part_id = 0;
  uint64_t max_mr_size = 0;
  int max_qp_rd_atom = 1;       // RDMA READs a QP may have outstanding as initiator
  int max_qp_init_rd_atom = 1;  // ... and as responder
  int atomic_cap = -1;          // ibv_device_attr.atomic_cap (IBV_ATOMIC_NONE 0, HCA 1, GLOB 2); -1 unknown
  bool software = false;        // rxe, siw: no DMA engine, no peer-to-peer
  std::vector<PortInfo> ports;
  std::string problem;  // could not be opened / queried
};

struct RdmaInventory {
  bool stack_loaded = false;
  std::string stack_problem;  // libibverbs missing
  std::vector<RdmaDevice> devices;
};

RdmaInventory enumerate_rdma();

// perftest's -x IDX: every port uses the GID at index `index` (its sgid_index and the
// loopback's destination GID) instead of select_gid()'s choice; a port without a non-zero
// GID there gets none, with the reason, and its combinations fail as select_gid's would.
void use_gid_index(RdmaInventory& inv, int index);

// True when the device has gone from /sys/class/infiniband (unplugged, rdma link delete).
bool rdma_device_gone(const std::string& name);
// The port state as sysfs words it now ("ACTIVE", "DOWN"); "" when unreadable.
std::string rdma_port_state(const std::string& name, int port);

}  // namespace gdrpeer::verify
