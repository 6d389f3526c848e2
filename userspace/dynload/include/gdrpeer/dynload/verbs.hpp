// libibverbs, loaded at run time with dlopen("libibverbs.so.1").
//
// gdrpeer runs on nodes without rdma-core too (the checker, or a GPU node with no
// NIC): there `verify` must say "no RDMA stack" instead of the binary failing to
// start. The types come from <infiniband/verbs.h>; only the exported entry points
// are looked up here. The data-path calls (ibv_post_send, ibv_post_recv,
// ibv_poll_cq) are inline functions of the header that go through the context's
// ops table, so they need no lookup. The namespace is the one verify/ uses it from
// (gdrpeer/verify/verbs_api.hpp includes this header).
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace gdrpeer::verify::verbs {

struct Api {
  ibv_device** (*get_device_list)(int*) = nullptr;
  void (*free_device_list)(ibv_device**) = nullptr;
  const char* (*get_device_name)(ibv_device*) = nullptr;
  ibv_context* (*open_device)(ibv_device*) = nullptr;
  int (*close_device)(ibv_context*) = nullptr;
  int (*query_device)(ibv_context*, ibv_device_attr*) = nullptr;
  int (*query_port_compat)(ibv_context*, uint8_t, _compat_ibv_port_attr*) = nullptr;
  int (*query_gid)(ibv_context*, uint8_t, int, ibv_gid*) = nullptr;
  int (*query_gid_ex)(ibv_context*, uint32_t, uint32_t, ibv_gid_entry*, uint32_t,
                      size_t) = nullptr;  // optional (rdma-core >= 32)
  ibv_pd* (*alloc_pd)(ibv_context*) = nullptr;
  int (*dealloc_pd)(ibv_pd*) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd*, void*, size_t, int) = nullptr;
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd*, uint64_t, size_t, uint64_t, int,
                           int) = nullptr;  // optional (rdma-core >= 34)
  int (*dereg_mr)(ibv_mr*) = nullptr;
  ibv_cq* (*create_cq)(ibv_context*, int, void*, ibv_comp_channel*, int) = nullptr;
  int (*destroy_cq)(ibv_cq*) = nullptr;
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*) = nullptr;
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int) = nullptr;
  int (*destroy_qp)(ibv_qp*) = nullptr;
  const char* (*wc_status_str)(ibv_wc_status) = nullptr;

  // Port query that uses the extended provider op when present (like the
  // header's inline ibv_query_port) and the compat entry point otherwise.
  int query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) const;
};

// Loads libibverbs once per process; nullptr (with *why) when it is not there.
const Api* load(std::string* why, const char* library = "libibverbs.so.1");

}  // namespace gdrpeer::verify::verbs
