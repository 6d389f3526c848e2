// A stand-in for libibverbs.so.1 and libmlx5.so.1 with the entry points `check --probe ibgda`
// binds (topo/src/readiness_probe.cpp), loaded through the probe's own dlopen seam
// (IbgdaProbeEnv). Its DEVX command interface decodes and answers QUERY_HCA_CAP as the mlx5 PRM
// lays the command out (Linux include/linux/mlx5/mlx5_ifc.h; the copy NVSHMEM builds with,
// NVIDIA/nvshmem 2d7d25f src/modules/transport/common/mlx5_ifc.h):
//   query_hca_cap_in:  opcode bits 0x00-0x0f (QUERY_HCA_CAP = 0x100), op_mod bits 0x30-0x3f =
//                      (cap type << 1) | 1 for the current caps (HCA_CAP_OPMOD_GET_CUR), 0 the
//                      maximum; cap type 0 general (MLX5_CAP_GENERAL), 3 atomic (MLX5_CAP_ATOMIC)
//   query_hca_cap_out: status bits 0x00-0x07, capability from bit 0x80
//   atomic_caps:       atomic_operations bits 0x90-0x9f, atomic_size_qp 0xb0-0xbf,
//                      atomic_size_dc 0xd0-0xdf (each field big-endian, bit 0 the MSB of byte 0)
// The maximum caps always offer everything and the reserved words around the atomic fields are
// all ones, so a command or an offset that is not the PRM's reads a different answer.
//
// Configured by $GDRPEER_FAKE_MLX5, read at each ibv_get_device_list: devices separated by ';',
// each its name and words (defaults in brackets):
//   mlx5=0|1 [1]       mlx5dv_is_supported
//   open=0|1 [1]       ibv_open_device succeeds (else NULL, errno EACCES)
//   devx=0|1 [1]       DEVX general commands allowed (else EPERM, as without CAP_NET_RAW)
//   atomic_errno=N [0] the atomic-caps query fails with errno N
//   ops=N size_qp=N size_dc=N [0xf 0xc 0xc]   the current atomic caps
//   uar=bf|nc|none [bf]  the UAR types mlx5dv_devx_alloc_uar hands out (bf: both; nc: only NC)
//   umem=0|1 [1]       mlx5dv_devx_umem_reg_ex of a dma-buf succeeds (else EOPNOTSUPP)
// $GDRPEER_FAKE_MLX5 = "!": ibv_get_device_list returns NULL (errno ENOSYS), as without uverbs.
// $GDRPEER_FAKE_MLX5_LISTS=N: only the first N device lists are given (later calls: NULL, ENODEV);
// $GDRPEER_FAKE_MLX5_OPENS=N: only the first N ibv_open_device calls succeed (EACCES after).
// gdrpeer_fake_mlx5_log() is what happened, one event a line; gdrpeer_fake_mlx5_live() counts
// contexts, UARs and umems not released. Built without GDRPEER_FAKE_MLX5_DMABUF_UMEM it is an
// rdma-core older than v35, which has no mlx5dv_devx_umem_reg_ex.
#include <fcntl.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Dev {
  std::string name;
  int mlx5 = 1, open = 1, devx = 1, atomic_errno = 0;
  unsigned ops = 0xf, size_qp = 0xc, size_dc = 0xc;
  std::string uar = "bf";
  int umem = 1;
};

std::vector<Dev> devs;
bool list_fails = false;
std::string event_log;
int live_contexts = 0, live_uars = 0, live_umems = 0, live_lists = 0;
int lists_given = 0, opens_given = 0;

int limit(const char* var) {
  const char* v = std::getenv(var);
  return v ? std::atoi(v) : -1;
}
void* last_uar_reg = nullptr;

void configure() {
  devs.clear();
  const char* spec = std::getenv("GDRPEER_FAKE_MLX5");
  const std::string s = spec ? spec : "";
  list_fails = s == "!";
  std::istringstream entries(s);
  for (std::string entry; std::getline(entries, entry, ';');) {
    std::istringstream words(entry);
    Dev d;
    if (!(words >> d.name) || d.name == "!") continue;
    for (std::string w; words >> w;) {
      const size_t eq = w.find('=');
      if (eq == std::string::npos) continue;
      const std::string k = w.substr(0, eq), v = w.substr(eq + 1);
      const unsigned n = static_cast<unsigned>(std::strtoul(v.c_str(), nullptr, 0));
      if (k == "mlx5") d.mlx5 = static_cast<int>(n);
      if (k == "open") d.open = static_cast<int>(n);
      if (k == "devx") d.devx = static_cast<int>(n);
      if (k == "atomic_errno") d.atomic_errno = static_cast<int>(n);
      if (k == "ops") d.ops = n;
      if (k == "size_qp") d.size_qp = n;
      if (k == "size_dc") d.size_dc = n;
      if (k == "uar") d.uar = v;
      if (k == "umem") d.umem = static_cast<int>(n);
    }
    devs.push_back(d);
  }
}

