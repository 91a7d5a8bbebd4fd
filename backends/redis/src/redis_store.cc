// The Redis store's operations; see redis_store.h for its contract, data
// layout and timeouts, redis_scripts.h for the scripts, redis_record.h for
// the value and its decoding, redis_options.h for the options' ranges,
// redis_router.h and redis_cluster.h for where commands go,
// redis_script_runner.h for how a script or command is sent and answered,
// redis_calls.h for the steps of Claim and Complete (and why a claim is a
// plain command), redis_async_calls.h for their asynchronous form.

#include "idem/redis_store.h"
#include "redis_store_test_peer.h"

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/store/catch_exceptions.h"
#include "idem/store/claim_memo.h"
#include "idem/store/record_codec.h"
#include "idem/token.h"
#include "redis_async_calls.h"
#include "redis_calls.h"
#include "redis_connection.h"
#include "redis_options.h"
#include "redis_record.h"
#include "redis_router.h"
#include "redis_scan.h"
#include "redis_script_runner.h"
#include "redis_scripts.h"
#include "redis_server_watch.h"

namespace idem {
namespace {

using redis::Command;
using redis::IntegerReply;
using redis::Reply;

}  // namespace

class RedisStore::Impl {
 public:
  Impl(RedisStoreOptions options, std::string display, LogSink log)
      : o_(std::move(options)),
        display_(std::move(display)),
        log_(std::move(log)),
        router_(redis::MakeRouter(o_, display_)),
        runner_(*router_, o_.wait_replicas, o_.wait_timeout, display_),
        pattern_(redis::KeysPattern(o_.prefix)),
        watch_(*router_,
               {.lazy = o_.connect == RedisStoreOptions::Connect::kLazy,
                .allow_eviction = o_.allow_eviction,
                .check_interval = o_.check_interval,
                .display = display_,
                .log = log_}) {}

  std::string Prefix() const { return display_ + ": "; }

  // RedisStore's BeforeCall and AfterError (redis_store.h).
  Status Ready(std::string_view op) { return watch_.Ready(op); }
  void Poke() { watch_.Poke(); }

  std::string Key(const RecordId& id) const {
    std::string key = o_.prefix;
    key += '{';
    key += id.ToHex();
    key += '}';
    return key;
  }

  // Eager: connects and checks the servers; lazy: starts connecting.
  Status Start() { return watch_.Start(); }

  Result<Reply> RunScript(const redis::Script& script, const std::string& key,
                          std::span<const std::string_view> args, bool wait,
                          int resends) {
    return runner_.Run(script, key, args, wait, resends);
  }

  Result<Reply> RunCommand(const std::string& key, const Command& command) {
    return runner_.RunCommand(key, command);
  }

