// The state behind RocksdbStore (rocksdb_store.h): the database, the id
// stripe mutexes, the background-error gate, the purge cursor. The record
// operations are in rocksdb_store.cc, the purge scan in rocksdb_purge.cc.

#ifndef IDEM_BACKENDS_ROCKSDB_ROCKSDB_IMPL_H_
#define IDEM_BACKENDS_ROCKSDB_ROCKSDB_IMPL_H_

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <bitset>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/rocksdb_store.h"
#include "rocksdb_background_errors.h"
#include "rocksdb_call.h"
#include "rocksdb_expiry_filter.h"

namespace idem {

struct RocksdbStore::Impl {
  // Enough stripes that unrelated ids rarely share one at any realistic
  // thread count; each is a cache line, so the table costs 64 KiB per store.
  static constexpr std::size_t kStripes = 1024;

  struct alignas(64) Stripe {
    std::mutex mu;
  };

  // What a read-modify-write decided to write.
  struct Write {
    enum class Kind { kNone, kPut, kDelete };
    Kind kind = Kind::kNone;
    std::string value;
  };

  std::string path;
  std::shared_ptr<Clock> clock;
  // Referenced by the column family options: must outlive `db`.
  std::unique_ptr<rocksdb_internal::ExpiryFilter> filter;
  rocksdb::DB* db = nullptr;
  rocksdb::ColumnFamilyHandle* default_cf = nullptr;
  rocksdb::ColumnFamilyHandle* cf = nullptr;
  rocksdb::WriteOptions write_options;
  rocksdb::ReadOptions read_options;
  // For reads on a caller's thread (BlockedClaim): answered from the
  // memtables and the block cache, or Incomplete where a table file would
  // have to be read.
  rocksdb::ReadOptions memory_read_options = [] {
    rocksdb::ReadOptions options;
    options.read_tier = rocksdb::kBlockCacheTier;
    return options;
  }();
  std::unique_ptr<Stripe[]> stripes{new Stripe[kStripes]};
  // Registered as a listener: stops and resumes writes around RocksDB's
  // background errors (rocksdb_background_errors.h).
  std::shared_ptr<rocksdb_internal::BackgroundErrors> background_errors =
      std::make_shared<rocksdb_internal::BackgroundErrors>();

  std::mutex purge_mu;  // Guards purge_cursor and purge_iterator.
  // The key the next PurgeExpired scan starts at ("" = the first key).
  std::string purge_cursor;
  // The iterator of the PurgeExpired call that stopped at purge_cursor,
  // for the next call made before kPurgeIteratorReuse has passed since it
  // was created: creating one sorts the memtable's keys
  // (rocksdb_options.cc), about a millisecond per thousand records, and a
  // sweeper's pass makes its calls back to back. It reads the store as it
  // was when created, which PurgeExpired allows (each deletion reads its
  // record again under its stripe), and pins the memtables and table
  // files it reads until released; Close releases it first.
  static constexpr std::chrono::seconds kPurgeIteratorReuse{1};
  std::unique_ptr<rocksdb::Iterator> purge_iterator;
  std::chrono::steady_clock::time_point purge_iterator_created;

  // The store thread's staged writes (RocksdbStore's asynchronous calls):
  // the calls of one batch of that thread write together, one WriteBatch
  // and one append to the log, and are answered after it. Each staged
  // call's id stays locked (its stripe held) until then, so no other
  // read-modify-write of it runs in between; a call whose stripe the batch
  // already holds, or that would have to wait for a stripe while the batch
  // holds others, writes the batch first. While the batch holds stripes,
  // the calls that write nothing wait for it too, so that no caller's
  // callback ever runs with a stripe held. A batch that cannot be written
  // answers each of its writing calls with the error ("write: ...").
  // Store thread only.
  struct StagedAnswer {
    virtual ~StagedAnswer() = default;
    // `failed`: why the batch was not written; nullopt when it was.
    virtual void Give(const std::optional<Error>& failed) = 0;
  };
  template <typename T>
  struct TypedAnswer final : StagedAnswer {
    explicit TypedAnswer(StoreCallback<T>&& done) : done(std::move(done)) {}
    void Give(const std::optional<Error>& failed) override {
      if (wrote && failed) {
        done(tl::unexpected(*failed));
      } else {
        done(std::move(result));
      }
    }
    StoreCallback<T> done;
    Result<T> result;
    bool wrote = false;  // Its write is in the batch.
  };
  // At most this many staged writes (stripes held) at once: the batch is
  // written when one more would exceed it. Bounds how long a staged call
  // waits for its answer, and stays under ThreadSanitizer's 64 locks held
  // by one thread.
  static constexpr std::size_t kMaxStagedWrites = 32;
  struct Staged {
    rocksdb::WriteBatch batch;
    std::bitset<kStripes> held;
    std::vector<std::unique_lock<std::mutex>> locks;
    std::vector<std::unique_ptr<StagedAnswer>> answers;
  };
  Staged staged_writes;

