// The store contract's random workload: claims, completions, releases and
// inspections from many threads, checked exactly against the claim table;
// see store_contract.h. Threads start on a std::barrier; every loop is
// bounded.

#include <array>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "idem/record.h"
#include "idem/response.h"
#include "idem/testing/status_matchers.h"
#include "idem/testing/store_contract.h"
#include "idem/token.h"
#include "idem/types.h"
#include "store_contract_util.h"

namespace idem::testing {

int contract::RandomContractAnchor() { return 0; }

namespace {

using contract::Describe;
using contract::ForeignToken;
using contract::kForever;
using contract::TestFp;
using contract::TestId;

// Random claim / complete / release / inspect from 16 threads on 64 ids,
// checked exactly against the claim table.
//
// Time stands still and ttl and lock timeout are a year, so nothing expires
// and no lock times out. Then:
//  - a token a thread got from Acquired is the only way to change its
//    record, so its one Complete or Release must return true, and a second
//    use (or any never-issued token) must return false;
//  - at most one thread holds an id at a time;
//  - a completed record never changes again, so every Completed replay and
//    every Inspect of it must show the response completed for that id.
// Each round uses 64 fresh ids, so ids do not all end up completed.
class RandomWorkload {
 public:
  static constexpr int kThreads = 16;
  static constexpr int kIds = 64;
  static constexpr int kRounds = contract::StressRounds(8);
  static constexpr int kOpsPerRound = 400;

  RandomWorkload(Store& store, TimePoint now)
      : store_(store), now_(now), slots_(kIds * kRounds) {}

  void Run() {
    std::barrier<> round_start(kThreads);
    std::vector<std::thread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([this, t, &round_start] {
        Worker worker(*this, t);
        for (int round = 0; round < kRounds; ++round) {
          round_start.arrive_and_wait();
          worker.RunRound(round);
        }
      });
    }
    for (auto& thread : threads) thread.join();
  }

  std::vector<std::string> Failures() const {
    std::vector<std::string> all;
    for (const auto& f : failures_) all.insert(all.end(), f.begin(), f.end());
    return all;
  }

  // How often each kind of result was seen, to show the run covered them.
  struct Counts {
    std::array<long, 4> claims{};  // Indexed by ClaimOutcome.
    long completes = 0;
    long releases = 0;
    long stale_rejected = 0;
  };
  Counts Totals() const {
    Counts total;
    for (const Counts& c : counts_) {
      for (int i = 0; i < 4; ++i) total.claims[i] += c.claims[i];
      total.completes += c.completes;
      total.releases += c.releases;
      total.stale_rejected += c.stale_rejected;
    }
    return total;
  }

 private:
  // What the threads share about one id of one round.
  struct Slot {
    // Threads that believe they hold the id: never above 1.
    std::atomic<int> holders{0};
    // 0 until the holder decides to complete; then the completion code
    // (which names the fingerprint and the response). Published before the
    // Complete call, so a thread that sees the record completed sees it.
    std::atomic<std::uint64_t> completion{0};
  };

  static constexpr std::uint64_t Completion(int thread, std::uint64_t seq,
                                            int fp_index) {
    return (static_cast<std::uint64_t>(thread + 1) << 48) | (seq << 1) |
           static_cast<std::uint64_t>(fp_index);
  }
  static int FpIndexOf(std::uint64_t completion) { return completion & 1; }
  static Response ResponseFor(std::uint64_t completion) {
    Response r;
    r.status = 200 + static_cast<int>(completion % 300);
    r.headers = {{"Content-Type", "application/octet-stream"},
                 {"X-Completion", std::to_string(completion)}};
    r.body.assign(reinterpret_cast<const char*>(&completion),
                  sizeof completion);
    r.body.append(completion % 7, '\0');
    return r;
  }
  Fingerprint FpFor(int id, int fp_index) const {
    return TestFp(static_cast<std::uint64_t>(id) * 2 + fp_index);
  }

  class Worker {
   public:
    Worker(RandomWorkload& w, int thread)
        : w_(w), thread_(thread), rng_(0x5eed0000u + thread) {}

    void RunRound(int round) {
      held_.fill(std::nullopt);
      used_.clear();
      for (int op = 0; op < kOpsPerRound; ++op) Step(round);
      // Finish every claim still held so the next round starts clean.
      for (int k = 0; k < kIds; ++k) {
        if (held_[k]) Finish(round, k, /*complete=*/rng_() % 2 == 0);
      }
    }

   private:
    struct Held {
      Token token;
      int fp_index;
    };

