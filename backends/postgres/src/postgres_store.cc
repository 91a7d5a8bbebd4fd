// The PostgreSQL store: its calls, each on one pooled connection.
//
// Where the parts live: the statements' text and why the claim has its
// shape in postgres_sql.h, opening connections and the round trip with its
// deadlines in postgres_connection.cc, the pool in postgres_pool.cc, the
// schema and its versions in postgres_schema.cc, the options' ranges and
// the URI parser in postgres_store_uri.cc, a lazy store's first connection
// in postgres_lazy_connect.cc, the claims remembered for a
// one-statement Complete in idem/store/claim_memo.h, the calls that need only a
// connection (reading a row, renewal, stats, purge) in
// postgres_row_calls.cc, transactions on a lent connection in
// postgres_transaction.cc.
//
// A claim inserts a fresh record if the id is free. When a record stood in
// the way it reads the row and decides with ClaimBlockedBy; a claimable row
// is taken over with the conditional upsert. If the row went away in
// between (released, revoked, purged) or changed (completed, taken over by
// another claim), the claim starts again, at most kClaimAttempts times; a
// claim that keeps losing such races reports kInProgress, as every store
// does (store.h: kUnavailable would make a fail-open Guard run the handler
// unprotected beside the request that is plainly working on the key).
//
// The columns are what SQL needs to decide a claim, a completion and a purge
// inside the database; `record` is the whole record in the record codec's
// layout, checksummed, and is what every read returns, after checking that
// it agrees with the columns. Times are the `now` the caller passes (the
// Guard's Clock), never the server's now(), so tests can use a ManualClock.

#include "idem/postgres_store.h"
#include "postgres_store_test_peer.h"

#include <libpq-fe.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/store/catch_exceptions.h"
#include "idem/store/claim_memo.h"
#include "idem/store/lazy_connect.h"
#include "idem/store/record_codec.h"
#include "postgres_async_calls.h"
#include "postgres_binary.h"
#include "postgres_connection.h"
#include "postgres_options.h"
#include "postgres_pool.h"
#include "postgres_row_calls.h"
#include "postgres_schema.h"
#include "postgres_sql.h"
#include "postgres_transaction_target.h"

namespace idem {

using postgres_internal::Affected;
using postgres_internal::BigEndian64;
using postgres_internal::Connection;
using postgres_internal::ConnectionSettings;
using postgres_internal::PgResult;
using postgres_internal::Pool;
using postgres_internal::SelectRecord;
using postgres_internal::View;

class PostgresStore::Impl {
 public:
  Impl(const PostgresStoreOptions& options, const std::string& display,
       LogSink log)
      : settings_(MakeSettings(options, display)),
        pool_(settings_),
        connect_(settings_.prefix, std::move(log)),
        async_({.prefix = settings_.prefix,
                .queue_timeout = QueueTimeout(settings_.options),
                .acquire = [this] { return Acquire(); },
                .claims = claims_,
                .claim_hook = claim_hook_}) {
    target_.prefix = Prefix();
  }
  // The asynchronous calls' thread answers what is queued first (it needs
  // the pool and the connecting thread); the connecting thread uses every
  // other member: it ends next.
  ~Impl() {
    async_.Join();
    connect_.Stop();
  }

  const std::string& table() const { return settings_.options.table; }
  const PostgresStoreOptions& options() const { return settings_.options; }
  const std::string& Prefix() const { return settings_.prefix; }

  // Creates or migrates the schema (or checks it: create = false) on the
  // first connection, which stays in the pool; then the store is connected.
  // In Open, or on the lazy store's connecting thread while every call
  // fails at Acquire's gate.
  Status Start() {
    IDEM_ASSIGN_OR_RETURN(auto lease, pool_.Acquire());
    IDEM_RETURN_IF_ERROR(
        options().create
            ? postgres_internal::CreateOrMigrate(*lease, table(), Prefix())
            : postgres_internal::CheckExisting(*lease, table(), Prefix()));
    IDEM_ASSIGN_OR_RETURN(
        auto found, postgres_internal::FindTransactionTarget(*lease, table()));
    target_.database = std::move(found.database);
    target_.table = std::move(found.table);
    // Every statement names the table with its schema, as the completion on
    // an application's connection does: on a connection lent to an
    // application's transaction (PostgresTransaction(store)) a SET LOCAL
    // search_path, or a TEMP table of the same name, must not redirect the
    // store's statements. Nothing is prepared yet, and no other thread has
    // the store.
    settings_.sql = postgres_internal::BuildSql(target_.table);
    target_.recall = [this](const RecordId& id, const Token& token) {
      return claims_.RecallRecord(id, token);
    };
    return {};
  }