  // SET NX GET claims a free key; a record in the way is decided here and
  // replaced only by the Reclaim script, which loses (0) when the record
  // changed since it was read: then the SET is tried again. The steps are
  // redis_calls.h's, shared with ClaimAsync (redis_async_calls.h).
  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) {
    const redis::ClaimPlan plan =
        redis::PlanClaim(Key(id), fp, now, ttl, lock_timeout);
    const Command set = plan.Set();
    for (int attempt = 0; attempt < RedisStore::kClaimAttempts; ++attempt) {
      IDEM_ASSIGN_OR_RETURN(std::optional<std::string> found,
                            SetOrGet(id, plan.key, set));
      std::optional<Result<ClaimResult>> answer;
      Record existing;
      switch (redis::AfterSet(id, display_, plan, found, fp, now, answer,
                              existing)) {
        case redis::ClaimStep::kAcquired:
          return redis::Acquired(memo_, id, plan, /*takeover=*/false);
        case redis::ClaimStep::kAnswered:
          return std::move(*answer);
        case redis::ClaimStep::kReclaim:
          break;
      }
      if (reclaim_hook_) reclaim_hook_(attempt);
      const auto args = redis::ReclaimArgs(plan, *found);
      IDEM_ASSIGN_OR_RETURN(Reply reply,
                            RunScript(redis::ReclaimScript(), plan.key, args,
                                      /*wait=*/true, /*resends=*/1));
      if (redis::Reclaimed(*reply)) {
        return redis::Acquired(memo_, id, plan,
                               /*takeover=*/!existing.Expired(now));
      }
    }
    return redis::LostEveryRace(now);
  }

  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) {
    std::optional<ClaimFields> fields = memo_.Take(token);
    if (!fields || fields->id != id) {
      IDEM_ASSIGN_OR_RETURN(auto record, Read(id));
      if (!record) return Vanished(id);
      fields = redis::HeldFields(id, *record, token);
      if (!fields) return false;
    }
    // The call id lets a resend of this call recognise its own write.
    const std::string value = redis::CompletionValue(*fields, token, response);
    const std::array<std::string_view, 2> args = {token.view(), value};
    IDEM_ASSIGN_OR_RETURN(Reply reply,
                          RunScript(redis::CompleteScript(), Key(id), args,
                                    /*wait=*/true, /*resends=*/1));
    const redis::CompleteVerdict verdict = redis::VerdictOf(*reply);
    if (verdict == redis::CompleteVerdict::kVanished) return Vanished(id);
    return verdict == redis::CompleteVerdict::kCompleted;
  }

  Result<bool> Release(const RecordId& id, const Token& token) {
    memo_.Forget(token);
    const std::array<std::string_view, 1> args = {token.view()};
    IDEM_ASSIGN_OR_RETURN(Reply reply,
                          RunScript(redis::ReleaseScript(), Key(id), args,
                                    /*wait=*/false, /*resends=*/0));
    return IntegerReply(*reply) == 1;
  }

  // The script writes only if the header is still the one read; only a
  // renewal of the same claim elsewhere can change it and keep the claim
  // held (2: read again).
  Result<bool> ExtendLock(const RecordId& id, const Token& token, TimePoint now,
                          Duration lock_timeout) {
    const std::string key = Key(id);
    for (int attempt = 0; attempt < RedisStore::kExtendAttempts; ++attempt) {
      IDEM_ASSIGN_OR_RETURN(std::optional<std::string> value, Get(id, key));
      if (!value) {
        watch_.Poke();  // Evicted, perhaps.
        return false;
      }
      IDEM_ASSIGN_OR_RETURN(Record record,
                            redis::DecodeValue(id, display_, *value));
      const std::optional<TimePoint> until =
          RenewedLockUntil(record, token, now, lock_timeout);
      if (!until) return false;
      if (*until == record.locked_until) return true;
      record.locked_until = *until;
      const std::string renewed = EncodeRecord(record);
      const std::array<std::string_view, 2> args = {redis::Header(*value),
                                                    renewed};
      IDEM_ASSIGN_OR_RETURN(Reply reply,
                            RunScript(redis::ExtendLockScript(), key, args,
                                      /*wait=*/true, /*resends=*/1));
      const long long verdict = IntegerReply(*reply);
      if (verdict != 2) return verdict == 1;
    }
    return MakeError(ErrorCode::kUnavailable,
                     Prefix() + "extend lock: the record changed under " +
                         std::to_string(RedisStore::kExtendAttempts) +
                         " attempts in a row");
  }

  Result<bool> Revoke(const RecordId& id) {
    const std::string key = Key(id);
    IDEM_ASSIGN_OR_RETURN(Reply reply, RunCommand(key, {"DEL", key}));
    return IntegerReply(*reply) > 0;
  }

  // The stored record, expired or not.
  Result<std::optional<Record>> Read(const RecordId& id) {
    IDEM_ASSIGN_OR_RETURN(std::optional<std::string> value, Get(id, Key(id)));
    if (!value) return std::optional<Record>();
    IDEM_ASSIGN_OR_RETURN(Record record,
                          redis::DecodeValue(id, display_, *value));
    return std::optional<Record>(std::move(record));
  }

  Result<std::optional<Record>> Inspect(const RecordId& id, TimePoint now) {
    IDEM_ASSIGN_OR_RETURN(auto record, Read(id));
    if (record && record->Expired(now)) record.reset();
    return record;
  }

  // Expiry is read from each value's head (ScanHeads); the script deletes
  // only if the header is still the one read, so a record claimed again,
  // completed or renewed since is kept. Damaged heads are left alone.
  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit) {
    std::size_t purged = 0;
    if (limit == 0) return purged;
    IDEM_RETURN_IF_ERROR(redis::ScanHeads(
        *router_, pattern_, display_,
        [&](std::string_view key, std::string_view head) -> Result<bool> {
          const std::optional<TimePoint> expires_at = PeekExpiresAt(head);
          if (!expires_at || *expires_at > now) return true;
          const std::array<std::string_view, 1> args = {redis::Header(head)};
          IDEM_ASSIGN_OR_RETURN(
              Reply done, RunScript(redis::PurgeScript(), std::string(key),
                                    args, /*wait=*/false, /*resends=*/0));
          return !(IntegerReply(*done) == 1 && ++purged == limit);
        }));
    return purged;
  }

  Result<std::optional<StoreStats>> Stats(TimePoint now) {
    IDEM_ASSIGN_OR_RETURN(
        StoreStats stats,
        redis::CountRecords(*router_, pattern_, display_, now));
    return std::optional<StoreStats>(stats);
  }

  // The asynchronous calls (redis_async_calls.h), on one server only: a
  // cluster's go where the slot map says, which the loop does not follow.
  bool async_calls() const { return !o_.cluster; }
  redis::AsyncCalls& Async() { return async_.Get(); }
  // Answers the calls in flight (kUnavailable) and stops the loop.
  void StopAsync() { async_.Stop(); }

  StoreInfo Info() const {
    return {.name = o_.cluster ? "redis-cluster" : "redis",
            .durable = watch_.durable(),
            .shared_across_processes = true,
            .calls_may_block = true,
            .max_concurrent_calls = o_.pool_size,
            .acquire_timeout = o_.acquire_timeout,
            .async_calls = async_calls()};
  }

  void SetReclaimHook(std::function<void(int)> hook) {
    reclaim_hook_ = std::move(hook);
  }

 private:
  // A completion whose record is gone, not taken over: evicted (a policy
  // turned evicting, which asks for a check now) or deleted (revoked,
  // DEL by hand). Still "claim lost" (false) to the caller.
  bool Vanished(const RecordId& id) {
    watch_.Poke();
    if (log_) {
      log_(LogLevel::kWarning,
           Prefix() +
               "complete: the record vanished: evicted or deleted "
               "(not taken over by another request), record " +
               id.ToHex());
    }
    return false;
  }

  Result<std::optional<std::string>> Get(const RecordId& id,
                                         const std::string& key) {
    return redis::FoundValue(id, display_, RunCommand(key, {"GET", key}));
  }

  // The claim's SET NX GET: nullopt when it set the key, else the value in
  // the way. A full server (-OOM) refuses every SET, even one that would
  // not write, so a GET reads the value in the way instead: replays and
  // in-progress answers go on while the server is full; a free key stays
  // kResourceExhausted.
  Result<std::optional<std::string>> SetOrGet(const RecordId& id,
                                              const std::string& key,
                                              const Command& set) {
    Result<Reply> reply =
        runner_.RunCommand(key, set, /*wait=*/true, /*resends=*/1);
    if (redis::SetRefusedAsFull(reply)) {
      IDEM_ASSIGN_OR_RETURN(std::optional<std::string> value, Get(id, key));
      if (!value) return tl::unexpected(reply.error());
      return value;
    }
    return redis::FoundValue(id, display_, std::move(reply));
  }

  std::unique_ptr<redis::AsyncCalls> MakeAsync() {
    return std::make_unique<redis::AsyncCalls>(
        redis::AsyncCalls::Context{
            .runner = &runner_,
            .memo = &memo_,
            .display = display_,
            .timeout = o_.timeout,
            .claim_attempts = RedisStore::kClaimAttempts,
            .vanished = [this](const RecordId& id) { return Vanished(id); },
            .reclaim_hook = &reclaim_hook_},
        redis::Endpoint{o_.nodes[0].host, o_.nodes[0].port},
        redis::ConnectOptions{.user = o_.user,
                              .password = o_.password,
                              .db = o_.db,
                              .timeout = o_.timeout});
  }

  const RedisStoreOptions o_;
  const std::string display_;
  const LogSink log_;
  const std::unique_ptr<redis::Router> router_;
  redis::ScriptRunner runner_;
  const std::string pattern_;  // SCAN MATCH's, for the store's keys.
  redis::ServerWatch watch_;   // After router_: stopped before it goes.
  ClaimMemo memo_;
  std::function<void(int)> reclaim_hook_;  // Set before use, by tests only.
  // Last: its calls use the rest.
  redis::LazyAsyncCalls async_{[this] { return MakeAsync(); }};
};

