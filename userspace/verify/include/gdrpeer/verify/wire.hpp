// The out-of-band channel of a two-node `gdrpeer verify`: one TCP connection between the
// client and the server, framed messages, a timeout on every wait.
//
// A frame is a 16-byte header and a payload, every integer little-endian:
//   u32 magic "GDRV" (bytes 47 44 52 56), u16 protocol version, u16 message type,
//   u32 payload length (at most kMaxPayload), u32 reserved (0).
// The magic and the version stay at these offsets in every protocol version, so a peer of
// another version is recognised as such (a clear message, never a hang or garbage).
// Payload fields are fixed-size little-endian integers, and strings as u32 length + bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace gdrpeer::verify::wire {

inline constexpr uint32_t kMagic = 0x56524447;  // "GDRV" in memory order
inline constexpr uint32_t kMaxPayload = 1u << 20;
inline constexpr uint16_t kDefaultPort = 18516;  // perftest's default is 18515: both can run side by side

// What went wrong on the channel; `kind` decides the words and the exit code.
struct WireError : std::runtime_error {
  enum class Kind { io, closed, timeout, protocol, version };
  Kind kind;
  uint16_t peer_version = 0;  // Kind::version: what the peer speaks
  WireError(Kind k, const std::string& what, uint16_t v = 0) : std::runtime_error(what), kind(k), peer_version(v) {}
};

// Builds a payload.
class Writer {
 public:
  Writer& u8(uint8_t v);
  Writer& u16(uint16_t v);
  Writer& u32(uint32_t v);
  Writer& u64(uint64_t v);
  Writer& bytes(const uint8_t* p, size_t n);
  Writer& str(const std::string& s);
  const std::vector<uint8_t>& data() const { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

// Reads a payload; every read past the end throws WireError(protocol).
class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& b) : buf_(b) {}
  uint8_t u8();
  uint16_t u16();
  uint32_t u32();
  uint64_t u64();
  void bytes(uint8_t* p, size_t n);
  std::string str();

 private:
  const uint8_t* take(size_t n);
  const std::vector<uint8_t>& buf_;
  size_t pos_ = 0;
};

struct Frame {
  uint16_t version = 0;
  uint16_t type = 0;
  std::vector<uint8_t> payload;
};

// "HOST", "HOST:PORT", "[V6]", "[V6%IF]:PORT", "V6%IF" (a bare IPv6 address has no port).
struct PeerAddress {
  std::string host;
  uint16_t port = kDefaultPort;
};
std::optional<PeerAddress> parse_peer_address(const std::string& text, uint16_t default_port, std::string* why);

// One connected TCP stream. Not copyable; closes on destruction.
class Channel {
 public:
  Channel() = default;
  explicit Channel(int fd);
  Channel(Channel&& o) noexcept;
  Channel& operator=(Channel&& o) noexcept;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  ~Channel();

  // Connects to host:port, retrying a refused connection (the server not listening yet)
  // until timeout_ms has passed.
  static Channel connect(const PeerAddress& peer, int timeout_ms);

  void send(uint16_t version, uint16_t type, const std::vector<uint8_t>& payload, int timeout_ms);
  // The next frame; WireError(closed) at end of stream, (timeout) after timeout_ms,
  // (protocol) on a bad magic or length. The version is returned, not checked.
  Frame recv(int timeout_ms);
  bool is_open() const { return fd_ >= 0; }
  std::string peer_name() const;  // "[fe80::1%eth0]:18516"
  void close();

 private:
  void write_all(const uint8_t* p, size_t n, int timeout_ms);
  void read_all(uint8_t* p, size_t n, int timeout_ms, bool first);
  int fd_ = -1;
};

class Listener {
 public:
  // Binds `bind_host` (empty: every address, IPv6 and IPv4) on `port` (0: any free port).
  Listener(const std::string& bind_host, uint16_t port);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  uint16_t port() const { return port_; }
  std::string address() const;  // what it is bound to, "[::]:18516"
  // Waits for one client; timeout_ms <= 0 waits forever. WireError(timeout) otherwise.
  Channel accept(int timeout_ms);

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::string bound_;
};

// "a:b" with IPv6 addresses in brackets.
std::string format_host_port(const std::string& host, uint16_t port);

}  // namespace gdrpeer::verify::wire
