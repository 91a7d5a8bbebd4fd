// The RocksDB store; see rocksdb_store.h for its contract.
//
// One column family holds the records, key = the 32-byte record id, value =
// EncodeRecord(record). A read-modify-write holds the id's stripe mutex
// around a Get and a Put/Delete; reads that only look (Inspect, the purge
// scan) take no lock, because a single Get already returns one whole value.
//
// Why mutexes and not RocksDB's TransactionDB with GetForUpdate: one process
// owns the directory, so in-process locks give the same guarantee. Both were
// built and measured on the same workload (the lab notebook of that
// measurement, docs/design/notes/PERFORMANCE_NOTES.md, is in git history): the
// transaction's lock manager, per-transaction allocation and commit
// bookkeeping cost more with one thread and bought nothing a mutex does not.
// Contention on one id serializes on its mutex, as it would on the
// transaction lock.
//
// The parts: rocksdb_options.cc (RocksDB tuning, the URI), rocksdb_directory.cc
// (the checks before RocksDB opens a directory), rocksdb_expiry_filter.cc (the
// compaction filter), rocksdb_purge.cc (PurgeExpired),
// rocksdb_background_errors.cc (a full disk and other background errors),
// rocksdb_info_log.cc (RocksDB's LOG), rocksdb_call.cc (status mapping, the
// ThreadSanitizer boundary).

#include "idem/rocksdb_store.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/status.h>

#include <string>
#include <utility>
#include <vector>

#include "idem/store/catch_exceptions.h"
#include "idem/store/record_codec.h"
#include "idem/token.h"
#include "rocksdb_call.h"
#include "rocksdb_directory.h"
#include "rocksdb_impl.h"
#include "rocksdb_options.h"