  ~Impl() { Close(); }
  // Flushes the record column family and closes the database.
  void Close();

  std::size_t StripeIndex(const RecordId& id) const {
    return id.Prefix64() % kStripes;
  }

  // Before every write: nullopt when it may be issued, else the
  // kUnavailable error to return instead of issuing it (a background error
  // stops writes until DB::Resume() clears it; rocksdb_background_errors.h).
  std::optional<Error> WritesStopped(std::string_view op);
  // DecodeRecord, failing with kDataLoss naming the store and the id.
  Result<Record> Decode(const RecordId& id, std::string_view value) const;
  // The record `current` holds when `token` holds it (in progress under
  // it); nullopt when there is none or it is not held by `token`.
  Result<std::optional<Record>> HeldRecord(
      const RecordId& id, std::optional<std::string_view> current,
      const Token& token) const;

  // Reads the value of `id`, lets `decide` compute the result and the write,
  // and applies the write, all while no other read-modify-write of `id` can
  // run. `decide` gets the current value (nullopt when there is none).
  // With `staged` (the store thread's calls only), the write joins the
  // staged batch instead and *staged says whether it did: its result must
  // then be answered through RunStaged, after the batch is written.
  template <typename T, typename Fn>
  Result<T> Update(const RecordId& id, std::string_view op, Fn&& decide,
                   bool* staged = nullptr);
  // The stripe of `id`, locked, for a call that stages its write.
  std::unique_lock<std::mutex> LockForStaging(std::size_t stripe);
  // Writes the staged batch, releases its stripes and answers the calls
  // waiting (those whose write failed with the error). Does nothing when
  // no call waits. The store thread's after_batch.
  void WriteStaged();
  // Runs `call` (which gets the `staged` out-parameter of Update) and
  // answers `done` with its result: at once, or after the staged batch is
  // written when the call staged its write. What the answer needs is
  // allocated before the call runs, so a staged write always has its
  // answer waiting.
  template <typename T, typename Call>
  void RunStaged(StoreCallback<T> done, Call&& call) {
    std::unique_ptr<TypedAnswer<T>> answer;
    try {
      answer = std::make_unique<TypedAnswer<T>>(std::move(done));
      staged_writes.answers.reserve(staged_writes.answers.size() + 1);
    } catch (const std::bad_alloc&) {
      (answer ? answer->done : done)(tl::unexpected(
          Error(ErrorCode::kInternal,
                rocksdb_internal::Prefix(path) + "out of memory for a call")));
      return;
    }
    bool is_staged = false;
    Result<T> result = call(&is_staged);
    // A call that wrote nothing is answered at once unless the batch holds
    // stripes: then it waits too, so that no answer runs (and no callback
    // calls the store) while this thread holds a stripe.
    if (!is_staged && staged_writes.answers.empty()) {
      answer->done(std::move(result));
      return;
    }
    answer->result = std::move(result);
    answer->wrote = is_staged;
    staged_writes.answers.push_back(std::move(answer));  // Room reserved above.
  }

  // Claim and Complete stage their write when `staged` is given (Update).
  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl, Duration lock_timeout,
                            bool* staged = nullptr);
  // Claim's answer when the record of `id` blocks the claim (ClaimBlockedBy:
  // a replay, a mismatch, a claim in progress), decided from one read
  // without the stripe lock, without writing and without reading a table
  // file (memory_read_options); nullopt when Claim has to decide (no
  // record, an expired one, a timed-out lock, or one that is not in
  // memory). A record that blocks a claim changes only by a write, which
  // the read sees entirely or not at all, so the answer is the one Claim
  // would have given at the moment of the read. Errors: Claim's.
  Result<std::optional<ClaimResult>> BlockedClaim(const RecordId& id,
                                                  const Fingerprint& fp,
                                                  TimePoint now);
  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response, bool* staged = nullptr);
  Result<bool> Release(const RecordId& id, const Token& token);
  Result<bool> Revoke(const RecordId& id);
  Result<bool> ExtendLock(const RecordId& id, const Token& token, TimePoint now,
                          Duration lock_timeout);
  Result<std::optional<Record>> Inspect(const RecordId& id, TimePoint now);
  // rocksdb_stats.cc.
  Result<std::optional<StoreStats>> Stats(TimePoint now);

  // rocksdb_purge.cc.
  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit);
  Result<std::size_t> DeleteExpired(const std::vector<std::string>& keys,
                                    TimePoint now);
};

}  // namespace idem

#endif  // IDEM_BACKENDS_ROCKSDB_ROCKSDB_IMPL_H_
