// A TCP forwarder on 127.0.0.1 for failover tests: it plays a managed
// Redis's endpoint (a DNS name or a virtual address) that moves to the
// promoted replica. Each accepted connection is piped to the port that is
// the target at accept time; Retarget changes where new connections go
// while the open ones stay piped to the old target, as connections to an
// address that a DNS change no longer names stay on the old host.
//
// Thread-safety: every method may be called from any thread. The
// destructor closes every connection and joins the threads.

#ifndef IDEM_TESTS_BACKENDS_REDIS_TCP_FORWARDER_H_
#define IDEM_TESTS_BACKENDS_REDIS_TCP_FORWARDER_H_

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace idem::testing {

class TcpForwarder {
 public:
  // Listens on a free port of 127.0.0.1; port() is 0 when it could not.
  explicit TcpForwarder(int target_port);
  ~TcpForwarder();
  TcpForwarder(const TcpForwarder&) = delete;
  TcpForwarder& operator=(const TcpForwarder&) = delete;

  int port() const { return port_; }
  // New connections go to `target_port` from now on.
  void Retarget(int target_port) { target_.store(target_port); }
  // Connections accepted so far.
  int accepted() const { return accepted_.load(); }

 private:
  void Accept();
  void Pipe(int client);

  int listener_ = -1;
  int port_ = 0;
  std::atomic<int> target_;
  std::atomic<int> accepted_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // Guards pipes_.
  std::vector<std::thread> pipes_;
  std::thread acceptor_;
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_BACKENDS_REDIS_TCP_FORWARDER_H_