  // Eager: Start, in Open. Lazy: Start on a thread, retried.
  Status Connect() {
    if (options().connect == PostgresConnect::kEager) {
      IDEM_RETURN_IF_ERROR(Start());
      connect_.MarkConnected();
    } else {
      // On the connecting thread, as in Open, nothing may throw past Start.
      connect_.Begin(
          [this] {
            return CatchExceptions([&] { return Prefix() + "connect"; },
                                   [&] { return Start(); });
          },
          PostgresStore::kLazyRetryFirst, PostgresStore::kLazyRetryMax);
    }
    return {};
  }

  Status Connected() const { return connect_.Connected(); }

  const PostgresStore::TransactionTarget& target() const { return target_; }

  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) {
    const Record fresh = NewClaimRecord(fp, now, ttl, lock_timeout);
    IDEM_ASSIGN_OR_RETURN(auto lease, Acquire());
    IDEM_ASSIGN_OR_RETURN(ClaimResult result,
                          postgres_internal::ClaimOn(*lease, Prefix(), id,
                                                     fresh, now, claim_hook_));
    if (result.outcome == ClaimOutcome::kAcquired) {
      claims_.Remember(fresh.token,
                       {id, fp, fresh.locked_until, fresh.expires_at});
    }
    return result;
  }

  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) {
    IDEM_ASSIGN_OR_RETURN(auto lease, Acquire());
    IDEM_ASSIGN_OR_RETURN(const bool stored,
                          CompleteOn(*lease, id, token, response, "complete"));
    claims_.Forget(token);
    return stored;
  }

  void ClaimAsync(const RecordId& id, const Fingerprint& fp, TimePoint now,
                  Duration ttl, Duration lock_timeout,
                  StoreCallback<ClaimResult> done) {
    async_.Claim(id, fp, now, ttl, lock_timeout, std::move(done));
  }

  void CompleteAsync(const RecordId& id, const Token& token,
                     std::shared_ptr<const Response> response,
                     StoreCallback<bool> done) {
    async_.Complete(id, token, std::move(response), std::move(done));
  }

  // Runs `call` on the asynchronous calls' thread (PostgresStoreTestPeer).
  void PostToAsyncThread(std::function<void()> call) {
    async_.PostForTest(std::move(call));
  }
  std::size_t DeepestAsyncPipeline() {
    std::promise<std::size_t> deepest;
    async_.PostForTest(
        [&] { deepest.set_value(async_.DeepestPipelineForTest()); });
    return deepest.get_future().get();
  }

  // PostgresTransaction(store): a pool connection for the application's
  // transaction, counted as lent until GiveBack.
  Result<std::unique_ptr<PostgresStore::Lent>> Lend() {
    IDEM_ASSIGN_OR_RETURN(auto lease, Acquire());
    auto lent = std::make_unique<PostgresStore::Lent>(std::move(lease));
    std::lock_guard<std::mutex> lock(lent_mu_);
    lent_.push_back(lent.get());
    return lent;
  }

  // Ends the loan; the pool takes the connection back if it is idle and
  // healthy, else closes it (Pool::Return).
  void GiveBack(std::unique_ptr<PostgresStore::Lent> lent) {
    {
      std::lock_guard<std::mutex> lock(lent_mu_);
      std::erase(lent_, lent.get());
    }
    lent.reset();
  }

  PostgresStore::Lent* FindLent(PGconn* conn) {
    std::lock_guard<std::mutex> lock(lent_mu_);
    for (PostgresStore::Lent* lent : lent_) {
      if (lent->lease->raw() == conn) return lent;
    }
    return nullptr;
  }

  // The completion on a lent connection, inside the application's open
  // transaction: the store's own prepared statements. The claim is not
  // forgotten: if the transaction rolls back, it is still held, and its
  // Finish or Release needs no read either.
  Result<TransactionCompletion> CompleteOnLent(PostgresStore::Lent& lent,
                                               const RecordId& id,
                                               const Token& token,
                                               const Response& stored) {
    constexpr std::string_view kOp = "complete in transaction";
    IDEM_RETURN_IF_ERROR(postgres_internal::CheckTransactionOpen(
        lent.lease->raw(), Prefix(), kOp));
    IDEM_ASSIGN_OR_RETURN(const bool stored_now,
                          CompleteOn(*lent.lease, id, token, stored, kOp));
    return stored_now ? TransactionCompletion::kStored
                      : TransactionCompletion::kClaimLost;
  }

  Result<bool> Release(const RecordId& id, const Token& token) {
    IDEM_ASSIGN_OR_RETURN(auto lease, Acquire());
    IDEM_ASSIGN_OR_RETURN(const PgResult r,
                          lease->Run(postgres_internal::kRelease,
                                     {id.view(), token.view()}, "release"));
    claims_.Forget(token);
    return Affected(r) == 1;
  }

  Result<bool> Revoke(const RecordId& id) {
    IDEM_ASSIGN_OR_RETURN(auto lease, Acquire());
    IDEM_ASSIGN_OR_RETURN(
        const PgResult r,
        lease->Run(postgres_internal::kRevoke, {id.view()}, "revoke"));
    // A remembered claim of this id stays in the memo until its slot is
    // reused: harmless, since its Complete's UPDATE finds no row.
    return Affected(r) == 1;
  }

  Result<bool> ExtendLock(const RecordId& id, const Token& token, TimePoint now,
                          Duration lock_timeout) {
    IDEM_ASSIGN_OR_RETURN(auto lease, Acquire());
    return postgres_internal::ExtendLockOn(*lease, Prefix(), id, token, now,
                                           lock_timeout);
  }

  Result<std::optional<StoreStats>> Stats(TimePoint now) {
    IDEM_ASSIGN_OR_RETURN(auto lease, Acquire());
    return postgres_internal::StatsOn(*lease, now);
  }

  void SetClaimHook(ClaimAttemptHook hook) { claim_hook_ = std::move(hook); }

  Result<std::optional<Record>> Inspect(const RecordId& id, TimePoint now) {
    IDEM_ASSIGN_OR_RETURN(auto lease, Acquire());
    IDEM_ASSIGN_OR_RETURN(auto row,
                          SelectRecord(*lease, Prefix(), id, "inspect"));
    if (!row.has_value() || row->Expired(now)) return std::optional<Record>();
    return row;
  }

  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit) {
    if (limit == 0) return std::size_t{0};
    IDEM_ASSIGN_OR_RETURN(auto lease, Acquire());
    return postgres_internal::PurgeExpiredOn(*lease, now, limit);
  }

 private:
  // How long an asynchronous call may wait for the store's thread: as long
  // as a synchronous one waits for a connection, or, when that is 0 (no
  // wait), one round trip's bound, the time a call ahead of it may take.
  static std::chrono::milliseconds QueueTimeout(
      const PostgresStoreOptions& options) {
    if (options.acquire_timeout.count() > 0) return options.acquire_timeout;
    return options.statement_timeout + PostgresStore::kClientGrace;
  }

  // The statements' text comes in Start, once the table's schema is known.
  static ConnectionSettings MakeSettings(const PostgresStoreOptions& options,
                                         const std::string& display) {
    return ConnectionSettings{
        .options = options,
        .prefix = "postgres store '" + display + "' table " +
                  postgres_internal::Quote(options.table) + ": ",
        .sql = {}};
  }

  // A pooled connection, once the store is connected. When none is free,
  // the error says how many are lent to applications' transactions, the
  // likeliest reason.
  Result<Pool::Lease> Acquire() {
    IDEM_RETURN_IF_ERROR(connect_.Connected());
    auto lease = pool_.Acquire();
    if (lease || lease.error().code() != ErrorCode::kUnavailable) return lease;
    std::size_t lent = 0;
    {
      std::lock_guard<std::mutex> lock(lent_mu_);
      lent = lent_.size();
    }
    if (lent == 0) return lease;
    return MakeError(ErrorCode::kUnavailable,
                     lease.error().message() + "; " + std::to_string(lent) +
                         " lent to open PostgresTransaction(store) "
                         "transactions");
  }

  // Completes the record of `id` on `c` if `token` still holds it: one
  // UPDATE when this store made the claim (idem/store/claim_memo.h), else a
  // SELECT of the row first. On a pool connection in autocommit, or inside
  // an application's transaction on a lent one.
  Result<bool> CompleteOn(Connection& c, const RecordId& id, const Token& token,
                          const Response& response, std::string_view op) {
    return postgres_internal::CompleteOn(c, Prefix(), id, token, response,
                                         claims_.RecallRecord(id, token), op);
  }

  // Set by MakeSettings, its statements by Start; read-only once connected.
  ConnectionSettings settings_;
  PostgresStore::TransactionTarget target_;  // Prefix at once; rest by Start.
  Pool pool_;
  std::mutex lent_mu_;
  // Open PostgresTransaction(store) loans. Guarded by lent_mu_.
  std::vector<PostgresStore::Lent*> lent_;
  ClaimMemo claims_;
  ClaimAttemptHook claim_hook_;  // Set before use, by tests only.
  LazyConnect connect_;
  // Last: its thread uses the members above until it is joined.
  postgres_internal::AsyncCalls async_;
};