    void Fail(const std::string& what) {
      auto& list = w_.failures_[thread_];
      if (list.size() < 20) {
        list.push_back("thread " + std::to_string(thread_) + ": " + what);
      }
    }

    RecordId IdOf(int round, int k) const {
      return TestId(1'000'000 + static_cast<std::uint64_t>(round) * kIds + k);
    }
    Slot& SlotOf(int round, int k) { return w_.slots_[round * kIds + k]; }

    void Step(int round) {
      const int k = static_cast<int>(rng_() % kIds);
      const int dice = static_cast<int>(rng_() % 100);
      if (held_[k]) {
        if (dice < 15) {
          InspectHeld(round, k);
        } else if (dice < 30) {
          ClaimHeld(round, k);
        } else {
          Finish(round, k, /*complete=*/dice < 60);
        }
        return;
      }
      if (dice < 60) {
        ClaimFree(round, k);
      } else if (dice < 80) {
        InspectAny(round, k);
      } else {
        UseStaleToken(round, dice % 2 == 0);
      }
    }

    // A claim by a thread that does not hold the id.
    void ClaimFree(int round, int k) {
      Slot& slot = SlotOf(round, k);
      const int fp_index = static_cast<int>(rng_() % 2);
      const std::uint64_t before =
          slot.completion.load(std::memory_order_acquire);
      auto claim = w_.store_.Claim(IdOf(round, k), w_.FpFor(k, fp_index),
                                   w_.now_, kForever, kForever);
      if (!claim) return Fail("claim error " + claim.error().ToString());
      ++counts().claims[static_cast<int>(claim->outcome)];
      const std::string where =
          " (round " + std::to_string(round) + " id " + std::to_string(k) + ")";
      // Once a completion is published the record's fingerprint is fixed for
      // good: same fingerprint -> in progress or completed, other -> mismatch.
      const bool fixed = before != 0;
      const bool same = fixed && FpIndexOf(before) == fp_index;
      switch (claim->outcome) {
        case ClaimOutcome::kAcquired: {
          if (fixed) Fail("acquired a record being completed" + where);
          if (claim->takeover) Fail("takeover with no timed-out lock" + where);
          if (claim->locked_until != w_.now_ + kForever) {
            Fail("acquired with wrong locked_until" + where);
          }
          if (slot.holders.fetch_add(1, std::memory_order_acq_rel) != 0) {
            Fail("two holders at once" + where);
          }
          held_[k] = Held{claim->token, fp_index};
          break;
        }
        case ClaimOutcome::kInProgress:
          if (fixed && !same) Fail("in_progress for other fingerprint" + where);
          if (claim->locked_until != w_.now_ + kForever) {
            Fail("in_progress with wrong locked_until" + where);
          }
          break;
        case ClaimOutcome::kCompleted: {
          const std::uint64_t c =
              slot.completion.load(std::memory_order_acquire);
          if (c == 0) {
            Fail("completed but nobody completed it" + where);
          } else if (FpIndexOf(c) != fp_index) {
            Fail("completed for another fingerprint" + where);
          } else if (!claim->response ||
                     !(*claim->response == ResponseFor(c))) {
            Fail("replayed a response that was not stored" + where);
          }
          break;
        }
        case ClaimOutcome::kMismatch:
          if (same) Fail("mismatch on the same fingerprint" + where);
          break;
      }
    }

    // A claim by the holder itself: nobody else can have changed the record.
    void ClaimHeld(int round, int k) {
      const int fp_index = static_cast<int>(rng_() % 2);
      auto claim = w_.store_.Claim(IdOf(round, k), w_.FpFor(k, fp_index),
                                   w_.now_, kForever, kForever);
      if (!claim) return Fail("claim error " + claim.error().ToString());
      ++counts().claims[static_cast<int>(claim->outcome)];
      const ClaimOutcome want = fp_index == held_[k]->fp_index
                                    ? ClaimOutcome::kInProgress
                                    : ClaimOutcome::kMismatch;
      if (claim->outcome != want) {
        Fail("holder's own claim gave " + Describe(*claim));
      }
    }

    void InspectHeld(int round, int k) {
      auto record = w_.store_.Inspect(IdOf(round, k), w_.now_);
      if (!record) return Fail("inspect error " + record.error().ToString());
      const Record want{.state = RecordState::kInProgress,
                        .fingerprint = w_.FpFor(k, held_[k]->fp_index),
                        .token = held_[k]->token,
                        .locked_until = w_.now_ + kForever,
                        .expires_at = w_.now_ + kForever};
      if (!record->has_value() || !(**record == want)) {
        Fail("holder inspected " +
             (record->has_value() ? Describe(**record) : std::string("none")));
      }
    }

