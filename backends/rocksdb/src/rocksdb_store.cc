// The RocksDB store; see rocksdb_store.h for its contract.
//
// One column family holds the records, key = the 32-byte record id, value =
// EncodeRecord(record). A read-modify-write holds the id's stripe mutex
// around a Get and a Put/Delete; reads that only look (Inspect, the purge
// scan) take no lock, because a single Get already returns one whole value.

#include "idem/rocksdb_store.h"

#include "idem/catch_exceptions.h"

#include <rocksdb/cache.h>
#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/status.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "background_errors.h"
#include "idem/record_codec.h"
#include "idem/token.h"
#include "info_log.h"

namespace idem {
namespace {

// Enough stripes that unrelated ids rarely share one at any realistic thread
// count; each is a cache line, so the table costs 64 KiB per store.
constexpr std::size_t kStripes = 1024;
// Records PurgeExpired deletes per WriteBatch, with their stripes held: small
// enough that claims on those stripes wait for one short write (and under
// ThreadSanitizer, which tracks at most 64 locks held by one thread).
constexpr std::size_t kPurgeBatch = 32;
// Keys one PurgeExpired call examines at most, per record it may delete and
// at least: a scan costs ~1.2 us per key (200,000 keys, none expired: 236
// ms, 2-core VM), so a sweeper's call with limit 1000 over a store of 10 M
// live records reads 100,000 keys (~0.1 s) instead of all 10 M (~12 s)
// every interval, and the next call resumes where it stopped.
constexpr std::size_t kPurgeScanPerRecord = 100;
constexpr std::size_t kMinPurgeScan = 100'000;

// The fixed header of the record codec, version 1 (record_codec.h): the
// compaction filter and the purge scan read expires_at from it without
// decoding (or checksumming) the rest of the value.
constexpr std::size_t kExpiresAtOffset = 59;
constexpr std::size_t kMinEncodedSize = 71;

std::int64_t Ns(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

// expires_at (ns) of an encoded record, or nullopt when the value is not a
// version-1 record (those are left alone: Claim and Inspect report them).
std::optional<std::int64_t> PeekExpiresAtNs(std::string_view value) {
  if (value.size() < kMinEncodedSize ||
      static_cast<std::uint8_t>(value[0]) != kRecordCodecMagic ||
      static_cast<std::uint8_t>(value[1]) != kRecordCodecVersion) {
    return std::nullopt;
  }
  std::uint64_t u = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    u |= std::uint64_t{static_cast<std::uint8_t>(value[kExpiresAtOffset + i])}
         << (8 * i);
  }
  return static_cast<std::int64_t>(u);
}

// Whether `name` is a file RocksDB writes into its directory (what an
// interrupted first open may leave behind without a CURRENT file yet), or
// the lost+found of a file system mounted there for the database.
bool IsRocksdbFileName(const std::string& name) {
  if (name == "lost+found") return true;
  if (name == "LOCK" || name == "IDENTITY" || name == "LOG" ||
      name.rfind("LOG.old.", 0) == 0 || name.rfind("MANIFEST-", 0) == 0 ||
      name.rfind("OPTIONS-", 0) == 0) {
    return true;
  }
  // 000012.log, 000013.sst, 000014.dbtmp
  const std::size_t dot = name.find('.');
  if (dot == 0 || dot == std::string::npos) return false;
  const std::string ext = name.substr(dot + 1);
  if (ext != "log" && ext != "sst" && ext != "dbtmp") return false;
  return std::all_of(name.begin(), name.begin() + dot,
                     [](char c) { return c >= '0' && c <= '9'; });
}

// A directory entry that shows `path` is not a RocksDB database (e.g.
// `rocksdb:/`, which would scatter RocksDB files over /), or nullopt: the
// directory is missing or empty, holds a database (CURRENT), or only the
// files of one being created.
std::optional<std::string> ForeignEntry(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return std::nullopt;
  if (std::filesystem::exists(std::filesystem::path(path) / "CURRENT", ec)) {
    return std::nullopt;
  }
  std::filesystem::directory_iterator it(path, ec);
  if (ec) return std::nullopt;  // Unreadable: RocksDB's open reports it.
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) return std::nullopt;
    const std::string name = it->path().filename().string();
    if (!IsRocksdbFileName(name)) return name;
  }
  return std::nullopt;
}

