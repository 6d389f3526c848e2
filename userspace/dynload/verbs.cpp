#include "gdrpeer/dynload/verbs.hpp"

#include <dlfcn.h>

#include <cstring>

#include "gdrpeer/dynload/dl.hpp"

namespace gdrpeer::verify::verbs {

int Api::query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) const {
  std::memset(attr, 0, sizeof(*attr));
  if (verbs_context* vctx = verbs_get_ctx_op(ctx, query_port); vctx != nullptr) return vctx->query_port(ctx, port, attr, sizeof(*attr));
  return query_port_compat(ctx, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

namespace {

constexpr dl::Sym<Api> kSymbols[] = {
    dl::sym<&Api::get_device_list>("ibv_get_device_list", true),
    dl::sym<&Api::free_device_list>("ibv_free_device_list", true),
    dl::sym<&Api::get_device_name>("ibv_get_device_name", true),
    dl::sym<&Api::open_device>("ibv_open_device", true),
    dl::sym<&Api::close_device>("ibv_close_device", true),
    dl::sym<&Api::query_device>("ibv_query_device", true),
    dl::sym<&Api::query_port_compat>("ibv_query_port", true),
    dl::sym<&Api::query_gid>("ibv_query_gid", true),
    dl::sym<&Api::query_gid_ex>("_ibv_query_gid_ex", false),
    dl::sym<&Api::alloc_pd>("ibv_alloc_pd", true),
    dl::sym<&Api::dealloc_pd>("ibv_dealloc_pd", true),
    dl::sym<&Api::reg_mr>("ibv_reg_mr", true),
    dl::sym<&Api::reg_dmabuf_mr>("ibv_reg_dmabuf_mr", false),
    dl::sym<&Api::dereg_mr>("ibv_dereg_mr", true),
    dl::sym<&Api::create_cq>("ibv_create_cq", true),
    dl::sym<&Api::destroy_cq>("ibv_destroy_cq", true),
    dl::sym<&Api::create_qp>("ibv_create_qp", true),
    dl::sym<&Api::modify_qp>("ibv_modify_qp", true),
    dl::sym<&Api::destroy_qp>("ibv_destroy_qp", true),
    dl::sym<&Api::wc_status_str>("ibv_wc_status_str", true),
};

constexpr dl::Hint kHint = {
    RTLD_NOW | RTLD_GLOBAL,  // the providers (libmlx5, librxe, ...) resolve against it
    "cannot load {library}: {dlerror} (rdma-core's libibverbs1 is not installed)",
    "{library} lacks {missing}",
};

dl::Loaded<Api> load_now(const char* library) { return dl::open_api<Api>(library, kHint, kSymbols); }

}  // namespace

const Api* load(std::string* why, const char* library) { return dl::cached_load<Api>(why, library, load_now); }

}  // namespace gdrpeer::verify::verbs
