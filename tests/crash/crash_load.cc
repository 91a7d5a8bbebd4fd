#include "crash_load.h"

#include <chrono>
#include <utility>

namespace idem::testing::proc {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

bool Replayed(const HttpResponse& r) {
  return r.Header("Idempotent-Replayed") == "true";
}

bool SameResponse(const HttpResponse& a, const HttpResponse& b) {
  return a.status == b.status && a.body == b.body;
}

std::optional<HttpResponse> Post(std::uint16_t port, const KeyLog& k) {
  return Send(port, "POST", "/orders", k.key, k.body, seconds(30));
}

// What the request answered, as far as the log is concerned.
enum class Answer { kRan, kReplayed, kWrongReplay, kConflict, kFailed };

// Applies `r` to `k`: a handler run becomes the key's response, a replay of
// it confirms it.
Answer Apply(KeyLog& k, const std::optional<HttpResponse>& r) {
  if (!r) return Answer::kFailed;
  if (r->status == 409) return Answer::kConflict;
  if (r->status < 200 || r->status > 299) return Answer::kFailed;
  if (!Replayed(*r)) {
    k.response = r;
    k.confirmed = false;
    return Answer::kRan;
  }
  if (!k.response) {  // The run whose answer its client never received.
    k.response = r;
    k.confirmed = true;
    return Answer::kReplayed;
  }
  if (!SameResponse(*r, *k.response)) return Answer::kWrongReplay;
  k.confirmed = true;
  return Answer::kReplayed;
}

}  // namespace

CrashTally& CrashTally::operator+=(const CrashTally& o) {
  kept += o.kept;
  ran_again_under_load += o.ran_again_under_load;
  lost += o.lost;
  lost_then_409 += o.lost_then_409;
  in_flight_replayed += o.in_flight_replayed;
  in_flight_ran += o.in_flight_ran;
  in_flight_409 += o.in_flight_409;
  wrong_replays += o.wrong_replays;
  ran_twice += o.ran_twice;
  failures += o.failures;
  return *this;
}

std::string CrashTally::Describe() const {
  return "kept " + std::to_string(kept) + ", lost " + std::to_string(lost) +
         " (" + std::to_string(lost_then_409) +
         " after a 409); in flight: replayed " +
         std::to_string(in_flight_replayed) + ", ran " +
         std::to_string(in_flight_ran) + " (" + std::to_string(in_flight_409) +
         " after a 409), ran again under load " +
         std::to_string(ran_again_under_load) + "; wrong replays " +
         std::to_string(wrong_replays) + ", ran twice " +
         std::to_string(ran_twice) + ", failures " + std::to_string(failures);
}

LoadClients::LoadClients(std::uint16_t port, std::string prefix, int clients)
    : port_(port), prefix_(std::move(prefix)) {
  for (int c = 0; c < clients; ++c)
    threads_.emplace_back([this, c] { Client(c); });
}

LoadClients::~LoadClients() { Stop(); }

void LoadClients::Client(int c) {
  for (int n = 0; !stop_.load(); ++n) {
    KeyLog k;
    k.key = prefix_ + std::to_string(c) + "-" + std::to_string(n);
    k.body = "{\"client\":" + std::to_string(c) +
             ",\"n\":" + std::to_string(n) + "}";
    // As a client does: the same key again until its response is replayed.
    int runs = 0;
    while (!k.confirmed && !stop_.load()) {
      const Answer a = Apply(k, Post(port_, k));
      // Once before the crash (its completion lost) and once after it, at
      // most.
      if (a == Answer::kRan && ++runs > 1)
        ++(runs == 2 ? ran_again_ : ran_thrice_);
      if (a == Answer::kWrongReplay) {
        ++wrong_replays_;
        break;
      }
      if (a == Answer::kConflict || a == Answer::kFailed) {
        ++failed_;
        // A client's back-off, so that an outage is not a busy loop.
        Pause(milliseconds(50));
      }
    }
    if (k.confirmed) ++confirmed_;
    {
      std::lock_guard lock(mu_);
      keys_.push_back(std::move(k));
    }
    // A pause between keys bounds the keys a round makes (and CheckKeys
    // sends again) to a few hundred a second.
    Pause(milliseconds(10));
  }
}

void LoadClients::Pause(milliseconds pause) {
  std::unique_lock lock(mu_);
  stopping_.wait_for(lock, pause, [&] { return stop_.load(); });
}

std::vector<KeyLog> LoadClients::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  stopping_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  std::lock_guard lock(mu_);
  return std::move(keys_);
}

CrashTally CheckKeys(std::uint16_t port, std::vector<KeyLog>& keys) {
  CrashTally t;
  for (KeyLog& k : keys) {
    const bool was_confirmed = k.confirmed;
    bool conflict = false;
    Answer a = Answer::kFailed;
    // A 409 until the lock left behind times out; a 503 while the demo
    // reconnects to its store.
    WaitFor(
        [&] {
          a = Apply(k, Post(port, k));
          if (a == Answer::kConflict) conflict = true;
          return a != Answer::kConflict && a != Answer::kFailed;
        },
        seconds(120), milliseconds(100));
    switch (a) {
      case Answer::kReplayed:
        ++(was_confirmed ? t.kept : t.in_flight_replayed);
        break;
      case Answer::kRan:
        if (was_confirmed) {
          ++t.lost;
          if (conflict) ++t.lost_then_409;
        } else {
          ++t.in_flight_ran;
          if (conflict) ++t.in_flight_409;
        }
        // That run, and no other, is what the key answers from now on.
        switch (Apply(k, Post(port, k))) {
          case Answer::kReplayed:
            break;
          case Answer::kRan:
            ++t.ran_twice;
            break;
          default:
            ++t.failures;
        }
        break;
      case Answer::kWrongReplay:
        ++t.wrong_replays;
        break;
      default:
        ++t.failures;
    }
  }
  return t;
}

}  // namespace idem::testing::proc