// The boundary's context is the Impl's prefix without its ": ".
PostgresStore::PostgresStore(std::unique_ptr<Impl> impl)
    : StoreBoundary(impl->Prefix().substr(0, impl->Prefix().size() - 2)),
      impl_(std::move(impl)) {}

PostgresStore::~PostgresStore() = default;

Result<std::unique_ptr<PostgresStore>> PostgresStore::Open(
    const PostgresStoreOptions& options, const StoreOptions& store_options) {
  return OpenNamed(options, store_options,
                   postgres_internal::DisplayName(options));
}

Result<std::unique_ptr<PostgresStore>> PostgresStore::OpenNamed(
    const PostgresStoreOptions& options, const StoreOptions& store_options,
    std::string display) {
  return CatchExceptions(
      [&] { return "postgres store '" + display + "': open"; },
      [&]() -> Result<std::unique_ptr<PostgresStore>> {
        IDEM_RETURN_IF_ERROR(
            postgres_internal::ValidateOptions(options, display));
        auto impl = std::make_unique<Impl>(options, display, store_options.log);
        IDEM_RETURN_IF_ERROR(impl->Connect());
        return std::unique_ptr<PostgresStore>(
            new PostgresStore(std::move(impl)));
      });
}

Result<ClaimResult> PostgresStore::DoClaim(const RecordId& id,
                                           const Fingerprint& fp, TimePoint now,
                                           Duration ttl,
                                           Duration lock_timeout) {
  return impl_->Claim(id, fp, now, ttl, lock_timeout);
}

