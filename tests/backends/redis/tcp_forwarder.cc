// See tcp_forwarder.h. Every loop polls with a short timeout so that the
// destructor's stop flag is seen within it.

#include "tcp_forwarder.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>

namespace idem::testing {
namespace {

constexpr int kPollMs = 50;

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  return addr;
}

// Writes all of `data`; false when the peer is gone.
bool WriteAll(int fd, const char* data, ssize_t size) {
  while (size > 0) {
    const ssize_t n =
        ::send(fd, data, static_cast<std::size_t>(size), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data += n;
    size -= n;
  }
  return true;
}

}  // namespace

TcpForwarder::TcpForwarder(int target_port) : target_(target_port) {
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof addr;
  if (listener_ < 0 ||
      ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener_, 64) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return;
  }
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { Accept(); });
}

TcpForwarder::~TcpForwarder() {
  stop_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> pipes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pipes.swap(pipes_);
  }
  for (std::thread& t : pipes) t.join();
  if (listener_ >= 0) ::close(listener_);
}

void TcpForwarder::Accept() {
  while (!stop_) {
    pollfd p{.fd = listener_, .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, kPollMs) <= 0) continue;
    const int client = ::accept(listener_, nullptr, nullptr);
    if (client < 0) continue;
    ++accepted_;
    std::lock_guard<std::mutex> lock(mu_);
    pipes_.emplace_back([this, client] { Pipe(client); });
  }
}

void TcpForwarder::Pipe(int client) {
  const int upstream = ::socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in addr = Loopback(target_.load());
  if (upstream >= 0 &&
      ::connect(upstream, reinterpret_cast<const sockaddr*>(&addr),
                sizeof addr) == 0) {
    std::array<char, 16384> buffer;
    std::array<pollfd, 2> fds = {pollfd{client, POLLIN, 0},
                                 pollfd{upstream, POLLIN, 0}};
    bool open = true;
    while (open && !stop_) {
      if (::poll(fds.data(), fds.size(), kPollMs) <= 0) continue;
      for (int i = 0; i < 2 && open; ++i) {
        if (fds[i].revents == 0) continue;
        const ssize_t n = ::recv(fds[i].fd, buffer.data(), buffer.size(), 0);
        open = n > 0 && WriteAll(fds[1 - i].fd, buffer.data(), n);
      }
    }
  }
  if (upstream >= 0) ::close(upstream);
  ::close(client);
}

}  // namespace idem::testing