void note(const std::string& line) { event_log += line + "\n"; }

// PRM field access: `width` bits at bit `off`, big-endian, bit 0 the MSB of byte 0.
unsigned get_bits(const uint8_t* p, size_t off, size_t width) {
  unsigned v = 0;
  for (size_t i = 0; i < width; ++i) v = v << 1 | ((p[(off + i) / 8] >> (7 - (off + i) % 8)) & 1u);
  return v;
}
void set_bits(uint8_t* p, size_t off, size_t width, unsigned v) {
  for (size_t i = 0; i < width; ++i) {
    const size_t bit = off + i;
    const unsigned b = (v >> (width - 1 - i)) & 1u;
    p[bit / 8] = static_cast<uint8_t>((p[bit / 8] & ~(1u << (7 - bit % 8))) | (b << (7 - bit % 8)));
  }
}

struct FakeDevice {
  ibv_device dev;  // first: the probe hands back the pointer ibv_get_device_list gave
  size_t index;
};
// Devices outlive their list while a context refers to them (rdma-core counts references):
// never freed here.
std::vector<std::unique_ptr<FakeDevice>> device_pool;
struct FakeContext {
  ibv_context ctx;
  size_t index;
};
struct FakeUar {
  mlx5dv_devx_uar uar;
  void* page;
};

const Dev& dev_of(ibv_context* c) { return devs.at(reinterpret_cast<FakeContext*>(c)->index); }
std::string hex(unsigned v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}

}  // namespace

