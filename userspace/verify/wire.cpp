#include "gdrpeer/verify/wire.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "gdrpeer/gdrpeer.hpp"

namespace gdrpeer::verify::wire {

namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(int err) { return errno_name(err) + " (" + std::strerror(err) + ")"; }

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

// The text form of a socket address, IPv6 in brackets with its scope.
std::string sockaddr_text(const sockaddr* sa) {
  char host[NI_MAXHOST] = {};
  char serv[NI_MAXSERV] = {};
  const socklen_t len = sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (::getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0) return "?";
  return format_host_port(host, static_cast<uint16_t>(std::stoi(serv)));
}

bool wait_fd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, timeout_ms);
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return true;  // let the read/write report the error
  }
}

// getaddrinfo, with an IPv6 scope ("fe80::1%eth0") resolved here: glibc accepts a scope only on
// link-local addresses and says "Name or service not known" for a wrong interface name.
addrinfo* resolve(const std::string& host_with_scope, const std::string& port, int family, int flags, const char* what) {
  std::string host = host_with_scope;
  unsigned scope = 0;
  if (const auto pct = host.find('%'); pct != std::string::npos) {
    const std::string ifname = host.substr(pct + 1);
    host = host.substr(0, pct);
    scope = ::if_nametoindex(ifname.c_str());
    if (scope == 0 && !ifname.empty() && ifname.find_first_not_of("0123456789") == std::string::npos)
      scope = static_cast<unsigned>(std::stoul(ifname));
    if (scope == 0)
      throw WireError(WireError::Kind::io, std::string(what) + " '" + host_with_scope + "': this node has no network interface '" + ifname +
                                               "' (the %IF of the address)");
    family = AF_INET6;
    flags |= AI_NUMERICHOST;
  }
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  addrinfo* res = nullptr;
  if (int e = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res); e != 0)
    throw WireError(WireError::Kind::io, std::string(what) + " '" + host_with_scope + "': " + ::gai_strerror(e));
  for (addrinfo* ai = res; ai != nullptr && scope != 0; ai = ai->ai_next)
    if (ai->ai_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_scope_id = scope;
  return res;
}

}  // namespace

// ---- payload encoding ----------------------------------------------------------------------

Writer& Writer::u8(uint8_t v) {
  buf_.push_back(v);
  return *this;
}
Writer& Writer::u16(uint16_t v) { return u8(static_cast<uint8_t>(v)).u8(static_cast<uint8_t>(v >> 8)); }
Writer& Writer::u32(uint32_t v) { return u16(static_cast<uint16_t>(v)).u16(static_cast<uint16_t>(v >> 16)); }
Writer& Writer::u64(uint64_t v) { return u32(static_cast<uint32_t>(v)).u32(static_cast<uint32_t>(v >> 32)); }
Writer& Writer::bytes(const uint8_t* p, size_t n) {
  buf_.insert(buf_.end(), p, p + n);
  return *this;
}
Writer& Writer::str(const std::string& s) {
  u32(static_cast<uint32_t>(s.size()));
  return bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

const uint8_t* Reader::take(size_t n) {
  if (n > buf_.size() - pos_)
    throw WireError(WireError::Kind::protocol,
                    "a message from the peer is shorter than its fields (" + std::to_string(buf_.size()) + " bytes)");
  const uint8_t* p = buf_.data() + pos_;
  pos_ += n;
  return p;
}
uint8_t Reader::u8() { return *take(1); }
uint16_t Reader::u16() {
  const uint8_t* p = take(2);
  return static_cast<uint16_t>(p[0] | p[1] << 8);
}
uint32_t Reader::u32() {
  const uint32_t lo = u16();
  return lo | static_cast<uint32_t>(u16()) << 16;
}
uint64_t Reader::u64() {
  const uint64_t lo = u32();
  return lo | static_cast<uint64_t>(u32()) << 32;
}
void Reader::bytes(uint8_t* p, size_t n) { std::memcpy(p, take(n), n); }
std::string Reader::str() {
  const uint32_t n = u32();
  const uint8_t* p = take(n);
  return std::string(reinterpret_cast<const char*>(p), n);
}

// ---- addresses -----------------------------------------------------------------------------

std::string format_host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::optional<PeerAddress> parse_peer_address(const std::string& text, uint16_t default_port, std::string* why) {
  auto bad = [&](const std::string& w) -> std::optional<PeerAddress> {
    if (why != nullptr) *why = "'" + text + "': " + w;
    return std::nullopt;
  };
  auto port_of = [&](const std::string& p, uint16_t* out) {
    if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) return false;
    const unsigned long v = std::stoul(p);
    if (v == 0 || v > 65535) return false;
    *out = static_cast<uint16_t>(v);
    return true;
  };
  PeerAddress a;
  a.port = default_port;
  if (text.empty()) return bad("an empty host");
  if (text[0] == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos) return bad("'[' without ']'");
    a.host = text.substr(1, close - 1);
    const std::string rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':' || !port_of(rest.substr(1), &a.port)) return bad("the port after ']' must be :1-65535");
    }
  } else if (std::count(text.begin(), text.end(), ':') > 1) {
    a.host = text;  // a bare IPv6 address: no port (write [addr]:port for one)
  } else {
    const auto colon = text.find(':');
    a.host = text.substr(0, colon);
    if (colon != std::string::npos && !port_of(text.substr(colon + 1), &a.port)) return bad("the port must be 1-65535");
  }
  if (a.host.empty()) return bad("an empty host");
  return a;
}