rocksdb::Slice KeyOf(const RecordId& id) {
  return rocksdb::Slice(reinterpret_cast<const char*>(id.bytes.data()),
                        RecordId::kSize);
}

std::string_view View(const rocksdb::Slice& s) {
  return std::string_view(s.data(), s.size());
}

std::string Prefix(const std::string& path) {
  return "rocksdb store '" + path + "': ";
}

Error StatusError(const std::string& path, std::string_view what,
                  const rocksdb::Status& s) {
  ErrorCode code = ErrorCode::kInternal;
  if (s.IsCorruption()) {
    code = ErrorCode::kDataLoss;
  } else if (s.IsIOError() || s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) {
    code = ErrorCode::kUnavailable;
  }
  return Error(code, Prefix(path) + std::string(what) + ": " + s.ToString());
}

tl::unexpected<Error> Unexpected(Error e) {
  return tl::unexpected<Error>(std::move(e));
}

// Every public call runs inside this boundary (idem/catch_exceptions.h).
template <typename Fn>
auto Boundary(const std::string& path, std::string_view op, Fn&& fn)
    -> decltype(fn()) {
  return CatchExceptions([&] { return Prefix(path) + std::string(op); },
                         std::forward<Fn>(fn));
}

// Drops records whose expires_at has passed by the store's clock. Values
// that are not version-1 records are kept, so that corruption stays visible
// as kDataLoss instead of silently becoming a missing record.
class ExpiryFilter final : public rocksdb::CompactionFilter {
 public:
  explicit ExpiryFilter(std::shared_ptr<Clock> clock)
      : clock_(std::move(clock)) {}

  bool Filter(int /*level*/, const rocksdb::Slice& /*key*/,
              const rocksdb::Slice& value, std::string* /*new_value*/,
              bool* /*value_changed*/) const override {
    const std::optional<std::int64_t> expires_at = PeekExpiresAtNs(View(value));
    return expires_at.has_value() && *expires_at <= Ns(clock_->Now());
  }

  const char* Name() const override { return "idem.ExpiryFilter"; }

 private:
  const std::shared_ptr<Clock> clock_;
};

// What a read-modify-write decided to write.
struct Write {
  enum class Kind { kNone, kPut, kDelete };
  Kind kind = Kind::kNone;
  std::string value;
};

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer's dynamic annotations (exported by its runtime).
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

// Every call into RocksDB goes through here. Under ThreadSanitizer the
// memory accesses made during the call are not tracked (see
// __tsan_default_suppressions below for why); locks taken inside still are.
template <typename Fn>
auto RocksdbCall(Fn&& fn) {
#if defined(__SANITIZE_THREAD__)
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  struct End {
    ~End() {
      AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
      AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    }
  } end;
#endif
  return fn();
}

}  // namespace

#if defined(__SANITIZE_THREAD__)
// RocksDB as Debian ships it is not built with ThreadSanitizer: its lock-free
// memtable, write group commit and caches synchronize with atomics TSan
// cannot see, so concurrent Gets and Puts look like races. RocksDB's own
// frames are also missing from TSan's stacks, and the std::string code it
// runs resolves to the instrumented copies in the executable, so a report
// can show idem's frames only. Hence RocksdbCall ignores the accesses made
// during a call, and reports with a RocksDB frame on either side (its
// background threads) are suppressed in every binary that links this store.
// Races between idem's own accesses are still reported. Weak, so an
// application's own list takes precedence.
extern "C" __attribute__((weak)) const char* __tsan_default_suppressions() {
  return "called_from_lib:librocksdb.so\n"
         "race:librocksdb.so\n";
}
#endif

struct RocksdbStore::Impl {
  struct alignas(64) Stripe {
    std::mutex mu;
  };

  std::string path;
  std::shared_ptr<Clock> clock;
  // Referenced by the column family options: must outlive `db`.
  std::unique_ptr<ExpiryFilter> filter;
  rocksdb::DB* db = nullptr;
  rocksdb::ColumnFamilyHandle* default_cf = nullptr;
  rocksdb::ColumnFamilyHandle* cf = nullptr;
  rocksdb::WriteOptions write_options;
  rocksdb::ReadOptions read_options;
  std::unique_ptr<Stripe[]> stripes{new Stripe[kStripes]};
  // Registered as a listener: stops and resumes writes around RocksDB's
  // background errors (background_errors.h).
  std::shared_ptr<rocksdb_internal::BackgroundErrors> background_errors =
      std::make_shared<rocksdb_internal::BackgroundErrors>();

