#include "gdrpeer/verify/verbs_api.hpp"

#include <dlfcn.h>

#include "gdrpeer/dynload/dl.hpp"

#include <cstring>

namespace gdrpeer::verify::verbs {

int Api::query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) const {
  std::memset(attr, 0, sizeof(*attr));
  if (verbs_context* vctx = verbs_get_ctx_op(ctx, query_port); vctx != nullptr)
    return vctx->query_port(ctx, port, attr, sizeof(*attr));
  return query_port_compat(ctx, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

namespace {

using dl::bind;
using Loaded = dl::Loaded<Api>;

Loaded load_now(const char* library) {
  Loaded l;
  void* lib = ::dlopen(library, RTLD_NOW | RTLD_GLOBAL);  // providers resolve against it
  if (lib == nullptr) {
    const char* e = ::dlerror();
    l.why = std::string("cannot load ") + library + ": " + (e != nullptr ? e : "unknown error") +
            " (rdma-core's libibverbs1 is not installed)";
    return l;
  }
  Api& a = l.api;
  std::string missing;
  bind(lib, a.get_device_list, "ibv_get_device_list", true, &missing);
  bind(lib, a.free_device_list, "ibv_free_device_list", true, &missing);
  bind(lib, a.get_device_name, "ibv_get_device_name", true, &missing);
  bind(lib, a.open_device, "ibv_open_device", true, &missing);
  bind(lib, a.close_device, "ibv_close_device", true, &missing);
  bind(lib, a.query_device, "ibv_query_device", true, &missing);
  bind(lib, a.query_port_compat, "ibv_query_port", true, &missing);
  bind(lib, a.query_gid, "ibv_query_gid", true, &missing);
  bind(lib, a.query_gid_ex, "_ibv_query_gid_ex", false, &missing);
  bind(lib, a.alloc_pd, "ibv_alloc_pd", true, &missing);
  bind(lib, a.dealloc_pd, "ibv_dealloc_pd", true, &missing);
  bind(lib, a.reg_mr, "ibv_reg_mr", true, &missing);
  bind(lib, a.reg_dmabuf_mr, "ibv_reg_dmabuf_mr", false, &missing);
  bind(lib, a.dereg_mr, "ibv_dereg_mr", true, &missing);
  bind(lib, a.create_cq, "ibv_create_cq", true, &missing);
  bind(lib, a.destroy_cq, "ibv_destroy_cq", true, &missing);
  bind(lib, a.create_qp, "ibv_create_qp", true, &missing);
  bind(lib, a.modify_qp, "ibv_modify_qp", true, &missing);
  bind(lib, a.destroy_qp, "ibv_destroy_qp", true, &missing);
  bind(lib, a.wc_status_str, "ibv_wc_status_str", true, &missing);
  if (!missing.empty()) {
    l.why = std::string(library) + " lacks " + missing;
    ::dlclose(lib);
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

const Api* load(std::string* why, const char* library) {
  return dl::cached_load<Api>(why, library, load_now);
}

}  // namespace gdrpeer::verify::verbs
