#include "gdrpeer/dynload/nvml.hpp"

#include <dlfcn.h>

#include "gdrpeer/dynload/dl.hpp"

namespace gdrpeer::nvml {

namespace {

constexpr dl::Sym<Api> kSymbols[] = {
    dl::sym<&Api::nvmlInit>("nvmlInit_v2", true),
    dl::sym<&Api::nvmlDeviceGetCount>("nvmlDeviceGetCount_v2", true),
    dl::sym<&Api::nvmlDeviceGetHandleByIndex>("nvmlDeviceGetHandleByIndex_v2", true),
    dl::sym<&Api::nvmlDeviceGetPciInfo>("nvmlDeviceGetPciInfo_v3", true),
    dl::sym<&Api::nvmlDeviceGetNvLinkState>("nvmlDeviceGetNvLinkState", true),
    dl::sym<&Api::nvmlDeviceGetNvLinkRemotePciInfo>("nvmlDeviceGetNvLinkRemotePciInfo_v2", true),
    dl::sym<&Api::nvmlDeviceGetNvLinkRemoteDeviceType>("nvmlDeviceGetNvLinkRemoteDeviceType", false),
    dl::sym<&Api::nvmlSystemGetDriverVersion>("nvmlSystemGetDriverVersion", false),
    dl::sym<&Api::nvmlDeviceGetGpuFabricInfo>("nvmlDeviceGetGpuFabricInfo", false),
    dl::sym<&Api::nvmlErrorString>("nvmlErrorString", false),
};

constexpr dl::Hint kHint = {
    RTLD_NOW | RTLD_LOCAL,
    "{library} not loadable",
    "{library} lacks the NVLink entry points ({missing})",
};

dl::Loaded<Api> load_now(const char* library) { return dl::open_api<Api>(library, kHint, kSymbols); }

}  // namespace

const Api* load(std::string* why, const char* library) { return dl::cached_load<Api>(why, library, load_now); }

}  // namespace gdrpeer::nvml