  std::mutex purge_mu;
  // The key the next PurgeExpired scan starts at ("" = the first key).
  std::string purge_cursor;

  ~Impl() { Close(); }

  void Close() {
    if (db == nullptr) return;
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

  Stripe& StripeFor(const RecordId& id) {
    return stripes[id.Prefix64() % kStripes];
  }

  // Before every write: nullopt when it may be issued, else the
  // kUnavailable error to return instead of issuing it (a background error
  // stops writes until DB::Resume() clears it; background_errors.h).
  std::optional<Error> WritesStopped(std::string_view op) {
    std::optional<std::string> why = background_errors->Check(
        [&] { return RocksdbCall([&] { return db->Resume(); }); });
    if (!why) return std::nullopt;
    return Error(ErrorCode::kUnavailable,
                 Prefix(path) + std::string(op) + ": " + *why);
  }

  Error DataLoss(const RecordId& id, const Error& decode) const {
    return Error(ErrorCode::kDataLoss,
                 Prefix(path) + "record " + id.ToHex() +
                     " does not decode: " + decode.message());
  }

  // Reads the value of `id`, lets `decide` compute the result and the write,
  // and applies the write, all while no other read-modify-write of `id` can
  // run. `decide` gets the current value (nullopt when there is none).
  template <typename T, typename Fn>
  Result<T> Update(const RecordId& id, std::string_view op, Fn&& decide) {
    const rocksdb::Slice key = KeyOf(id);
    std::lock_guard<std::mutex> lock(StripeFor(id).mu);
    rocksdb::PinnableSlice value;
    rocksdb::Status s =
        RocksdbCall([&] { return db->Get(read_options, cf, key, &value); });
    std::optional<std::string_view> current;
    if (s.ok()) {
      current = View(value);
    } else if (!s.IsNotFound()) {
      return Unexpected(StatusError(path, op, s));
    }
    Write write;
    Result<T> result = decide(current, write);
    if (!result) return result;
    if (write.kind == Write::Kind::kNone) return result;
    if (auto stopped = WritesStopped(op)) return Unexpected(*stopped);
    s = RocksdbCall([&] {
      return write.kind == Write::Kind::kPut
                 ? db->Put(write_options, cf, key, write.value)
                 : db->Delete(write_options, cf, key);
    });
    if (!s.ok()) return Unexpected(StatusError(path, op, s));
    return result;
  }

  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) {
    auto decide = [&](std::optional<std::string_view> current,
                      Write& write) -> Result<ClaimResult> {
      ClaimResult result;
      bool live = false;
      if (current.has_value()) {
        Result<Record> old = DecodeRecord(*current);
        if (!old) return Unexpected(DataLoss(id, old.error()));
        if (auto blocked = ClaimBlockedBy(*old, fp, now)) return *blocked;
        // Expired (as if absent), or in progress with its lock timed out:
        // taken over below.
        live = !old->Expired(now);
      }
      const Record fresh = NewClaimRecord(fp, now, ttl, lock_timeout);
      write.kind = Write::Kind::kPut;
      write.value = EncodeRecord(fresh);
      result.outcome = ClaimOutcome::kAcquired;
      result.token = fresh.token;
      result.takeover = live;
      result.locked_until = fresh.locked_until;
      return result;
    };
    return Update<ClaimResult>(id, "claim", decide);
  }

  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) {
    auto decide = [&](std::optional<std::string_view> current,
                      Write& write) -> Result<bool> {
      if (!current.has_value()) return false;
      Result<Record> old = DecodeRecord(*current);
      if (!old) return Unexpected(DataLoss(id, old.error()));
      if (old->state != RecordState::kInProgress || old->token != token) {
        return false;
      }
      old->state = RecordState::kCompleted;
      // Non-owning: the caller's response outlives the encoding below.
      old->response = std::shared_ptr<const Response>(
          std::shared_ptr<const Response>(), &response);
      write.kind = Write::Kind::kPut;
      write.value = EncodeRecord(*old);
      return true;
    };
    return Update<bool>(id, "complete", decide);
  }

  Result<bool> Release(const RecordId& id, const Token& token) {
    auto decide = [&](std::optional<std::string_view> current,
                      Write& write) -> Result<bool> {
      if (!current.has_value()) return false;
      Result<Record> old = DecodeRecord(*current);
      if (!old) return Unexpected(DataLoss(id, old.error()));
      if (old->state != RecordState::kInProgress || old->token != token) {
        return false;
      }
      write.kind = Write::Kind::kDelete;
      return true;
    };
    return Update<bool>(id, "release", decide);
  }

  // Under the id's lock, so a claim of the id sees the record or its
  // absence, never a half. The value is not decoded: a damaged one goes too.
  Result<bool> Revoke(const RecordId& id) {
    auto decide = [&](std::optional<std::string_view> current,
                      Write& write) -> Result<bool> {
      if (!current.has_value()) return false;
      write.kind = Write::Kind::kDelete;
      return true;
    };
    return Update<bool>(id, "revoke", decide);
  }

  Result<std::optional<Record>> Inspect(const RecordId& id, TimePoint now) {
    rocksdb::PinnableSlice value;
    const rocksdb::Status s = RocksdbCall(
        [&] { return db->Get(read_options, cf, KeyOf(id), &value); });
    if (s.IsNotFound()) return std::optional<Record>();
    if (!s.ok()) return Unexpected(StatusError(path, "inspect", s));
    Result<Record> record = DecodeRecord(View(value));
    if (!record) return Unexpected(DataLoss(id, record.error()));
    if (record->Expired(now)) return std::optional<Record>();
    return std::optional<Record>(std::move(*record));
  }

  // Deletes those of `keys` that are still expired at `now_ns`, holding
  // their stripes (in ascending order, so two batches never deadlock, and
  // single-id calls hold one stripe only) until the batch is written.
  Result<std::size_t> DeleteExpired(const std::vector<std::string>& keys,
                                    std::int64_t now_ns) {
    std::vector<std::size_t> indexes;
    indexes.reserve(keys.size());
    for (const std::string& key : keys) {
      RecordId id;
      id.Assign(key);
      indexes.push_back(id.Prefix64() % kStripes);
    }
    std::sort(indexes.begin(), indexes.end());
    indexes.erase(std::unique(indexes.begin(), indexes.end()), indexes.end());
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(indexes.size());
    for (std::size_t i : indexes) locks.emplace_back(stripes[i].mu);

    rocksdb::WriteBatch batch;
    std::size_t n = 0;
    for (const std::string& key : keys) {
      rocksdb::PinnableSlice value;
      const rocksdb::Status s =
          RocksdbCall([&] { return db->Get(read_options, cf, key, &value); });
      if (s.IsNotFound()) continue;
      if (!s.ok()) return Unexpected(StatusError(path, "purge", s));
      const auto expires_at = PeekExpiresAtNs(View(value));
      if (!expires_at.has_value() || *expires_at > now_ns) continue;
      const rocksdb::Status d =
          RocksdbCall([&] { return batch.Delete(cf, key); });
      if (!d.ok()) return Unexpected(StatusError(path, "purge", d));
      ++n;
    }
    if (n == 0) return n;
    if (auto stopped = WritesStopped("purge")) return Unexpected(*stopped);
    const rocksdb::Status s =
        RocksdbCall([&] { return db->Write(write_options, &batch); });
    if (!s.ok()) return Unexpected(StatusError(path, "purge", s));
    return n;
  }

  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit) {
    if (limit == 0) return std::size_t{0};
    std::lock_guard<std::mutex> purge_lock(purge_mu);
    const std::int64_t now_ns = Ns(now);
    rocksdb::ReadOptions scan_options;
    scan_options.fill_cache = false;  // A full scan would evict hot records.
    std::unique_ptr<rocksdb::Iterator> it(
        RocksdbCall([&] { return db->NewIterator(scan_options, cf); }));
    const std::string start = purge_cursor;
    bool wrapped = start.empty();  // From the first key: one pass is all.
    RocksdbCall([&] { it->Seek(start); });
    std::size_t deleted = 0;
    std::vector<std::string> batch;
    const std::size_t scan_budget =
        limit > SIZE_MAX / kPurgeScanPerRecord
            ? SIZE_MAX
            : std::max(kMinPurgeScan, limit * kPurgeScanPerRecord);
    std::size_t examined = 0;
    bool out_of_budget = false;
    while (deleted < limit) {
      if (examined >= scan_budget) {
        out_of_budget = true;
        break;
      }
      if (!it->Valid()) {
        if (!it->status().ok()) {
          return Unexpected(StatusError(path, "purge scan", it->status()));
        }
        if (wrapped) break;
        wrapped = true;
        RocksdbCall([&] { it->SeekToFirst(); });
        continue;
      }
      if (wrapped && !start.empty() && View(it->key()) >= start) break;
      ++examined;
      const auto expires_at = PeekExpiresAtNs(View(it->value()));
      if (expires_at.has_value() && *expires_at <= now_ns) {
        batch.emplace_back(View(it->key()));
      }
      RocksdbCall([&] { it->Next(); });
      if (batch.size() >= std::min(kPurgeBatch, limit - deleted)) {
        Result<std::size_t> n = DeleteExpired(batch, now_ns);
        if (!n) return n;
        deleted += *n;
        batch.clear();
      }
    }
    if (!batch.empty()) {
      Result<std::size_t> n = DeleteExpired(batch, now_ns);
      if (!n) return n;
      deleted += *n;
    }
    // Resume after the last key examined; from the start after a full pass.
    if ((deleted >= limit || out_of_budget) && it->Valid()) {
      purge_cursor.assign(it->key().data(), it->key().size());
    } else {
      purge_cursor.clear();
    }
    return deleted;
  }
};