namespace idem {

using rocksdb_internal::KeyOf;
using rocksdb_internal::Prefix;
using rocksdb_internal::RocksdbCall;
using rocksdb_internal::StatusError;
using rocksdb_internal::View;

void RocksdbStore::Impl::Close() {
  if (db == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(purge_mu);
    purge_iterator.reset();  // Before the database it reads.
  }
  if (cf != nullptr) {
    // A clean shutdown leaves the records in a table file, so the next
    // open replays no log. On failure the WAL still has every write.
    rocksdb::FlushOptions flush;
    flush.wait = true;
    (void)RocksdbCall([&] { return db->Flush(flush, cf); });
    (void)db->DestroyColumnFamilyHandle(cf);
    cf = nullptr;
  }
  if (default_cf != nullptr) {
    (void)db->DestroyColumnFamilyHandle(default_cf);
    default_cf = nullptr;
  }
  (void)RocksdbCall([&] { return db->Close(); });
  delete db;
  db = nullptr;
}

std::optional<Error> RocksdbStore::Impl::WritesStopped(std::string_view op) {
  std::optional<std::string> why = background_errors->Check(
      [&] { return RocksdbCall([&] { return db->Resume(); }); });
  if (!why) return std::nullopt;
  return Error(ErrorCode::kUnavailable,
               Prefix(path) + std::string(op) + ": " + *why);
}

Result<Record> RocksdbStore::Impl::Decode(const RecordId& id,
                                          std::string_view value) const {
  Result<Record> record = DecodeRecord(value);
  if (record) return record;
  return MakeError(ErrorCode::kDataLoss,
                   Prefix(path) + "record " + id.ToHex() +
                       " does not decode: " + record.error().message());
}

Result<std::optional<Record>> RocksdbStore::Impl::HeldRecord(
    const RecordId& id, std::optional<std::string_view> current,
    const Token& token) const {
  if (!current.has_value()) return std::nullopt;
  IDEM_ASSIGN_OR_RETURN(Record record, Decode(id, *current));
  if (!record.HeldBy(token)) return std::nullopt;
  return record;
}

template <typename T, typename Fn>
Result<T> RocksdbStore::Impl::Update(const RecordId& id, std::string_view op,
                                     Fn&& decide, bool* staged) {
  const rocksdb::Slice key = KeyOf(id);
  const std::size_t stripe = StripeIndex(id);
  std::unique_lock<std::mutex> lock =
      staged != nullptr ? LockForStaging(stripe)
                        : std::unique_lock<std::mutex>(stripes[stripe].mu);
  rocksdb::PinnableSlice value;
  rocksdb::Status s =
      RocksdbCall([&] { return db->Get(read_options, cf, key, &value); });
  std::optional<std::string_view> current;
  if (s.ok()) {
    current = View(value);
  } else if (!s.IsNotFound()) {
    return tl::unexpected(StatusError(path, op, s));
  }
  Write write;
  Result<T> result = decide(current, write);
  if (!result) return result;
  if (write.kind == Write::Kind::kNone) return result;
  if (staged != nullptr) {
    // Room for the lock first: nothing may fail once the write is staged.
    staged_writes.locks.reserve(staged_writes.locks.size() + 1);
    s = RocksdbCall([&] {
      return write.kind == Write::Kind::kPut
                 ? staged_writes.batch.Put(cf, key, write.value)
                 : staged_writes.batch.Delete(cf, key);
    });
    if (!s.ok()) return tl::unexpected(StatusError(path, op, s));
    staged_writes.held.set(stripe);
    staged_writes.locks.push_back(std::move(lock));
    *staged = true;
    return result;
  }
  if (auto stopped = WritesStopped(op)) return tl::unexpected(*stopped);
  s = RocksdbCall([&] {
    return write.kind == Write::Kind::kPut
               ? db->Put(write_options, cf, key, write.value)
               : db->Delete(write_options, cf, key);
  });
  if (!s.ok()) return tl::unexpected(StatusError(path, op, s));
  return result;
}

std::unique_lock<std::mutex> RocksdbStore::Impl::LockForStaging(
    std::size_t stripe) {
  // The batch must be written before this call reads: it holds this
  // stripe (perhaps this very id), or the stripe is busy and waiting for
  // it while holding others could deadlock with a purge, which takes
  // several stripes at once.
  if (staged_writes.held.test(stripe) ||
      staged_writes.locks.size() >= kMaxStagedWrites) {
    WriteStaged();
  }
  std::unique_lock<std::mutex> lock(stripes[stripe].mu, std::try_to_lock);
  if (!lock.owns_lock()) {
    WriteStaged();
    lock.lock();
  }
  return lock;
}

void RocksdbStore::Impl::WriteStaged() {
  if (staged_writes.answers.empty()) return;
  std::optional<Error> failed;
  if (staged_writes.batch.Count() > 0) failed = WritesStopped("write");
  if (!failed && staged_writes.batch.Count() > 0) {
    const rocksdb::Status s = RocksdbCall(
        [&] { return db->Write(write_options, &staged_writes.batch); });
    if (!s.ok()) failed = StatusError(path, "write", s);
  }
  staged_writes.batch.Clear();
  staged_writes.held.reset();
  staged_writes.locks.clear();  // Unlocks before the answers go out.
  std::vector<std::unique_ptr<StagedAnswer>> answers;
  answers.swap(staged_writes.answers);
  for (const std::unique_ptr<StagedAnswer>& answer : answers) {
    answer->Give(failed);
  }
}

Result<ClaimResult> RocksdbStore::Impl::Claim(const RecordId& id,
                                              const Fingerprint& fp,
                                              TimePoint now, Duration ttl,
                                              Duration lock_timeout,
                                              bool* staged) {
  auto decide = [&](std::optional<std::string_view> current,
                    Write& write) -> Result<ClaimResult> {
    bool live = false;
    if (current.has_value()) {
      IDEM_ASSIGN_OR_RETURN(const Record old, Decode(id, *current));
      if (auto blocked = ClaimBlockedBy(old, fp, now)) return *blocked;
      // Expired (as if absent), or in progress with its lock timed out:
      // taken over below.
      live = !old.Expired(now);
    }
    const Record fresh = NewClaimRecord(fp, now, ttl, lock_timeout);
    write.kind = Write::Kind::kPut;
    write.value = EncodeRecord(fresh);
    return ClaimAcquired(fresh, live);
  };
  return Update<ClaimResult>(id, "claim", decide, staged);
}

Result<std::optional<ClaimResult>> RocksdbStore::Impl::BlockedClaim(
    const RecordId& id, const Fingerprint& fp, TimePoint now) {
  rocksdb::PinnableSlice value;
  const rocksdb::Status s = RocksdbCall(
      [&] { return db->Get(memory_read_options, cf, KeyOf(id), &value); });
  // Incomplete: the record may be in a table file; Claim reads it.
  if (s.IsNotFound() || s.IsIncomplete()) return std::nullopt;
  if (!s.ok()) return tl::unexpected(StatusError(path, "claim", s));
  IDEM_ASSIGN_OR_RETURN(const Record record, Decode(id, View(value)));
  return ClaimBlockedBy(record, fp, now);
}

Result<bool> RocksdbStore::Impl::Complete(const RecordId& id,
                                          const Token& token,
                                          const Response& response,
                                          bool* staged) {
  auto decide = [&](std::optional<std::string_view> current,
                    Write& write) -> Result<bool> {
    IDEM_ASSIGN_OR_RETURN(std::optional<Record> old,
                          HeldRecord(id, current, token));
    if (!old) return false;
    write.kind = Write::Kind::kPut;
    write.value = EncodeCompleted(*old, response);
    return true;
  };
  return Update<bool>(id, "complete", decide, staged);
}

Result<bool> RocksdbStore::Impl::Release(const RecordId& id,
                                         const Token& token) {
  auto decide = [&](std::optional<std::string_view> current,
                    Write& write) -> Result<bool> {
    IDEM_ASSIGN_OR_RETURN(const std::optional<Record> old,
                          HeldRecord(id, current, token));
    if (!old) return false;
    write.kind = Write::Kind::kDelete;
    return true;
  };
  return Update<bool>(id, "release", decide);
}

Result<bool> RocksdbStore::Impl::ExtendLock(const RecordId& id,
                                            const Token& token, TimePoint now,
                                            Duration lock_timeout) {
  auto decide = [&](std::optional<std::string_view> current,
                    Write& write) -> Result<bool> {
    IDEM_ASSIGN_OR_RETURN(std::optional<Record> held,
                          HeldRecord(id, current, token));
    if (!held) return false;
    const std::optional<TimePoint> until =
        RenewedLockUntil(*held, token, now, lock_timeout);
    if (!until) return false;
    held->locked_until = *until;
    write.kind = Write::Kind::kPut;
    write.value = EncodeRecord(*held);
    return true;
  };
  return Update<bool>(id, "extend lock", decide);
}

// Under the id's lock, so a claim of the id sees the record or its absence,
// never a half. The value is not decoded: a damaged one goes too.
Result<bool> RocksdbStore::Impl::Revoke(const RecordId& id) {
  auto decide = [&](std::optional<std::string_view> current,
                    Write& write) -> Result<bool> {
    if (!current.has_value()) return false;
    write.kind = Write::Kind::kDelete;
    return true;
  };
  return Update<bool>(id, "revoke", decide);
}

Result<std::optional<Record>> RocksdbStore::Impl::Inspect(const RecordId& id,
                                                          TimePoint now) {
  rocksdb::PinnableSlice value;
  const rocksdb::Status s =
      RocksdbCall([&] { return db->Get(read_options, cf, KeyOf(id), &value); });
  if (s.IsNotFound()) return std::optional<Record>();
  if (!s.ok()) return tl::unexpected(StatusError(path, "inspect", s));
  IDEM_ASSIGN_OR_RETURN(Record record, Decode(id, View(value)));
  if (record.Expired(now)) return std::optional<Record>();
  return std::optional<Record>(std::move(record));
}

// The boundary's context is Prefix(path) without its ": ".
RocksdbStore::RocksdbStore(std::unique_ptr<Impl> impl)
    : StoreBoundary("rocksdb store '" + impl->path + "'"),
      impl_(std::move(impl)),
      calls_([this] { impl_->WriteStaged(); }) {}

RocksdbStore::~RocksdbStore() {
  calls_.Join();  // Its calls use the database closed below.
  try {
    impl_.reset();
  } catch (...) {
    // Nothing to report to: the WAL is replayed on the next open.
  }
}

Result<std::unique_ptr<RocksdbStore>> RocksdbStore::Open(
    const RocksdbStoreOptions& options, const StoreOptions& store_options) {
  if (options.path.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "rocksdb store: the database directory path is empty");
  }
  const std::string& path = options.path;
  if (options.block_cache_mb > RocksdbStoreOptions::kMaxBlockCacheMb) {
    return MakeError(ErrorCode::kInvalidArgument,
                     Prefix(path) + "block_cache_mb must be at most " +
                         std::to_string(RocksdbStoreOptions::kMaxBlockCacheMb) +
                         ", got " + std::to_string(options.block_cache_mb));
  }
  // Before the store exists, so outside its StoreBoundary.
  return CatchExceptions(
      [&] { return Prefix(path) + "open"; },
      [&]() -> Result<std::unique_ptr<RocksdbStore>> {
        IDEM_RETURN_IF_ERROR(rocksdb_internal::PrepareDirectory(
            path, options.create, kColumnFamily));
        auto impl = std::make_unique<Impl>();
        impl->path = path;
        impl->clock =
            store_options.clock ? store_options.clock : SystemClock::Instance();
        impl->filter =
            std::make_unique<rocksdb_internal::ExpiryFilter>(impl->clock);
        impl->write_options.sync = options.sync;

        const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
            {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
            {kColumnFamily, rocksdb_internal::RecordFamilyOptions(
                                options, impl->filter.get())}};
        const rocksdb::DBOptions db_options = rocksdb_internal::DatabaseOptions(
            path, impl->background_errors, options.create);
        std::vector<rocksdb::ColumnFamilyHandle*> handles;
        const rocksdb::Status s = RocksdbCall([&] {
          return rocksdb::DB::Open(db_options, path, families, &handles,
                                   &impl->db);
        });
        if (!s.ok()) {
          if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
            return MakeError(
                ErrorCode::kUnavailable,
                Prefix(path) +
                    "in use: another process, or another store in this "
                    "process, holds its LOCK file (" +
                    s.ToString() + ")");
          }
          return tl::unexpected(StatusError(path, "open", s));
        }
        impl->default_cf = handles[0];
        impl->cf = handles[1];
        return std::unique_ptr<RocksdbStore>(new RocksdbStore(std::move(impl)));
      });
}