Result<bool> PostgresStore::DoComplete(const RecordId& id, const Token& token,
                                       const Response& response) {
  return impl_->Complete(id, token, response);
}

void PostgresStore::DoClaimAsync(const RecordId& id, const Fingerprint& fp,
                                 TimePoint now, Duration ttl,
                                 Duration lock_timeout,
                                 StoreCallback<ClaimResult> done) {
  impl_->ClaimAsync(id, fp, now, ttl, lock_timeout, std::move(done));
}

void PostgresStore::DoCompleteAsync(const RecordId& id, const Token& token,
                                    std::shared_ptr<const Response> response,
                                    StoreCallback<bool> done) {
  impl_->CompleteAsync(id, token, std::move(response), std::move(done));
}

Result<bool> PostgresStore::DoRelease(const RecordId& id, const Token& token) {
  return impl_->Release(id, token);
}

Result<std::optional<Record>> PostgresStore::DoInspect(const RecordId& id,
                                                       TimePoint now) {
  return impl_->Inspect(id, now);
}

Result<bool> PostgresStore::DoRevoke(const RecordId& id) {
  return impl_->Revoke(id);
}

Result<bool> PostgresStore::DoExtendLock(const RecordId& id, const Token& token,
                                         TimePoint now, Duration lock_timeout) {
  return impl_->ExtendLock(id, token, now, lock_timeout);
}

Result<std::optional<StoreStats>> PostgresStore::DoStats(TimePoint now) {
  return impl_->Stats(now);
}

void PostgresStoreTestPeer::PostToAsyncThread(PostgresStore& store,
                                              std::function<void()> call) {
  store.impl_->PostToAsyncThread(std::move(call));
}

std::size_t PostgresStoreTestPeer::DeepestAsyncPipeline(PostgresStore& store) {
  return store.impl_->DeepestAsyncPipeline();
}

void PostgresStoreTestPeer::SetClaimAttemptHook(PostgresStore& store,
                                                ClaimAttemptHook hook) {
  store.impl_->SetClaimHook(std::move(hook));
}

Result<std::size_t> PostgresStore::DoPurgeExpired(TimePoint now,
                                                  std::size_t limit) {
  return impl_->PurgeExpired(now, limit);
}

StoreInfo PostgresStore::Info() const {
  return StoreInfo{.name = "postgres",
                   .durable = true,
                   .shared_across_processes = true,
                   .max_concurrent_calls = impl_->options().pool_size,
                   .acquire_timeout = impl_->options().acquire_timeout,
                   .async_calls = true};
}

const std::string& PostgresStore::table() const { return impl_->table(); }

Status PostgresStore::Connected() const { return impl_->Connected(); }

const PostgresStore::TransactionTarget& PostgresStore::transaction_target()
    const {
  return impl_->target();
}

Result<std::unique_ptr<PostgresStore::Lent>> PostgresStore::Lend() {
  return Call("begin", [&] { return impl_->Lend(); });
}

void PostgresStore::GiveBack(std::unique_ptr<Lent> lent) {
  impl_->GiveBack(std::move(lent));
}

PostgresStore::Lent* PostgresStore::FindLent(PGconn* conn) {
  return impl_->FindLent(conn);
}

Result<TransactionCompletion> PostgresStore::CompleteOnLent(
    Lent& lent, const RecordId& id, const Token& token,
    const Response& stored) {
  return Call("complete in transaction",
              [&] { return impl_->CompleteOnLent(lent, id, token, stored); });
}

}  // namespace idem