RocksdbStore::RocksdbStore(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

RocksdbStore::~RocksdbStore() {
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
  return Boundary(path, "open", [&]() -> Result<std::unique_ptr<RocksdbStore>> {
    std::error_code ec;
    if (std::filesystem::exists(path, ec) &&
        !std::filesystem::is_directory(path, ec)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       Prefix(path) + "exists and is not a directory");
    }
    if (std::optional<std::string> other = ForeignEntry(path)) {
      return MakeError(
          ErrorCode::kInvalidArgument,
          Prefix(path) + "holds other files (e.g. '" + *other +
              "') but no RocksDB database (no CURRENT file); refusing to "
              "write RocksDB files into it: give an empty or new directory");
    }
    std::filesystem::create_directories(path, ec);
    if (ec) {
      return MakeError(
          ErrorCode::kUnavailable,
          Prefix(path) + "cannot create the directory: " + ec.message());
    }

    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->clock =
        store_options.clock ? store_options.clock : SystemClock::Instance();
    impl->filter = std::make_unique<ExpiryFilter>(impl->clock);
    impl->write_options.sync = options.sync;

    rocksdb::DBOptions db_options;
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    // RocksDB's own info LOG: keep a few, not one per open forever. Written
    // by a logger that a full disk cannot turn into an abort (info_log.h).
    db_options.keep_log_file_num = 4;
    db_options.info_log = rocksdb_internal::InfoLog::Open(
        path, rocksdb::InfoLogLevel::INFO_LEVEL);
    db_options.listeners.push_back(impl->background_errors);
    db_options.max_background_jobs = 2;

    rocksdb::ColumnFamilyOptions cf_options;
    cf_options.compaction_filter = impl->filter.get();
    rocksdb::BlockBasedTableOptions table;
    // Most claims are for new ids: a bloom filter answers "absent"
    // without reading a data block.
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    // Our own cache instead of RocksDB's implicit 8 MiB one, so that its
    // size is the operator's choice (rocksdb_store.h); 0 turns it off, since
    // a null block_cache alone would get the implicit one back.
    if (options.block_cache_mb == 0) {
      table.no_block_cache = true;
    } else {
      table.block_cache = rocksdb::NewLRUCache(options.block_cache_mb << 20);
    }
    // Index and filter blocks stay out of the cache (RocksDB's default): each
    // table reader keeps them in memory while its file is open, so the bloom
    // check that answers most claims (fresh ids) costs no cache lookup and
    // is never evicted by replayed data blocks. Caching them, with high
    // priority and L0 pinning, would bound that memory but put a cache
    // lookup in front of every bloom check; that was not measured against
    // claim latency, so the layout the benchmarks were run with stays.
    cf_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    // The same for the memtable, where a fresh id's Get would otherwise walk
    // the skip list to its end.
    cf_options.memtable_whole_key_filtering = true;
    cf_options.memtable_prefix_bloom_size_ratio = 0.05;

    const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
        {kColumnFamily, cf_options}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    const rocksdb::Status s = RocksdbCall([&] {
      return rocksdb::DB::Open(db_options, path, families, &handles, &impl->db);
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
      return Unexpected(StatusError(path, "open", s));
    }
    impl->default_cf = handles[0];
    impl->cf = handles[1];
    return std::unique_ptr<RocksdbStore>(new RocksdbStore(std::move(impl)));
  });
}

Result<std::unique_ptr<Store>> RocksdbStore::OpenFromUri(
    StoreUri& uri, const StoreOptions& options) {
  if (uri.scheme() != "rocksdb") {
    return tl::unexpected(
        uri.InvalidArgument("scheme '" + uri.scheme() + "' is not rocksdb"));
  }
  if (Status local =
          uri.RequireLocalPath("the rocksdb store takes a directory: "
                               "rocksdb:/path/dir");
      !local) {
    return tl::unexpected(local.error());
  }
  auto sync = uri.TakeBool("sync");
  if (!sync) return tl::unexpected(sync.error());
  auto block_cache_mb =
      uri.TakeUint("block_cache_mb", 0, RocksdbStoreOptions::kMaxBlockCacheMb);
  if (!block_cache_mb) return tl::unexpected(block_cache_mb.error());
  if (Status unknown = uri.RejectUnknown(); !unknown) {
    return tl::unexpected(unknown.error());
  }
  RocksdbStoreOptions rocksdb_options;
  rocksdb_options.path = uri.path();
  rocksdb_options.sync = sync->value_or(false);
  rocksdb_options.block_cache_mb = static_cast<std::size_t>(
      block_cache_mb->value_or(RocksdbStoreOptions::kDefaultBlockCacheMb));
  auto store = Open(rocksdb_options, options);
  if (!store) return tl::unexpected(store.error());
  return std::unique_ptr<Store>(std::move(*store));
}

Result<ClaimResult> RocksdbStore::Claim(const RecordId& id,
                                        const Fingerprint& fp, TimePoint now,
                                        Duration ttl, Duration lock_timeout) {
  if (ttl <= Duration::zero() || lock_timeout <= Duration::zero()) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        Prefix(impl_->path) + "ttl and lock_timeout must be positive");
  }
  return Boundary(impl_->path, "claim",
                  [&] { return impl_->Claim(id, fp, now, ttl, lock_timeout); });
}

