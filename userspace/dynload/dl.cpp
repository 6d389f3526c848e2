#include "gdrpeer/dynload/dl.hpp"

namespace gdrpeer::dl {

std::string fill(std::string_view text, std::string_view library, std::string_view dlerror, std::string_view missing) {
  static constexpr std::pair<std::string_view, int> kFields[] = {{"{library}", 0}, {"{dlerror}", 1}, {"{missing}", 2}};
  const std::string_view values[] = {library, dlerror, missing};
  std::string out;
  for (size_t i = 0; i < text.size();) {
    bool replaced = false;
    for (const auto& [field, k] : kFields) {
      if (text.substr(i, field.size()) == field) {
        out += values[k];
        i += field.size();
        replaced = true;
        break;
      }
    }
    if (!replaced) out += text[i++];
  }
  return out;
}

}  // namespace gdrpeer::dl
