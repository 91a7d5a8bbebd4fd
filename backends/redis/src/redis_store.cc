// The Redis store's operations; see redis_store.h for its contract, data
// layout and timeouts, redis_scripts.h for the scripts, redis_record.h for
// the value and its decoding, redis_options.h for the options' ranges,
// redis_router.h and redis_cluster.h for where commands go,
// redis_script_runner.h for how a script or command is sent and answered.
//
// Why a claim is a plain command: on Redis a script's fixed cost is most of
// a claim. Measured with INFO commandstats (8 clients, fresh keys), the
// former claim script (EXISTS, a seven-field HSET, PEXPIRE: each
// redis.call goes through a fake client) took 6.7 us of server time per
// call against 2.8 us for SET NX PX, on a round trip of about 10 us, so a
// claim could not stay within 1.5x of the raw write (issue #11). SET key
// value NX GET PX ttl costs what SET NX PX does: it claims a free key (the
// common case) and returns the value in the way otherwise, on which C++
// decides with ClaimBlockedBy, on exact nanoseconds. Only a record that
// no longer blocks (expired, or its lock timed out) is replaced by a
// script, a compare-and-set on the header read, so that two claims over
// the same old record cannot both win. That is why a record is one string
// value (the codec's bytes) and not a hash: SET NX GET claims strings, and
// the scripts that remain need only its 67-byte header.
//
// Why a Redis TTL of expires_at - now rather than PEXPIREAT expires_at:
// records' times are on the caller's clock, which is the system clock in
// production (where both are the same up to clock skew between the
// application's hosts and Redis, which the relative form is immune to)
// but a ManualClock years in the past in tests, where an absolute expiry
// would delete every record at once.

#include "idem/redis_store.h"
#include "redis_store_test_peer.h"

#include <array>
#include <functional>
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
using redis::TtlMs;

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
  // changed since it was read: then the SET is tried again.
  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) {
    const Record fresh = NewClaimRecord(fp, now, ttl, lock_timeout);
    const std::string value = EncodeRecord(fresh);
    const std::string ttl_ms = TtlMs(now, fresh.expires_at);
    const std::string key = Key(id);
    Command set = {"SET", key, value, "NX", "GET"};
    if (ttl_ms != "0") set.insert(set.end(), {"PX", ttl_ms});
    for (int attempt = 0; attempt < RedisStore::kClaimAttempts; ++attempt) {
      IDEM_ASSIGN_OR_RETURN(std::optional<std::string> found,
                            SetOrGet(id, key, set));
      // Free, or byte for byte this claim's record: its own SET, resent
      // after the reply was lost (a token is new for every claim).
      if (!found || *found == value) return Acquired(id, fresh, false);
      IDEM_ASSIGN_OR_RETURN(Record existing,
                            redis::DecodeValue(id, display_, *found));
      if (auto blocked = ClaimBlockedBy(existing, fp, now)) {
        return std::move(*blocked);
      }
      if (reclaim_hook_) reclaim_hook_(attempt);
      const std::array<std::string_view, 3> args = {redis::Header(*found),
                                                    value, ttl_ms};
      IDEM_ASSIGN_OR_RETURN(Reply reply,
                            RunScript(redis::ReclaimScript(), key, args,
                                      /*wait=*/true, /*resends=*/1));
      if (IntegerReply(*reply) == 1) {
        return Acquired(id, fresh, /*takeover=*/!existing.Expired(now));
      }
    }
    // Lost every race (store.h): in progress elsewhere, retry later.
    ClaimResult busy;
    busy.outcome = ClaimOutcome::kInProgress;
    busy.locked_until = now;
    return busy;
  }

  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) {
    std::optional<ClaimFields> fields = memo_.Take(token);
    if (!fields || fields->id != id) {
      IDEM_ASSIGN_OR_RETURN(auto record, Read(id));
      if (!record) return Vanished(id);
      if (!record->HeldBy(token)) return false;
      fields = ClaimFields{id, record->fingerprint, record->locked_until,
                           record->expires_at};
    }
    const Record held{.state = RecordState::kInProgress,
                      .fingerprint = fields->fingerprint,
                      .token = token,
                      .locked_until = fields->locked_until,
                      .expires_at = fields->expires_at};
    // The call id lets a resend of this call recognise its own write.
    std::string value = EncodeCompleted(held, response);
    value += NewToken().view();
    const std::array<std::string_view, 2> args = {token.view(), value};
    IDEM_ASSIGN_OR_RETURN(Reply reply,
                          RunScript(redis::CompleteScript(), Key(id), args,
                                    /*wait=*/true, /*resends=*/1));
    if (IntegerReply(*reply) == 3) return Vanished(id);
    return IntegerReply(*reply) == 1;
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

  StoreInfo Info() const {
    return {.name = o_.cluster ? "redis-cluster" : "redis",
            .durable = watch_.durable(),
            .shared_across_processes = true,
            .calls_may_block = true,
            .max_concurrent_calls = o_.pool_size,
            .acquire_timeout = o_.acquire_timeout};
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

  ClaimResult Acquired(const RecordId& id, const Record& fresh, bool takeover) {
    memo_.Remember(fresh.token, {id, fresh.fingerprint, fresh.locked_until,
                                 fresh.expires_at});
    return ClaimAcquired(fresh, takeover);
  }

  Result<std::optional<std::string>> Get(const RecordId& id,
                                         const std::string& key) {
    IDEM_ASSIGN_OR_RETURN(
        Reply reply,
        redis::OfRecord(id, display_, RunCommand(key, {"GET", key})));
    return redis::ValueOf(*reply, display_);
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
    if (!reply && reply.error().code() == ErrorCode::kResourceExhausted) {
      IDEM_ASSIGN_OR_RETURN(std::optional<std::string> value, Get(id, key));
      if (!value) return tl::unexpected(reply.error());
      return value;
    }
    IDEM_ASSIGN_OR_RETURN(Reply r,
                          redis::OfRecord(id, display_, std::move(reply)));
    return redis::ValueOf(*r, display_);
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

RedisStore::~RedisStore() = default;

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
