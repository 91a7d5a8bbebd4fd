// A Store decorator for driving the Guard's and the adapters' error paths:
// forwards to a real store and fails (or throws from) the operations a test
// selects, counting the calls. The switches are atomic: a test may flip them
// while a server's threads call the store. Used only where a test is about
// the Guard's or an adapter's logic; every backend's real failure modes are
// covered by its own tests.

#ifndef IDEM_TESTS_SUPPORT_FAULTY_STORE_H_
#define IDEM_TESTS_SUPPORT_FAULTY_STORE_H_

#include <atomic>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "idem/response.h"
#include "idem/store.h"
#include "idem/store/forwarding_store.h"

namespace idem::testing {

class FaultyStore final : public ForwardingStore {
 public:
  explicit FaultyStore(std::shared_ptr<Store> inner)
      : ForwardingStore(std::move(inner)) {}

  // While set, the operation fails with this code.
  std::atomic<std::optional<ErrorCode>> fail_claim{};
  std::atomic<std::optional<ErrorCode>> fail_complete{};
  std::atomic<std::optional<ErrorCode>> fail_release{};
  std::atomic<std::optional<ErrorCode>> fail_revoke{};
  std::atomic<std::optional<ErrorCode>> fail_extend{};
  std::atomic<std::optional<ErrorCode>> fail_purge{};
  // While set, Claim throws, as a store that breaks store.h's
  // no-exceptions rule would.
  std::atomic<bool> throw_on_claim{false};
  std::atomic<int> claims{0};
  std::atomic<int> completes{0};
  std::atomic<int> releases{0};
  std::atomic<int> revokes{0};
  std::atomic<int> extends{0};
  std::atomic<int> purges{0};

  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) override {
    if (throw_on_claim) {
      ++claims;
      throw std::runtime_error("injected claim exception");
    }
    if (auto e = Injected(claims, fail_claim, "claim")) return *e;
    return ForwardingStore::Claim(id, fp, now, ttl, lock_timeout);
  }
  Result<bool> Complete(const RecordId& id, const Token& token,
                        const idem::Response& response) override {
    if (auto e = Injected(completes, fail_complete, "complete")) return *e;
    return ForwardingStore::Complete(id, token, response);
  }
  Result<bool> CompleteShared(
      const RecordId& id, const Token& token,
      std::shared_ptr<const idem::Response> response) override {
    if (auto e = Injected(completes, fail_complete, "complete")) return *e;
    return ForwardingStore::CompleteShared(id, token, std::move(response));
  }
  Result<bool> Release(const RecordId& id, const Token& token) override {
    if (auto e = Injected(releases, fail_release, "release")) return *e;
    return ForwardingStore::Release(id, token);
  }
  Result<bool> Revoke(const RecordId& id) override {
    if (auto e = Injected(revokes, fail_revoke, "revoke")) return *e;
    return ForwardingStore::Revoke(id);
  }
  Result<bool> ExtendLock(const RecordId& id, const Token& token, TimePoint now,
                          Duration lock_timeout) override {
    if (auto e = Injected(extends, fail_extend, "extend lock")) return *e;
    return ForwardingStore::ExtendLock(id, token, now, lock_timeout);
  }
  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit) override {
    if (auto e = Injected(purges, fail_purge, "purge")) return *e;
    return ForwardingStore::PurgeExpired(now, limit);
  }

 private:
  // Counts the call; the failure to return while `fail` is set.
  static std::optional<tl::unexpected<Error>> Injected(
      std::atomic<int>& calls,
      const std::atomic<std::optional<ErrorCode>>& fail, const char* op) {
    ++calls;
    const std::optional<ErrorCode> code = fail.load();
    if (!code) return std::nullopt;
    return MakeError(*code, std::string("injected ") + op + " failure");
  }
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_FAULTY_STORE_H_
