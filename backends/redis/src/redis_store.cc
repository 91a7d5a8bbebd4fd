// The Redis store's operations; see redis_store.h for its contract, data
// layout and timeouts, redis_scripts.h for the scripts, redis_record.h for
// the fields' times and decoding, redis_options.h for the options' ranges,
// redis_router.h and redis_cluster.h for where commands go,
// redis_script_runner.h for how a script or command is sent and answered.
//
// Why scripts decide and C++ answers: a claim must read and write one key
// atomically, which on Redis (and on a cluster, where MULTI/WATCH would
// pin a connection per key) is a script. The script decides only whether
// to write, on the fields it can compare cheaply; when a record is in the
// way it returns that record, and the answer (mismatch, completed,
// in progress) comes from the core's ClaimBlockedBy like on every store,
// evaluated on the same microsecond-rounded times the script compared.
//
// Why a Redis TTL of expires_at - now rather than PEXPIREAT expires_at:
// records' times are on the caller's clock, which is the system clock in
// production (where both are the same up to clock skew between the
// application's hosts and Redis, which the relative form is immune to)
// but a ManualClock years in the past in tests, where an absolute expiry
// would delete every record at once.

#include "idem/redis_store.h"

#include <algorithm>
#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/catch_exceptions.h"
#include "idem/claim_memo.h"
#include "idem/record_codec.h"
#include "idem/store_checks.h"
#include "idem/token.h"
#include "redis_connection.h"
#include "redis_options.h"
#include "redis_record.h"
#include "redis_router.h"
#include "redis_scan.h"
#include "redis_script_runner.h"
#include "redis_scripts.h"
#include "redis_server_checks.h"

namespace idem {
namespace {

using redis::CeilMicros;
using redis::Command;
using redis::FloorMicros;
using redis::FromMicros;
using redis::Reply;
using redis::TtlMs;

// Glob-escapes `text` for SCAN MATCH.
std::string GlobEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

class RedisStore::Impl {
 public:
  Impl(RedisStoreOptions options, std::string display,
       std::unique_ptr<redis::Router> router)
      : o_(std::move(options)),
        display_(std::move(display)),
        router_(std::move(router)),
        runner_(*router_, o_.wait_replicas, o_.wait_timeout, display_) {}

  std::string Prefix() const { return display_ + ": "; }

  template <typename Fn>
  auto Boundary(std::string_view op, Fn&& fn) -> decltype(fn()) {
    return CatchExceptions([&] { return Prefix() + std::string(op); },
                           std::forward<Fn>(fn));
  }

  std::string Key(const RecordId& id) const {
    std::string key = o_.prefix;
    key += '{';
    key += id.ToHex();
    key += '}';
    return key;
  }

  // The safety checks at Open (redis_server_checks.h).
  Status CheckServers(const LogSink& log) {
    IDEM_ASSIGN_OR_RETURN(
        durable_,
        redis::CheckServers(*router_, o_.allow_eviction, Prefix(), log));
    return {};
  }

  Result<Reply> RunScript(const redis::Script& script, const std::string& key,
                          std::span<const std::string_view> args, bool wait,
                          int resends) {
    return runner_.Run(script, key, args, wait, resends);
  }

