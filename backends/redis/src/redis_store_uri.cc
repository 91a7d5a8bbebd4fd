// RedisStore's URIs: redis://[user:password@]host:port/db?... and
// redis-cluster://host:port[,host:port...]?... into RedisStoreOptions (see
// redis_store.h for the parameters), and the options' ranges
// (redis_options.h), which Open checks once for both ways in.

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "idem/redis_store.h"
#include "redis_options.h"

namespace idem {

std::string RedisStore::ClusterUriForParsing(std::string_view uri) {
  constexpr std::string_view kScheme = "redis-cluster://";
  if (uri.size() < kScheme.size()) return std::string(uri);
  std::string head(uri.substr(0, kScheme.size()));
  std::transform(head.begin(), head.end(), head.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (head != kScheme) return std::string(uri);
  const std::string_view rest = uri.substr(kScheme.size());
  const std::size_t end = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, end);
  const std::string_view tail =
      end == std::string_view::npos ? std::string_view() : rest.substr(end);
  const std::size_t at = authority.rfind('@');
  const std::string_view userinfo = at == std::string_view::npos
                                        ? std::string_view()
                                        : authority.substr(0, at + 1);
  const std::string_view hosts =
      at == std::string_view::npos ? authority : authority.substr(at + 1);
  const std::size_t comma = hosts.find(',');
  if (comma == std::string_view::npos) return std::string(uri);
  // Query and fragment of the tail, split so that `nodes` joins the query.
  const std::size_t hash = tail.find('#');
  const std::string_view before_fragment = tail.substr(0, hash);
  const std::string_view fragment =
      hash == std::string_view::npos ? std::string_view() : tail.substr(hash);
  std::string out(kScheme);
  out += userinfo;
  out += hosts.substr(0, comma);
  out += before_fragment;
  out += before_fragment.find('?') == std::string_view::npos ? "?" : "&";
  out += "nodes=";
  out += hosts.substr(comma + 1);
  out += fragment;
  return out;
}

namespace {

bool ParseInt64(std::string_view text, std::int64_t& out) {
  const auto [end, ec] = std::from_chars(text.begin(), text.end(), out);
  return ec == std::errc() && end == text.end() && !text.empty();
}

Result<RedisStoreOptions::Node> ParseNode(std::string_view text,
                                          const StoreUri& uri) {
  const std::size_t colon = text.rfind(':');
  RedisStoreOptions::Node node;
  node.host = std::string(text.substr(0, colon));
  if (colon != std::string_view::npos) {
    const std::string_view port = text.substr(colon + 1);
    const auto [end, ec] = std::from_chars(port.begin(), port.end(), node.port);
    if (ec != std::errc() || end != port.end() || port.empty()) {
      return tl::unexpected(
          uri.InvalidArgument("malformed port in '" + std::string(text) + "'"));
    }
  }
  if (node.host.empty()) {
    return tl::unexpected(uri.InvalidArgument("missing the host"));
  }
  return node;
}

}  // namespace

Result<std::unique_ptr<Store>> RedisStore::OpenFromUri(
    StoreUri& uri, const StoreOptions& options) {
  RedisStoreOptions o;
  o.cluster = uri.scheme() == "redis-cluster";
  if (!o.cluster && uri.scheme() != "redis") {
    return tl::unexpected(uri.InvalidArgument(
        "scheme '" + uri.scheme() + "' is not redis or redis-cluster"));
  }
  if (uri.host().empty()) {
    return tl::unexpected(
        uri.InvalidArgument("missing the host (redis://host:port/db, "
                            "redis-cluster://host:port,host:port)"));
  }
  IDEM_ASSIGN_OR_RETURN(
      auto first,
      ParseNode(uri.host() + (uri.port().empty() ? "" : ":" + uri.port()),
                uri));
  o.nodes.push_back(std::move(first));
  if (o.cluster) {
    std::string nodes;
    IDEM_RETURN_IF_ERROR(uri.ReadString("nodes", nodes));
    {
      std::string_view list = nodes;
      while (!list.empty()) {
        const std::size_t comma = list.find(',');
        IDEM_ASSIGN_OR_RETURN(auto node, ParseNode(list.substr(0, comma), uri));
        o.nodes.push_back(std::move(node));
        list = comma == std::string_view::npos ? "" : list.substr(comma + 1);
      }
    }
  }
  o.user = uri.user();
  o.password = uri.password();
  if (!uri.path().empty()) {
    std::int64_t db = -1;
    if (!ParseInt64(uri.path(), db) || db < 0 || db > 1'000'000 ||
        (o.cluster && db != 0)) {
      return tl::unexpected(uri.InvalidArgument(
          "the path must be a database number (redis://host:port/0; a "
          "cluster has only 0)"));
    }
    o.db = static_cast<int>(db);
  }
  // Parsed here, with the widest bounds the types allow; Open checks the
  // real ranges, once for both ways in.
  constexpr std::chrono::milliseconds kZero(0), kHour(3'600'000);
  IDEM_RETURN_IF_ERROR(uri.ReadString("prefix", o.prefix));
  IDEM_RETURN_IF_ERROR(uri.ReadUint("pool", o.pool_size, 0, 1u << 20));
  IDEM_RETURN_IF_ERROR(uri.ReadDuration("timeout_ms", o.timeout, kZero, kHour));
  IDEM_RETURN_IF_ERROR(
      uri.ReadDuration("acquire_timeout_ms", o.acquire_timeout, kZero, kHour));
  IDEM_RETURN_IF_ERROR(uri.ReadBool("allow_eviction", o.allow_eviction));
  std::string connect = "eager";
  IDEM_RETURN_IF_ERROR(uri.ReadString("connect", connect));
  if (connect != "eager" && connect != "lazy") {
    return tl::unexpected(uri.InvalidArgument(
        "connect must be eager or lazy, not '" + connect + "'"));
  }
  o.connect = connect == "lazy" ? RedisStoreOptions::Connect::kLazy
                                : RedisStoreOptions::Connect::kEager;
  IDEM_RETURN_IF_ERROR(
      uri.ReadDuration("check_interval_ms", o.check_interval, kZero, kHour));
  IDEM_RETURN_IF_ERROR(uri.ReadUint("wait", o.wait_replicas, 0, 1 << 20));
  IDEM_RETURN_IF_ERROR(
      uri.ReadDuration("wait_ms", o.wait_timeout, kZero, kHour));
  IDEM_RETURN_IF_ERROR(uri.RejectUnknown());
  auto store = OpenNamed(o, options, uri.redacted());
  if (!store) {
    const Error& e = store.error();
    // Option errors name the URI; others already start with it.
    if (e.code() == ErrorCode::kInvalidArgument &&
        e.message().rfind("redis store: ", 0) == 0) {
      return tl::unexpected(uri.InvalidArgument(e.message().substr(13)));
    }
    return tl::unexpected(e);
  }
  return std::unique_ptr<Store>(std::move(*store));
}

namespace redis {
namespace {

constexpr std::size_t kMaxPrefix = 128;

}  // namespace

Status ValidateOptions(const RedisStoreOptions& o) {
  auto invalid = [](std::string what) {
    return MakeError(ErrorCode::kInvalidArgument, "redis store: " + what);
  };
  if (o.nodes.empty()) return invalid("no server given");
  for (const auto& n : o.nodes) {
    if (n.host.empty()) return invalid("a server has no host");
    if (n.port < 1 || n.port > 65535) {
      return invalid("port " + std::to_string(n.port) + " out of range");
    }
  }
  if (!o.cluster && o.nodes.size() != 1) {
    return invalid("redis:// takes one server (redis-cluster:// takes more)");
  }
  if (o.prefix.find_first_of("{}") != std::string::npos) {
    return invalid(
        "prefix must not contain '{' or '}' (the record id is the cluster "
        "hash tag)");
  }
  if (o.prefix.size() > kMaxPrefix) {
    return invalid("prefix longer than " + std::to_string(kMaxPrefix) +
                   " bytes");
  }
  if (o.pool_size < 1 || o.pool_size > 1024)
    return invalid("pool not in 1..1024");
  if (o.timeout.count() < 1 || o.timeout.count() > 3'600'000) {
    return invalid("timeout not in 1 ms..1 h");
  }
  if (o.acquire_timeout.count() < 0 || o.acquire_timeout.count() > 3'600'000) {
    return invalid("acquire_timeout not in 0..1 h");
  }
  if (o.wait_replicas < 0 || o.wait_replicas > 64) {
    return invalid("wait not in 0..64");
  }
  if (o.wait_timeout.count() < 1 || o.wait_timeout.count() > 3'600'000) {
    return invalid("wait_ms not in 1 ms..1 h");
  }
  if (o.check_interval.count() < 10 || o.check_interval.count() > 3'600'000) {
    return invalid("check_interval not in 10 ms..1 h");
  }
  if (o.db < 0 || (o.cluster && o.db != 0)) {
    return invalid("database must be 0 on a cluster and not negative");
  }
  return {};
}

}  // namespace redis
}  // namespace idem