Result<ClaimResult> RocksdbStore::DoClaim(const RecordId& id,
                                          const Fingerprint& fp, TimePoint now,
                                          Duration ttl, Duration lock_timeout) {
  return impl_->Claim(id, fp, now, ttl, lock_timeout);
}

Result<bool> RocksdbStore::DoComplete(const RecordId& id, const Token& token,
                                      const Response& response) {
  return impl_->Complete(id, token, response);
}

void RocksdbStore::DoClaimAsync(const RecordId& id, const Fingerprint& fp,
                                TimePoint now, Duration ttl,
                                Duration lock_timeout,
                                StoreCallback<ClaimResult> done) {
  if (impl_->write_options.sync) {
    done(DoClaim(id, fp, now, ttl, lock_timeout));
    return;
  }
  // A record that blocks the claim (a replay above all) is answered here,
  // on the caller's thread, from memory: no hop to the store's thread and
  // back for a claim that writes nothing.
  Result<std::optional<ClaimResult>> blocked =
      CatchExceptions([&] { return context() + ": claim"; },
                      [&] { return impl_->BlockedClaim(id, fp, now); });
  if (!blocked) {
    done(tl::unexpected(std::move(blocked.error())));
    return;
  }
  if (*blocked) {
    done(std::move(**blocked));
    return;
  }
  calls_.Post([this, id, fp, now, ttl, lock_timeout,
               done = std::move(done)]() mutable {
    impl_->RunStaged(std::move(done), [&](bool* staged) {
      return CatchExceptions(
          [&] { return context() + ": claim"; },
          [&] { return impl_->Claim(id, fp, now, ttl, lock_timeout, staged); });
    });
  });
}