  Result<Reply> RunCommand(const std::string& key, Command command) {
    return runner_.RunCommand(key, std::move(command));
  }

  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) {
    const Record fresh = NewClaimRecord(fp, now, ttl, lock_timeout);
    const std::int64_t now_us = FloorMicros(now);
    const std::string now_text = std::to_string(now_us);
    const std::string locked = std::to_string(CeilMicros(fresh.locked_until));
    const std::string expires = std::to_string(CeilMicros(fresh.expires_at));
    const std::string encoded = EncodeRecord(fresh);
    const std::string ttl_ms = TtlMs(now, fresh.expires_at);
    const std::array<std::string_view, 7> args = {
        fp.view(), fresh.token.view(), now_text, locked, expires, encoded,
        ttl_ms};
    const std::string key = Key(id);
    IDEM_ASSIGN_OR_RETURN(
        Reply reply, RunScript(redis::ClaimScript(), key, args, /*wait=*/true,
                               /*resends=*/1));
    const redisReply* r = reply.get();
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
      return MakeError(ErrorCode::kInternal,
                       Prefix() + "unexpected reply to the claim script");
    }
    const long long verdict = r->element[0]->integer;
    if (verdict == 1 && r->elements == 2) {
      ClaimResult result;
      result.outcome = ClaimOutcome::kAcquired;
      result.token = fresh.token;
      result.takeover = redis::ReplyText(r->element[1]) == "1";
      result.locked_until = fresh.locked_until;
      memo_.Remember(fresh.token,
                     {id, fp, fresh.locked_until, fresh.expires_at});
      return result;
    }
    if (verdict == 2)
      return tl::unexpected(
          redis::DataLoss(id, display_, "has damaged fields"));
    if (verdict != 0 || r->elements != 7) {
      return MakeError(ErrorCode::kInternal,
                       Prefix() + "unexpected reply to the claim script");
    }
    IDEM_ASSIGN_OR_RETURN(
        Record existing,
        redis::DecodeFields(id, display_,
                            {r->element[2], r->element[3], r->element[4],
                             r->element[5], r->element[6], r->element[1]}));
    // Decide on the times the script compared.
    Record rounded = existing;
    rounded.locked_until = FromMicros(CeilMicros(existing.locked_until));
    rounded.expires_at = FromMicros(CeilMicros(existing.expires_at));
    std::optional<ClaimResult> blocked =
        ClaimBlockedBy(rounded, fp, FromMicros(now_us));
    if (!blocked) {
      // Cannot happen: the script and ClaimBlockedBy compared the same
      // values. Answer as a claim that lost its races does.
      ClaimResult result;
      result.outcome = ClaimOutcome::kInProgress;
      result.locked_until = now;
      return result;
    }
    if (blocked->outcome == ClaimOutcome::kInProgress) {
      blocked->locked_until = existing.locked_until;
    }
    return std::move(*blocked);
  }

  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) {
    std::optional<ClaimFields> fields = memo_.Take(token);
    if (!fields || fields->id != id) {
      IDEM_ASSIGN_OR_RETURN(auto record, Read(id));
      if (!record || !record->HeldBy(token)) return false;
      fields = ClaimFields{id, record->fingerprint, record->locked_until,
                           record->expires_at};
    }
    const Record held{.state = RecordState::kInProgress,
                      .fingerprint = fields->fingerprint,
                      .token = token,
                      .locked_until = fields->locked_until,
                      .expires_at = fields->expires_at};
    const std::string encoded = EncodeCompleted(held, response);
    const Token call = NewToken();
    const std::string locked = std::to_string(CeilMicros(held.locked_until));
    const std::array<std::string_view, 4> args = {token.view(), encoded,
                                                  call.view(), locked};
    IDEM_ASSIGN_OR_RETURN(Reply reply,
                          RunScript(redis::CompleteScript(), Key(id), args,
                                    /*wait=*/true, /*resends=*/1));
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

  // The script writes only if the hash still has what was read; only a
  // renewal of the same claim elsewhere can move l and keep it held (2:
  // read again). Decided on the microsecond times the fields hold.
  Result<bool> ExtendLock(const RecordId& id, const Token& token, TimePoint now,
                          Duration lock_timeout) {
    const std::string key = Key(id);
    const std::string now_text = std::to_string(FloorMicros(now));
    for (int attempt = 0; attempt < RedisStore::kExtendAttempts; ++attempt) {
      IDEM_ASSIGN_OR_RETURN(std::optional<Record> record, Read(id));
      if (!record) return false;
      const std::optional<TimePoint> until =
          RenewedLockUntil(*record, token, now, lock_timeout);
      if (!until) return false;
      const std::string old_l =
          std::to_string(CeilMicros(record->locked_until));
      const std::string new_l = std::to_string(CeilMicros(*until));
      if (new_l == old_l) return true;
      record->locked_until = *until;
      const std::string encoded = EncodeRecord(*record);
      const std::array<std::string_view, 5> args = {token.view(), now_text,
                                                    old_l, new_l, encoded};
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
    const std::string key = Key(id);
    IDEM_ASSIGN_OR_RETURN(Reply reply, RunCommand(key, {"HMGET", key, "s", "f",
                                                        "t", "l", "e", "r"}));
    const redisReply* r = reply.get();
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 6) {
      return MakeError(ErrorCode::kInternal,
                       Prefix() + "unexpected reply to HMGET");
    }
    if (std::all_of(r->element, r->element + 6, redis::IsNil)) {
      return std::optional<Record>();
    }
    IDEM_ASSIGN_OR_RETURN(
        Record record,
        redis::DecodeFields(id, display_,
                            {r->element[0], r->element[1], r->element[2],
                             r->element[3], r->element[4], r->element[5]}));
    return std::optional<Record>(std::move(record));
  }

  Result<std::optional<Record>> Inspect(const RecordId& id, TimePoint now) {
    IDEM_ASSIGN_OR_RETURN(auto record, Read(id));
    if (record && record->Expired(now)) record.reset();
    return record;
  }

  // SCAN MATCH's pattern for the store's keys.
  std::string Pattern() const { return GlobEscape(o_.prefix) + "{*}"; }

  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit) {
    std::size_t purged = 0;
    if (limit == 0) return purged;
    const std::string now_text = std::to_string(FloorMicros(now));
    IDEM_RETURN_IF_ERROR(redis::ScanKeys(
        *router_, Pattern(), display_,
        [&](const std::string&, const redisReply& keys) -> Result<bool> {
          for (std::size_t i = 0; i < keys.elements; ++i) {
            const std::string key(redis::ReplyText(keys.element[i]));
            const std::array<std::string_view, 1> args = {now_text};
            IDEM_ASSIGN_OR_RETURN(Reply done,
                                  RunScript(redis::PurgeScript(), key, args,
                                            /*wait=*/false, /*resends=*/0));
            if (IntegerReply(*done) == 1 && ++purged == limit) return false;
          }
          return true;
        }));
    return purged;
  }

  Result<std::optional<StoreStats>> Stats(TimePoint now) {
    IDEM_ASSIGN_OR_RETURN(
        StoreStats stats,
        redis::CountRecords(*router_, Pattern(), display_, FloorMicros(now)));
    return std::optional<StoreStats>(stats);
  }

  StoreInfo Info() const {
    return {.name = o_.cluster ? "redis-cluster" : "redis",
            .durable = durable_,
            .shared_across_processes = true,
            .calls_may_block = true,
            .max_concurrent_calls = o_.pool_size,
            .acquire_timeout = o_.acquire_timeout};
  }

  redis::Router& router() { return *router_; }

 private:
  // The scripts and DEL return integers; anything else is a bug, and
  // never counts as "done".
  static long long IntegerReply(const redisReply& r) {
    return r.type == REDIS_REPLY_INTEGER ? r.integer : -1;
  }

  const RedisStoreOptions o_;
  const std::string display_;
  const std::unique_ptr<redis::Router> router_;
  redis::ScriptRunner runner_;
  bool durable_ = false;  // Set once at Open.
  ClaimMemo memo_;
};

