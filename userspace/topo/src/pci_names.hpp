// Device names from pci.ids through libpci (pci_names.cpp).
#pragma once

#include <cstdint>
#include <string>

namespace gdrpeer::topo {

// "NVIDIA Corporation GH100 [H200 SXM 141GB]" as lspci prints it; "" when pci.ids lacks the
// id. nullptr when libpci.so.3 cannot be loaded, `why` then says so. Thread-safe.
const std::string* pci_ids_name(uint16_t vendor, uint16_t device, std::string& why);

}  // namespace gdrpeer::topo
