// Load for the crash tests, and what every key answers after the crash.
//
// LoadClients: threads that POST /orders to idem-demo with fresh keys, each
// key until it is confirmed: the first 2xx is the handler's response (its
// order id unique to that run of the handler), a replay of it confirms that
// the completed record was on the store's server; a 409, a 503 or no
// answer is retried (after a 50 ms back-off) with the same key, as a client
// does; a client pauses 10 ms between keys. They keep going while the demo or
// the store's server is killed and restarted, so some requests are cut off
// mid-flight: their key may hold a claim, a lock or a record that their client
// never saw, and a retry may run its handler again (ran_again_under_load: the
// completion was lost, or the lock left behind was taken over).
//
// CheckKeys: after the restart, every key of every round is sent again and
// sorted by what it answers (CrashTally): a replay of the response its
// client received, a handler run (again), a 409 while a lock left behind
// holds and then a takeover, or a wrong replay (a replay of anything else:
// never allowed). A key whose handler runs is sent once more: it must
// replay that run (the handler runs at most once per crash).
//
// Thread-safety: a LoadClients is driven by one thread (its clients are its
// own threads); confirmed() and failed() may be called meanwhile.

#ifndef IDEM_TESTS_CRASH_CRASH_LOAD_H_
#define IDEM_TESTS_CRASH_CRASH_LOAD_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/demo_process.h"

namespace idem::testing::proc {

// What the clients saw of one key.
struct KeyLog {
  std::string key;
  std::string body;
  // The response of the last handler run a client received (not a
  // replay): what every replay must equal. nullopt: none received.
  std::optional<HttpResponse> response;
  // A replay equal to `response` was received since that run: its
  // completed record was on the server.
  bool confirmed = false;
};

struct CrashTally {
  int kept = 0;  // Confirmed keys that replayed their response.
  // Confirmed keys whose handler ran again: their completed record was lost
  // (by the server's crash); `lost_then_409` of them answered 409 first
  // (the claim survived, its completion did not).
  int lost = 0;
  int lost_then_409 = 0;
  // Keys cut off mid-flight (a response and no confirming replay, or no
  // response at all): their record replayed, their handler ran (again), or
  // a 409 first, until the lock they left behind timed out.
  int in_flight_replayed = 0;
  int in_flight_ran = 0;
  int in_flight_409 = 0;
  int ran_again_under_load = 0;  // LoadClients::ran_again().
  int wrong_replays = 0;         // A replay of another response: must be 0.
  // A handler run after the restart not replayed, or a third run under
  // load: must be 0.
  int ran_twice = 0;
  int failures = 0;  // Neither (503s, no answer) within the waits.

  CrashTally& operator+=(const CrashTally& other);
  // "kept 40, lost 0 (0 after a 409), in flight: ...".
  std::string Describe() const;
};

class LoadClients {
 public:
  // `clients` threads on 127.0.0.1:`port`, keys `<prefix><client>-<n>`.
  LoadClients(std::uint16_t port, std::string prefix, int clients);
  ~LoadClients();  // Stop().
  LoadClients(const LoadClients&) = delete;
  LoadClients& operator=(const LoadClients&) = delete;

  int confirmed() const { return confirmed_.load(); }
  // Requests answered otherwise than 2xx (a 409, a 503, no answer: the
  // demo or its store down), and wrong replays seen under load (must stay
  // 0).
  int failed() const { return failed_.load(); }
  int wrong_replays() const { return wrong_replays_.load(); }
  // Keys whose handler a retry ran again, as above, and keys whose handler
  // ran a third time (must stay 0: one crash loses a key's record once).
  int ran_again() const { return ran_again_.load(); }
  int ran_thrice() const { return ran_thrice_.load(); }

  // Stops and joins the clients; the keys they sent.
  std::vector<KeyLog> Stop();

 private:
  void Client(int c);
  // Waits `pause`, or until Stop.
  void Pause(std::chrono::milliseconds pause);

  const std::uint16_t port_;
  const std::string prefix_;
  std::atomic<bool> stop_{false};
  std::atomic<int> confirmed_{0}, failed_{0}, wrong_replays_{0}, ran_again_{0},
      ran_thrice_{0};
  std::mutex mu_;
  std::condition_variable stopping_;  // stop_ set (under mu_).
  std::vector<KeyLog> keys_;          // Guarded by mu_.
  std::vector<std::thread> threads_;
};

// Sends every key of `keys` to 127.0.0.1:`port` again, as above, updating
// each key's log (its response is then the one replayed), and tallies the
// answers. Waits up to two minutes per key for a 409 to end and for a 503
// (the demo reconnecting) to pass.
CrashTally CheckKeys(std::uint16_t port, std::vector<KeyLog>& keys);

}  // namespace idem::testing::proc

#endif  // IDEM_TESTS_CRASH_CRASH_LOAD_H_