RedisStore::RedisStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

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
        IDEM_ASSIGN_OR_RETURN(auto router, redis::OpenRouter(options, display));
        auto impl = std::make_unique<Impl>(options, display, std::move(router));
        IDEM_RETURN_IF_ERROR(impl->CheckServers(store_options.log));
        return std::unique_ptr<RedisStore>(new RedisStore(std::move(impl)));
      });
}

Result<ClaimResult> RedisStore::Claim(const RecordId& id, const Fingerprint& fp,
                                      TimePoint now, Duration ttl,
                                      Duration lock_timeout) {
  IDEM_RETURN_IF_ERROR(CheckClaimDurations(impl_->Prefix(), ttl, lock_timeout));
  return impl_->Boundary(
      "claim", [&] { return impl_->Claim(id, fp, now, ttl, lock_timeout); });
}

Result<bool> RedisStore::Complete(const RecordId& id, const Token& token,
                                  const Response& response) {
  return impl_->Boundary("complete",
                         [&] { return impl_->Complete(id, token, response); });
}

Result<bool> RedisStore::Release(const RecordId& id, const Token& token) {
  return impl_->Boundary("release", [&] { return impl_->Release(id, token); });
}

Result<bool> RedisStore::Revoke(const RecordId& id) {
  return impl_->Boundary("revoke", [&] { return impl_->Revoke(id); });
}

Result<bool> RedisStore::ExtendLock(const RecordId& id, const Token& token,
                                    TimePoint now, Duration lock_timeout) {
  IDEM_RETURN_IF_ERROR(CheckLockTimeout(impl_->Prefix(), lock_timeout));
  return impl_->Boundary("extend lock", [&] {
    return impl_->ExtendLock(id, token, now, lock_timeout);
  });
}

Result<std::optional<StoreStats>> RedisStore::Stats(TimePoint now) {
  return impl_->Boundary("stats", [&] { return impl_->Stats(now); });
}

Result<std::optional<Record>> RedisStore::Inspect(const RecordId& id,
                                                  TimePoint now) {
  return impl_->Boundary("inspect", [&] { return impl_->Inspect(id, now); });
}

Result<std::size_t> RedisStore::PurgeExpired(TimePoint now, std::size_t limit) {
  return impl_->Boundary("purge",
                         [&] { return impl_->PurgeExpired(now, limit); });
}

StoreInfo RedisStore::Info() const { return impl_->Info(); }

std::string RedisStore::KeyOf(const RecordId& id) const {
  return impl_->Key(id);
}

Result<bool> RedisStore::SetIfAbsentForBenchmark(
    std::string_view key, std::string_view value,
    std::chrono::milliseconds ttl) {
  return impl_->Boundary("set", [&]() -> Result<bool> {
    const std::string k(key), ms = std::to_string(ttl.count());
    IDEM_ASSIGN_OR_RETURN(
        Reply reply, impl_->RunCommand(k, {"SET", k, value, "NX", "PX", ms}));
    return reply->type == REDIS_REPLY_STATUS;  // OK; nil when present.
  });
}

}  // namespace idem