extern "C" {

const char* gdrpeer_fake_mlx5_log() { return event_log.c_str(); }
void gdrpeer_fake_mlx5_clear_log() {
  event_log.clear();
  lists_given = opens_given = 0;
}
int gdrpeer_fake_mlx5_live() { return live_contexts + live_uars + live_umems + live_lists; }
void* gdrpeer_fake_mlx5_last_uar_reg() { return last_uar_reg; }

ibv_device** ibv_get_device_list(int* n) {
  configure();
  if (list_fails) {
    errno = ENOSYS;
    return nullptr;
  }
  if (limit("GDRPEER_FAKE_MLX5_LISTS") >= 0 && lists_given >= limit("GDRPEER_FAKE_MLX5_LISTS")) {
    note("list refused");
    errno = ENODEV;
    return nullptr;
  }
  ++lists_given;
  ++live_lists;
  auto** list = static_cast<ibv_device**>(std::calloc(devs.size() + 1, sizeof(ibv_device*)));
  for (size_t i = 0; i < devs.size(); ++i) {
    device_pool.push_back(std::make_unique<FakeDevice>());
    FakeDevice* f = device_pool.back().get();
    std::snprintf(f->dev.name, sizeof f->dev.name, "%s", devs[i].name.c_str());
    f->index = i;
    list[i] = &f->dev;
  }
  if (n) *n = static_cast<int>(devs.size());
  return list;
}

// rdma-core walks the list to its NULL end: a NULL list is a crash there, and an abort here.
void ibv_free_device_list(ibv_device** list) {
  if (!list) std::abort();
  --live_lists;
  std::free(list);
}

const char* ibv_get_device_name(ibv_device* d) { return d->name; }

ibv_context* ibv_open_device(ibv_device* d) {
  const size_t i = reinterpret_cast<FakeDevice*>(d)->index;
  const bool over = limit("GDRPEER_FAKE_MLX5_OPENS") >= 0 && opens_given >= limit("GDRPEER_FAKE_MLX5_OPENS");
  ++opens_given;
  if (!devs.at(i).open || over) {
    note("open " + devs[i].name + " refused");
    errno = EACCES;
    return nullptr;
  }
  auto* c = static_cast<FakeContext*>(std::calloc(1, sizeof(FakeContext)));
  c->ctx.device = d;
  c->index = i;
  ++live_contexts;
  note("open " + devs[i].name);
  return &c->ctx;
}

int ibv_close_device(ibv_context* c) {
  note("close " + dev_of(c).name);
  --live_contexts;
  std::free(c);
  return 0;
}

bool mlx5dv_is_supported(ibv_device* d) { return devs.at(reinterpret_cast<FakeDevice*>(d)->index).mlx5 == 1; }

int mlx5dv_devx_general_cmd(ibv_context* c, const void* in, size_t inlen, void* out, size_t outlen) {
  const Dev& d = dev_of(c);
  const auto* cmd = static_cast<const uint8_t*>(in);
  if (inlen < 0x10 || outlen < 0x10) return errno = EINVAL;
  const unsigned opcode = get_bits(cmd, 0x00, 0x10), op_mod = get_bits(cmd, 0x30, 0x10);
  note("cmd " + d.name + " opcode " + hex(opcode) + " op_mod " + hex(op_mod));
  if (!d.devx) return errno = EPERM;
  const unsigned type = op_mod >> 1;
  if (opcode != 0x100 || (type != 0 && type != 3)) return errno = EINVAL;
  auto* o = static_cast<uint8_t*>(out);
  std::memset(o, 0, outlen);
  if (type != 3) return 0;
  if (d.atomic_errno) return errno = d.atomic_errno;
  if (outlen < 0x10 + 0x20) return errno = EINVAL;
  const bool current = op_mod & 1;
  const size_t cap = 0x80;
  for (size_t reserved : {0x80, 0xa0, 0xc0, 0xe0}) set_bits(o, cap + reserved, 0x10, 0xffff);
  set_bits(o, cap + 0x90, 0x10, current ? d.ops : 0xf);
  set_bits(o, cap + 0xb0, 0x10, current ? d.size_qp : 0xc);
  set_bits(o, cap + 0xd0, 0x10, current ? d.size_dc : 0xc);
  return 0;
}

mlx5dv_devx_uar* mlx5dv_devx_alloc_uar(ibv_context* c, uint32_t type) {
  const Dev& d = dev_of(c);
  const std::string t = type == MLX5DV_UAR_ALLOC_TYPE_BF ? "bf" : type == MLX5DV_UAR_ALLOC_TYPE_NC ? "nc" : "?";
  note("uar " + d.name + " " + t);
  if (d.uar == "none" || (d.uar == "nc" && t != "nc") || t == "?") {
    errno = ENOMEM;
    return nullptr;
  }
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* p = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* u = new FakeUar{};
  u->page = p;
  u->uar.base_addr = p;
  u->uar.reg_addr = static_cast<char*>(p) + 0x800;  // the doorbell register inside the page, as mlx5 places it
  u->uar.page_id = 7;
  last_uar_reg = u->uar.reg_addr;
  ++live_uars;
  return &u->uar;
}

void mlx5dv_devx_free_uar(mlx5dv_devx_uar* uar) {
  auto* u = reinterpret_cast<FakeUar*>(uar);
  ::munmap(u->page, static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
  --live_uars;
  delete u;
}

#ifdef GDRPEER_FAKE_MLX5_DMABUF_UMEM
mlx5dv_devx_umem* mlx5dv_devx_umem_reg_ex(ibv_context* c, mlx5dv_devx_umem_in* in) {
  const Dev& d = dev_of(c);
  const bool fd_open = in->dmabuf_fd >= 0 && ::fcntl(in->dmabuf_fd, F_GETFD) >= 0;
  note("umem " + d.name + " size " + std::to_string(in->size) + " comp_mask " + hex(static_cast<unsigned>(in->comp_mask)) +
       (fd_open ? " fd open" : " fd closed") + " pgsz " +
       (in->pgsz_bitmap == ~static_cast<uint64_t>(::sysconf(_SC_PAGESIZE) - 1) ? "page" : "other"));
  if (!d.umem || !(in->comp_mask & MLX5DV_UMEM_MASK_DMABUF) || !fd_open) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  auto* u = new mlx5dv_devx_umem{};
  u->umem_id = 1;
  ++live_umems;
  return u;
}
#endif

int mlx5dv_devx_umem_dereg(mlx5dv_devx_umem* u) {
  --live_umems;
  delete u;
  return 0;
}

}  // extern "C"