Result<bool> RocksdbStore::Complete(const RecordId& id, const Token& token,
                                    const Response& response) {
  return Boundary(impl_->path, "complete",
                  [&] { return impl_->Complete(id, token, response); });
}

Result<bool> RocksdbStore::Release(const RecordId& id, const Token& token) {
  return Boundary(impl_->path, "release",
                  [&] { return impl_->Release(id, token); });
}

Result<bool> RocksdbStore::Revoke(const RecordId& id) {
  return Boundary(impl_->path, "revoke", [&] { return impl_->Revoke(id); });
}

Result<std::optional<Record>> RocksdbStore::Inspect(const RecordId& id,
                                                    TimePoint now) {
  return Boundary(impl_->path, "inspect",
                  [&] { return impl_->Inspect(id, now); });
}

Result<std::size_t> RocksdbStore::PurgeExpired(TimePoint now,
                                               std::size_t limit) {
  return Boundary(impl_->path, "purge",
                  [&] { return impl_->PurgeExpired(now, limit); });
}

StoreInfo RocksdbStore::Info() const {
  return StoreInfo{
      .name = "rocksdb", .durable = true, .shared_across_processes = false};
}

Status RocksdbStore::Compact() {
  return Boundary(impl_->path, "compact", [&]() -> Status {
    rocksdb::CompactRangeOptions compact;
    // Rewrite every file, the last level too, so the filter sees every
    // record.
    compact.bottommost_level_compaction =
        rocksdb::BottommostLevelCompaction::kForce;
    const rocksdb::Status s = RocksdbCall([&] {
      return impl_->db->CompactRange(compact, impl_->cf, nullptr, nullptr);
    });
    if (!s.ok()) return Unexpected(StatusError(impl_->path, "compact", s));
    return {};
  });
}

const std::string& RocksdbStore::path() const { return impl_->path; }

}  // namespace idem
