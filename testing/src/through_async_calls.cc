// See through_async_calls.h.

#include "idem/testing/through_async_calls.h"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "idem/store/forwarding_store.h"

namespace idem::testing {
namespace {

// One asynchronous call's answer, waited for by the calling thread.
template <typename T>
class Awaited : public std::enable_shared_from_this<Awaited<T>> {
 public:
  StoreCallback<T> Callback(const char* op) {
    return [self = this->shared_from_this(), op](Result<T> result) {
      std::lock_guard<std::mutex> lock(self->mu_);
      if (self->answer_) {
        ADD_FAILURE() << "the store answered its asynchronous " << op
                      << " twice";
        return;
      }
      self->answer_ = std::move(result);
      self->cv_.notify_all();
    };
  }
  Result<T> Wait(const char* op, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, wait, [&] { return answer_.has_value(); })) {
      return MakeError(ErrorCode::kInternal,
                       std::string("the store did not answer its "
                                   "asynchronous ") +
                           op + " within " + std::to_string(wait.count()) +
                           " ms");
    }
    return std::move(*answer_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Result<T>> answer_;
};

class AsyncCallsStore final : public ForwardingStore {
 public:
  AsyncCallsStore(std::shared_ptr<Store> inner, std::chrono::milliseconds wait)
      : ForwardingStore(std::move(inner), ForwardAsync::kYes), wait_(wait) {}

  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) override {
    auto awaited = std::make_shared<Awaited<ClaimResult>>();
    inner().ClaimAsync(id, fp, now, ttl, lock_timeout,
                       awaited->Callback("claim"));
    return awaited->Wait("claim", wait_);
  }
  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) override {
    return CompleteShared(id, token,
                          std::make_shared<const Response>(response));
  }
  Result<bool> CompleteShared(
      const RecordId& id, const Token& token,
      std::shared_ptr<const Response> response) override {
    auto awaited = std::make_shared<Awaited<bool>>();
    inner().CompleteAsync(id, token, std::move(response),
                          awaited->Callback("complete"));
    return awaited->Wait("complete", wait_);
  }

 private:
  const std::chrono::milliseconds wait_;
};

}  // namespace

std::shared_ptr<Store> ThroughAsyncCalls(std::shared_ptr<Store> inner,
                                         std::chrono::milliseconds wait) {
  return std::make_shared<AsyncCallsStore>(std::move(inner), wait);
}

std::vector<StoreFactory> WithAsyncCalls(std::vector<StoreFactory> setups) {
  const std::size_t n = setups.size();
  for (std::size_t i = 0; i < n; ++i) {
    StoreFactory async = setups[i];
    async.name += "_async";
    async.open =
        [open = setups[i].open](
            const StoreTestContext& context) -> Result<std::shared_ptr<Store>> {
      IDEM_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, open(context));
      return ThroughAsyncCalls(std::move(store));
    };
    setups.push_back(std::move(async));
  }
  return setups;
}

}  // namespace idem::testing
