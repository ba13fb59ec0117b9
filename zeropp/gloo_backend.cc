#include "zeropp/gloo_backend.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace zeropp {

std::string LocalAddressTowards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (host.empty() || getaddrinfo(host.c_str(), "9", &hints, &res) != 0) return "";
  std::string out;
  for (addrinfo* a = res; a != nullptr && out.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // A UDP connect sends nothing: it only asks the kernel which local address routes there.
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char buf[INET6_ADDRSTRLEN] = {};
      const void* src = local.ss_family == AF_INET
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (inet_ntop(local.ss_family, src, buf, sizeof buf) != nullptr) out = buf;
    }
    ::close(fd);
  }
  freeaddrinfo(res);
  return out;
}

namespace {

// The interface named by GLOO_SOCKET_IFNAME (PyTorch's variable; the first of a comma-separated
// list), else the local address that routes to MASTER_ADDR, so that ranks on other hosts can reach
// this one: never loopback when the master is remote. The host name's address only when neither
// is known.
std::shared_ptr<::gloo::transport::Device> ChooseDevice() {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0') {
    std::string name(ifname);
    name = name.substr(0, name.find(','));
    try {
      return c10d::ProcessGroupGloo::createDeviceForInterface(name);
    } catch (const std::exception&) {
      throw std::invalid_argument("GLOO_SOCKET_IFNAME: got '" + name +
                                  "', expected a network interface of this host with an address (see `ip addr`)");
    }
  }
  if (const char* master = std::getenv("MASTER_ADDR"); master != nullptr) {
    const std::string local = LocalAddressTowards(master);
    if (!local.empty()) return c10d::ProcessGroupGloo::createDeviceForHostname(local);
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

c10::intrusive_ptr<c10d::Backend> MakeGlooBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(ChooseDevice());
  options->threads = 1;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace zeropp
