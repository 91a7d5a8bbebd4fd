// Slot routing for Redis Cluster; see redis_cluster.h.
//
// The slot map is an array of 16384 pool pointers under one mutex, held
// only to read or swap entries (never during network calls). Pools are
// created for every node a map or a redirection names and never destroyed
// before the router, so a pointer read under the mutex stays valid.
// -MOVED means the map is stale (a slot moved for good): the slot is
// pointed at the new node at once and the whole map is read again. -ASK
// means a slot is migrating and this one key already lives on the target:
// only this call goes there, after ASKING, and the map stays as it is.

#include "redis_cluster.h"

#include <charconv>
#include <set>
#include <utility>

namespace idem::redis {
namespace {

std::uint16_t Crc16(std::string_view data) {
  std::uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc ^= static_cast<std::uint16_t>(byte) << 8;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0
                ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return crc;
}

bool ParseInt(std::string_view text, int& out) {
  const auto [end, ec] = std::from_chars(text.begin(), text.end(), out);
  return ec == std::errc() && end == text.end();
}

}  // namespace

std::uint16_t KeySlot(std::string_view key) {
  const std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) % kClusterSlots;
}

std::optional<Redirect> ParseRedirect(const redisReply* reply) {
  const bool moved = IsError(reply, "MOVED");
  if (!moved && !IsError(reply, "ASK")) return std::nullopt;
  // "MOVED 3999 127.0.0.1:6381"
  std::string_view text = ReplyText(reply);
  const std::size_t a = text.find(' ');
  const std::size_t b = text.find(' ', a + 1);
  if (a == std::string_view::npos || b == std::string_view::npos) {
    return std::nullopt;
  }
  const std::string_view address = text.substr(b + 1);
  const std::size_t colon = address.rfind(':');
  Redirect r;
  r.ask = !moved;
  if (colon == std::string_view::npos ||
      !ParseInt(text.substr(a + 1, b - a - 1), r.slot) ||
      !ParseInt(address.substr(colon + 1), r.target.port) || r.slot < 0 ||
      r.slot >= kClusterSlots) {
    return std::nullopt;
  }
  r.target.host = std::string(address.substr(0, colon));
  return r;
}

Pool& ClusterRouter::PoolOf(const Endpoint& endpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<Pool>& pool = pools_[endpoint.Name()];
  if (pool == nullptr) {
    ConnectOptions connect = options_.connect;
    connect.db = 0;
    pool =
        std::make_unique<Pool>(endpoint, std::move(connect), options_.pool_size,
                               options_.acquire_timeout, options_.display);
  }
  return *pool;
}

Pool* ClusterRouter::PoolOfSlot(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_[slot];
}

Status ClusterRouter::RefreshFrom(Pool& pool) {
  const Command command = {"CLUSTER", "SLOTS"};
  IDEM_ASSIGN_OR_RETURN(auto replies, pool.Run({&command, 1}));
  const redisReply* r = replies[0].get();
  if (r->type == REDIS_REPLY_ERROR) {
    return tl::unexpected(ReplyError(*r, options_.display + ": CLUSTER SLOTS"));
  }
  if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
    return MakeError(ErrorCode::kInternal,
                     options_.display + ": CLUSTER SLOTS on " +
                         pool.endpoint().Name() + " returned no slot map");
  }
  struct Range {
    int first, last;
    Endpoint master;
  };
  std::vector<Range> ranges;
  for (std::size_t i = 0; i < r->elements; ++i) {
    const redisReply* e = r->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        e->element[0]->type != REDIS_REPLY_INTEGER ||
        e->element[1]->type != REDIS_REPLY_INTEGER ||
        e->element[2]->type != REDIS_REPLY_ARRAY ||
        e->element[2]->elements < 2 ||
        e->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
      return MakeError(ErrorCode::kInternal,
                       options_.display + ": malformed CLUSTER SLOTS entry");
    }
    Range range{static_cast<int>(e->element[0]->integer),
                static_cast<int>(e->element[1]->integer),
                {std::string(ReplyText(e->element[2]->element[0])),
                 static_cast<int>(e->element[2]->element[1]->integer)}};
    // An empty address means "the node you asked".
    if (range.master.host.empty()) range.master.host = pool.endpoint().host;
    if (range.first < 0 || range.last >= kClusterSlots ||
        range.first > range.last) {
      return MakeError(
          ErrorCode::kInternal,
          options_.display + ": CLUSTER SLOTS range out of bounds");
    }
    ranges.push_back(std::move(range));
  }
  std::vector<Pool*> masters;
  for (const Range& range : ranges) masters.push_back(&PoolOf(range.master));
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    for (int s = ranges[i].first; s <= ranges[i].last; ++s) {
      slots_[s] = masters[i];
    }
  }
  return {};
}