// ---- Channel -------------------------------------------------------------------------------

Channel::Channel(int fd) : fd_(fd) {}
Channel::Channel(Channel&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
Channel& Channel::operator=(Channel&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}
Channel::~Channel() { close(); }

void Channel::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string Channel::peer_name() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (fd_ < 0 || ::getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return sockaddr_text(reinterpret_cast<sockaddr*>(&ss));
}

Channel Channel::connect(const PeerAddress& peer, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  addrinfo* res = resolve(peer.host, std::to_string(peer.port), AF_UNSPEC, 0, "cannot resolve");
  std::string last = "no address";
  for (;;) {
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
      const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
      if (fd < 0) {
        last = "socket: " + errno_text(errno);
        continue;
      }
      int err = 0;
      if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
          if (!wait_fd(fd, POLLOUT, remaining_ms(deadline))) {
            err = ETIMEDOUT;
          } else {
            socklen_t len = sizeof err;
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
          }
        }
      }
      if (err == 0) {
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        ::freeaddrinfo(res);
        return Channel(fd);
      }
      last = "connect to " + sockaddr_text(ai->ai_addr) + ": " + errno_text(err);
      ::close(fd);
    }
    if (Clock::now() >= deadline) break;
    // Nobody listening yet (the server still starting): try again shortly.
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(200, remaining_ms(deadline) + 1)));
    if (Clock::now() >= deadline) break;
  }
  ::freeaddrinfo(res);
  throw WireError(WireError::Kind::io, "no gdrpeer verify server at " + format_host_port(peer.host, peer.port) + " within " +
                                           std::to_string(timeout_ms) + " ms: " + last);
}

void Channel::write_all(const uint8_t* p, size_t n, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (n > 0) {
    if (fd_ < 0) throw WireError(WireError::Kind::closed, "the connection is closed");
    const ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_fd(fd_, POLLOUT, remaining_ms(deadline)))
        throw WireError(WireError::Kind::timeout, "the peer took no data for " + std::to_string(timeout_ms) + " ms");
      continue;
    }
    const int err = errno;
    if (err == EPIPE || err == ECONNRESET)
      throw WireError(WireError::Kind::closed, "the peer closed the connection (" + errno_text(err) + ")");
    throw WireError(WireError::Kind::io, "send: " + errno_text(err));
  }
}