// The boundary's context is the Impl's prefix without its ": ".
RedisStore::RedisStore(std::unique_ptr<Impl> impl)
    : StoreBoundary(impl->Prefix().substr(0, impl->Prefix().size() - 2)),
      impl_(std::move(impl)) {}

Status RedisStore::BeforeCall(std::string_view op) { return impl_->Ready(op); }

void RedisStore::AfterError(const Error& error) {
  if (error.code() == ErrorCode::kResourceExhausted ||
      error.code() == ErrorCode::kInternal) {
    impl_->Poke();
  }
}

// The calls in flight are answered while the store is whole (their
// errors reach AfterError, which reads impl_).
RedisStore::~RedisStore() { impl_->StopAsync(); }

Result<std::unique_ptr<RedisStore>> RedisStore::Open(
    const RedisStoreOptions& options, const StoreOptions& store_options) {
  std::string display = options.cluster ? "redis-cluster://" : "redis://";
  for (std::size_t i = 0; i < options.nodes.size(); ++i) {
    display += (i == 0 ? "" : ",") + options.nodes[i].host + ":" +
               std::to_string(options.nodes[i].port);
  }
  return OpenNamed(options, store_options, std::move(display));
}

Result<std::unique_ptr<RedisStore>> RedisStore::OpenNamed(
    const RedisStoreOptions& options, const StoreOptions& store_options,
    std::string display) {
  IDEM_RETURN_IF_ERROR(redis::ValidateOptions(options));
  return CatchExceptions(
      [&] { return display + ": open"; },
      [&]() -> Result<std::unique_ptr<RedisStore>> {
        auto impl = std::make_unique<Impl>(options, display, store_options.log);
        IDEM_RETURN_IF_ERROR(impl->Start());
        return std::unique_ptr<RedisStore>(new RedisStore(std::move(impl)));
      });
}

