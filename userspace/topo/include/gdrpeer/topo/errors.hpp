// Input errors: every parser reports where it stopped and what it expected, as
// "file:line: message", and the CLI maps them to exit code 65 (EX_DATAERR).
#pragma once

#include <stdexcept>
#include <string>

namespace gdrpeer::topo {

class InputError : public std::runtime_error {
 public:
  InputError(std::string file, long line, const std::string& what)
      : std::runtime_error(format(file, line, what)), file_(std::move(file)), line_(line) {}
  const std::string& file() const { return file_; }
  long line() const { return line_; }

 private:
  static std::string format(const std::string& file, long line, const std::string& what) {
    return one_line(line > 0 ? file + ":" + std::to_string(line) + ": " + what : file + ": " + what);
  }
  // Messages quote bytes of broken input; control bytes (a newline in a garbled value) are
  // written as \xNN so each error stays one line (fleet mode prints one line per node).
  static std::string one_line(const std::string& s) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    out.reserve(s.size());
    for (unsigned char c : s) {
      if (c < 0x20 || c == 0x7f) {
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 15];
      } else {
        out += static_cast<char>(c);
      }
    }
    return out;
  }
  std::string file_;
  long line_;
};

// The input could not be opened at all (exit code 66, EX_NOINPUT).
class MissingInput : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The rule data in topology/ is unusable (exit code 78, EX_CONFIG).
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace gdrpeer::topo