void Channel::read_all(uint8_t* p, size_t n, int timeout_ms, bool first) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  size_t got = 0;
  while (got < n) {
    if (fd_ < 0) throw WireError(WireError::Kind::closed, "the connection is closed");
    if (!wait_fd(fd_, POLLIN, remaining_ms(deadline)))
      throw WireError(WireError::Kind::timeout, std::string("no ") + (first && got == 0 ? "message" : "rest of a message") +
                                                    " from the peer within " + std::to_string(timeout_ms) + " ms");
    const ssize_t r = ::recv(fd_, p + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) throw WireError(WireError::Kind::closed, "the peer closed the connection");
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    const int err = errno;
    if (err == ECONNRESET) throw WireError(WireError::Kind::closed, "the peer reset the connection (ECONNRESET)");
    throw WireError(WireError::Kind::io, "recv: " + errno_text(err));
  }
}

void Channel::send(uint16_t version, uint16_t type, const std::vector<uint8_t>& payload, int timeout_ms) {
  Writer h;
  h.u32(kMagic).u16(version).u16(type).u32(static_cast<uint32_t>(payload.size())).u32(0);
  std::vector<uint8_t> all = h.data();
  all.insert(all.end(), payload.begin(), payload.end());
  write_all(all.data(), all.size(), timeout_ms);
}

Frame Channel::recv(int timeout_ms) {
  uint8_t head[16];
  read_all(head, sizeof head, timeout_ms, true);
  const std::vector<uint8_t> hv(head, head + 16);
  Reader r(hv);
  const uint32_t magic = r.u32();
  Frame f;
  f.version = r.u16();
  f.type = r.u16();
  const uint32_t len = r.u32();
  if (magic != kMagic)
    throw WireError(WireError::Kind::protocol, "the peer does not speak gdrpeer verify's protocol (the first bytes are not \"GDRV\")");
  if (len > kMaxPayload)
    throw WireError(WireError::Kind::protocol,
                    "the peer sent a message of " + std::to_string(len) + " bytes (at most " + std::to_string(kMaxPayload) + ")");
  f.payload.resize(len);
  if (len > 0) read_all(f.payload.data(), len, timeout_ms, false);
  return f;
}

// ---- Listener ------------------------------------------------------------------------------

Listener::Listener(const std::string& bind_host, uint16_t port) {
  const std::string p = std::to_string(port);
  addrinfo* res = nullptr;
  try {
    res = resolve(bind_host, p, bind_host.empty() ? AF_INET6 : AF_UNSPEC, AI_PASSIVE | AI_NUMERICSERV, "cannot resolve --bind");
  } catch (const WireError&) {
    if (!bind_host.empty()) throw;
    res = resolve("", p, AF_INET, AI_PASSIVE | AI_NUMERICSERV, "cannot resolve --bind");  // no IPv6: every IPv4 address
  }
  std::string last;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = "socket: " + errno_text(errno);
      continue;
    }
    const int one = 1, zero = 0;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6 && bind_host.empty()) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 1) != 0) {
      last = "bind " + sockaddr_text(ai->ai_addr) + ": " + errno_text(errno);
      ::close(fd);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    port_ =
        ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    bound_ = sockaddr_text(reinterpret_cast<sockaddr*>(&ss));
    fd_ = fd;
    break;
  }
  ::freeaddrinfo(res);
  if (fd_ < 0) throw WireError(WireError::Kind::io, "cannot listen: " + last);
}

Listener::~Listener() {
  if (fd_ >= 0) ::close(fd_);
}

std::string Listener::address() const { return bound_; }

Channel Listener::accept(int timeout_ms) {
  if (!wait_fd(fd_, POLLIN, timeout_ms <= 0 ? -1 : timeout_ms))
    throw WireError(WireError::Kind::timeout, "no client connected within " + std::to_string(timeout_ms) + " ms");
  const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) throw WireError(WireError::Kind::io, "accept: " + errno_text(errno));
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return Channel(fd);
}

}  // namespace gdrpeer::verify::wire