Result<ClaimResult> RedisStore::DoClaim(const RecordId& id,
                                        const Fingerprint& fp, TimePoint now,
                                        Duration ttl, Duration lock_timeout) {
  return impl_->Claim(id, fp, now, ttl, lock_timeout);
}

Result<bool> RedisStore::DoComplete(const RecordId& id, const Token& token,
                                    const Response& response) {
  return impl_->Complete(id, token, response);
}

void RedisStore::DoClaimAsync(const RecordId& id, const Fingerprint& fp,
                              TimePoint now, Duration ttl,
                              Duration lock_timeout,
                              StoreCallback<ClaimResult> done) {
  if (!impl_->async_calls()) {
    return StoreBoundary::DoClaimAsync(id, fp, now, ttl, lock_timeout,
                                       std::move(done));
  }
  impl_->Async().Claim(id, impl_->Key(id), fp, now, ttl, lock_timeout,
                       std::move(done));
}

void RedisStore::DoCompleteAsync(const RecordId& id, const Token& token,
                                 std::shared_ptr<const Response> response,
                                 StoreCallback<bool> done) {
  if (!impl_->async_calls()) {
    return StoreBoundary::DoCompleteAsync(id, token, std::move(response),
                                          std::move(done));
  }
  impl_->Async().Complete(id, impl_->Key(id), token, std::move(response),
                          std::move(done));
}

Result<bool> RedisStore::DoRelease(const RecordId& id, const Token& token) {
  return impl_->Release(id, token);
}

Result<bool> RedisStore::DoRevoke(const RecordId& id) {
  return impl_->Revoke(id);
}

Result<bool> RedisStore::DoExtendLock(const RecordId& id, const Token& token,
                                      TimePoint now, Duration lock_timeout) {
  return impl_->ExtendLock(id, token, now, lock_timeout);
}

Result<std::optional<StoreStats>> RedisStore::DoStats(TimePoint now) {
  return impl_->Stats(now);
}

Result<std::optional<Record>> RedisStore::DoInspect(const RecordId& id,
                                                    TimePoint now) {
  return impl_->Inspect(id, now);
}

Result<std::size_t> RedisStore::DoPurgeExpired(TimePoint now,
                                               std::size_t limit) {
  return impl_->PurgeExpired(now, limit);
}

StoreInfo RedisStore::Info() const { return impl_->Info(); }

void RedisStoreTestPeer::SetReclaimHook(RedisStore& store,
                                        std::function<void(int)> hook) {
  store.impl_->SetReclaimHook(std::move(hook));
}

std::string RedisStore::KeyOf(const RecordId& id) const {
  return impl_->Key(id);
}

Result<bool> RedisStoreTestPeer::SetIfAbsent(RedisStore& store,
                                             std::string_view key,
                                             std::string_view value,
                                             std::chrono::milliseconds ttl) {
  return store.Call("set", [&]() -> Result<bool> {
    const std::string k(key), ms = std::to_string(ttl.count());
    IDEM_ASSIGN_OR_RETURN(
        Reply reply,
        store.impl_->RunCommand(k, {"SET", k, value, "NX", "PX", ms}));
    return reply->type == REDIS_REPLY_STATUS;  // OK; nil when present.
  });
}

}  // namespace idem
