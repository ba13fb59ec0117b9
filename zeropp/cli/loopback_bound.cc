#include "zeropp/cli/loopback_bound.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace zeropp {
namespace cli {

double MeasureLoopbackBytesPerSec(int64_t total_bytes, int64_t chunk_bytes) {
  int srv = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = 0;
  if (bind(srv, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(srv, 1) != 0) {
    throw std::runtime_error("loopback bound: cannot listen on 127.0.0.1");
  }
  socklen_t len = sizeof(sa);
  getsockname(srv, reinterpret_cast<sockaddr*>(&sa), &len);
  std::thread receiver([&] {
    int c = accept(srv, nullptr, nullptr);
    std::vector<char> buf(chunk_bytes);
    int64_t got = 0;
    while (got < total_bytes) {
      ssize_t n = read(c, buf.data(), buf.size());
      if (n <= 0) break;
      got += n;
    }
    close(c);
  });
  int cli = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(cli, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    throw std::runtime_error("loopback bound: cannot connect");
  }
  std::vector<char> buf(chunk_bytes, 1);
  auto t0 = std::chrono::steady_clock::now();
  int64_t sent = 0;
  while (sent < total_bytes) {
    ssize_t n = write(cli, buf.data(), std::min<int64_t>(chunk_bytes, total_bytes - sent));
    if (n <= 0) break;
    sent += n;
  }
  shutdown(cli, SHUT_WR);
  receiver.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  close(cli);
  close(srv);
  return sent / secs;
}

int64_t LoopbackTxBytes() {
  std::ifstream in("/proc/net/dev");
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    if (name != "lo") continue;
    std::istringstream fields(line.substr(colon + 1));
    int64_t v[9];
    for (auto& x : v) fields >> x;
    return v[8];  // transmit bytes
  }
  return -1;
}

}  // namespace cli
}  // namespace zeropp