Status ClusterRouter::Refresh() {
  std::vector<Pool*> candidates;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::set<Pool*> seen;
    for (Pool* p : slots_) {
      if (p != nullptr && seen.insert(p).second) candidates.push_back(p);
    }
  }
  for (const Endpoint& seed : options_.seeds) {
    Pool* p = &PoolOf(seed);
    if (std::find(candidates.begin(), candidates.end(), p) ==
        candidates.end()) {
      candidates.push_back(p);
    }
  }
  Error last(ErrorCode::kUnavailable,
             options_.display + ": no cluster node to ask");
  for (Pool* p : candidates) {
    Status s = RefreshFrom(*p);
    if (s) return s;
    last = s.error();
  }
  return tl::unexpected(last);
}

void ClusterRouter::MaybeRefresh() {
  const std::int64_t now =
      std::chrono::steady_clock::now().time_since_epoch().count();
  std::int64_t last = last_failure_refresh_.load(std::memory_order_relaxed);
  const std::int64_t interval =
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          kRefreshInterval)
          .count();
  if (now - last < interval ||
      !last_failure_refresh_.compare_exchange_strong(last, now)) {
    return;  // Another call refreshed just now, or is refreshing.
  }
  (void)Refresh();
}

Result<std::vector<Reply>> ClusterRouter::Run(std::string_view key,
                                              std::span<const Command> commands,
                                              int resends) {
  const int slot = KeySlot(key);
  Pool* target = PoolOfSlot(slot);
  bool asking = false;
  std::vector<Command> with_asking;
  for (int hop = 0;; ++hop) {
    if (target == nullptr) {
      // A slot no node serves (the map was read mid-change): read it again.
      IDEM_RETURN_IF_ERROR(Refresh());
      target = PoolOfSlot(slot);
      if (target == nullptr) {
        return MakeError(
            ErrorCode::kUnavailable,
            options_.display + ": no node serves slot " + std::to_string(slot));
      }
    }
    Result<std::vector<Reply>> replies;
    if (asking) {
      with_asking.assign(1, Command{"ASKING"});
      with_asking.insert(with_asking.end(), commands.begin(), commands.end());
      replies = target->Run(with_asking, resends);
      if (replies) replies->erase(replies->begin());
    } else {
      replies = target->Run(commands, resends);
    }
    if (!replies) {
      // After a failover the old master is gone and nobody will answer
      // -MOVED: read the map again (at most every kRefreshInterval), so
      // that later calls find the promoted replica.
      if (replies.error().code() == ErrorCode::kUnavailable) MaybeRefresh();
      return replies;
    }
    // -CLUSTERDOWN, -TRYAGAIN, a node turned replica: the pool closed the
    // connection and tried a fresh one; the map may be stale too.
    if (IsRoleError(replies->front().get())) MaybeRefresh();
    const std::optional<Redirect> redirect =
        ParseRedirect(replies->front().get());
    if (!redirect) return replies;
    if (hop >= options_.max_redirects) {
      return MakeError(ErrorCode::kUnavailable,
                       options_.display + ": more than " +
                           std::to_string(options_.max_redirects) +
                           " redirections for slot " + std::to_string(slot));
    }
    Pool& next = PoolOf(redirect->target);
    if (redirect->ask) {
      target = &next;
      asking = true;
    } else {
      {
        std::lock_guard<std::mutex> lock(mu_);
        slots_[redirect->slot] = &next;
      }
      (void)Refresh();  // Best effort: the entry above already routes.
      target = PoolOfSlot(slot);
      asking = false;
    }
  }
}

std::vector<std::string> ClusterRouter::Servers() {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> names;
  // A node owns whole ranges of slots: only where the owner changes from
  // one slot to the next is a name made (a few per cluster, not 16,384).
  const Pool* previous = nullptr;
  for (Pool* p : slots_) {
    if (p == nullptr || p == previous) continue;
    previous = p;
    names.insert(p->endpoint().Name());
  }
  return {names.begin(), names.end()};
}

Result<std::vector<Reply>> ClusterRouter::RunOn(
    const std::string& name, std::span<const Command> commands) {
  Pool* pool = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pools_.find(name);
    if (it != pools_.end()) pool = it->second.get();
  }
  if (pool == nullptr) {
    return MakeError(ErrorCode::kInternal,
                     options_.display + ": unknown node " + name);
  }
  return pool->Run(commands);
}

std::string ClusterRouter::MasterOf(int slot) {
  Pool* p = PoolOfSlot(slot);
  return p != nullptr ? p->endpoint().Name() : "";
}

}  // namespace idem::redis