    void InspectAny(int round, int k) {
      Slot& slot = SlotOf(round, k);
      const std::uint64_t before =
          slot.completion.load(std::memory_order_acquire);
      auto record = w_.store_.Inspect(IdOf(round, k), w_.now_);
      if (!record) return Fail("inspect error " + record.error().ToString());
      if (!record->has_value()) {
        if (before != 0) Fail("record being completed vanished");
        return;
      }
      const Record& r = **record;
      if (r.expires_at != w_.now_ + kForever ||
          r.locked_until != w_.now_ + kForever) {
        Fail("inspect times wrong: " + Describe(r));
      }
      if (before != 0 && r.fingerprint != w_.FpFor(k, FpIndexOf(before))) {
        Fail("fingerprint changed after completion: " + Describe(r));
      }
      if (r.state == RecordState::kCompleted) {
        const std::uint64_t c = slot.completion.load(std::memory_order_acquire);
        if (c == 0 || r.fingerprint != w_.FpFor(k, FpIndexOf(c)) ||
            !r.response || !(*r.response == ResponseFor(c))) {
          Fail("completed record is not what was completed: " + Describe(r));
        }
      } else if (r.response) {
        Fail("in_progress record with a response: " + Describe(r));
      }
    }

    void Finish(int round, int k, bool complete) {
      Slot& slot = SlotOf(round, k);
      const Held held = *held_[k];
      held_[k].reset();
      // Give up the holder mark before the call: once the call lands another
      // thread may acquire at once (after a release).
      slot.holders.fetch_sub(1, std::memory_order_acq_rel);
      const RecordId id = IdOf(round, k);
      Result<bool> done = false;
      if (complete) {
        const std::uint64_t c = Completion(thread_, ++seq_, held.fp_index);
        slot.completion.store(c, std::memory_order_release);
        done = w_.store_.Complete(id, held.token, ResponseFor(c));
        ++counts().completes;
      } else {
        done = w_.store_.Release(id, held.token);
        ++counts().releases;
      }
      if (!done) return Fail("finish error " + done.error().ToString());
      if (!*done) {
        Fail(std::string(complete ? "Complete" : "Release") +
             " with the holder's token returned false");
      }
      used_.push_back({k, held.token});
    }

    // A token already used, or one never issued: must change nothing.
    void UseStaleToken(int round, bool complete) {
      int k;
      Token token;
      if (!used_.empty() && rng_() % 4 != 0) {
        const auto& [used_k, used_token] = used_[rng_() % used_.size()];
        k = used_k;
        token = used_token;
      } else {
        k = static_cast<int>(rng_() % kIds);
        token = ForeignToken(rng_());
      }
      const RecordId id = IdOf(round, k);
      auto done = complete ? w_.store_.Complete(id, token, ResponseFor(1))
                           : w_.store_.Release(id, token);
      if (!done) return Fail("stale call error " + done.error().ToString());
      if (*done) Fail("a stale or foreign token changed a record");
      ++counts().stale_rejected;
    }

    Counts& counts() { return w_.counts_[thread_]; }

    RandomWorkload& w_;
    const int thread_;
    std::mt19937_64 rng_;
    std::uint64_t seq_ = 0;
    std::array<std::optional<Held>, kIds> held_;
    std::vector<std::pair<int, Token>> used_;
  };

  Store& store_;
  const TimePoint now_;
  std::vector<Slot> slots_;
  std::array<std::vector<std::string>, kThreads> failures_;
  std::array<Counts, kThreads> counts_{};
};

}  // namespace

TEST_P(StoreContractTest, RandomConcurrentOperationsFollowTheClaimTable) {
  RandomWorkload workload(store(), Now());
  workload.Run();
  const std::vector<std::string> failures = workload.Failures();
  for (const std::string& f : failures) ADD_FAILURE() << f;
  ASSERT_TRUE(failures.empty());

  const RandomWorkload::Counts c = workload.Totals();
  EXPECT_GT(c.claims[static_cast<int>(ClaimOutcome::kAcquired)], 0);
  EXPECT_GT(c.claims[static_cast<int>(ClaimOutcome::kInProgress)], 0);
  EXPECT_GT(c.claims[static_cast<int>(ClaimOutcome::kCompleted)], 0);
  EXPECT_GT(c.claims[static_cast<int>(ClaimOutcome::kMismatch)], 0);
  EXPECT_GT(c.completes, 0);
  EXPECT_GT(c.releases, 0);
  EXPECT_GT(c.stale_rejected, 0);
}

}  // namespace idem::testing