void RocksdbStore::DoCompleteAsync(const RecordId& id, const Token& token,
                                   std::shared_ptr<const Response> response,
                                   StoreCallback<bool> done) {
  if (impl_->write_options.sync) {
    done(DoComplete(id, token, *response));
    return;
  }
  calls_.Post([this, id, token, response = std::move(response),
               done = std::move(done)]() mutable {
    impl_->RunStaged(std::move(done), [&](bool* staged) {
      return CatchExceptions(
          [&] { return context() + ": complete"; },
          [&] { return impl_->Complete(id, token, *response, staged); });
    });
  });
}

Result<bool> RocksdbStore::DoRelease(const RecordId& id, const Token& token) {
  return impl_->Release(id, token);
}

Result<bool> RocksdbStore::DoRevoke(const RecordId& id) {
  return impl_->Revoke(id);
}

Result<bool> RocksdbStore::DoExtendLock(const RecordId& id, const Token& token,
                                        TimePoint now, Duration lock_timeout) {
  return impl_->ExtendLock(id, token, now, lock_timeout);
}

Result<std::optional<StoreStats>> RocksdbStore::DoStats(TimePoint now) {
  return impl_->Stats(now);
}

Result<std::optional<Record>> RocksdbStore::DoInspect(const RecordId& id,
                                                      TimePoint now) {
  return impl_->Inspect(id, now);
}

Result<std::size_t> RocksdbStore::DoPurgeExpired(TimePoint now,
                                                 std::size_t limit) {
  return impl_->PurgeExpired(now, limit);
}

StoreInfo RocksdbStore::Info() const {
  return StoreInfo{.name = "rocksdb",
                   .durable = true,
                   .shared_across_processes = false,
                   .async_calls = !impl_->write_options.sync};
}

Status RocksdbStore::Compact() {
  return Call("compact", [&]() -> Status {
    rocksdb::CompactRangeOptions compact;
    // Rewrite every file, the last level too, so the filter sees every
    // record.
    compact.bottommost_level_compaction =
        rocksdb::BottommostLevelCompaction::kForce;
    const rocksdb::Status s = RocksdbCall([&] {
      return impl_->db->CompactRange(compact, impl_->cf, nullptr, nullptr);
    });
    if (!s.ok()) return tl::unexpected(StatusError(impl_->path, "compact", s));
    return {};
  });
}

const std::string& RocksdbStore::path() const { return impl_->path; }

}  // namespace idem
