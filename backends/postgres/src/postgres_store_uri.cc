// PostgresStore::OpenFromUri and the options' ranges (postgres_options.h):
// the URI's parameters are read with the ranges ValidateOptions checks, so
// that a URI's error names its parameter and a PostgresStoreOptions' error
// its field.

#include <charconv>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "idem/postgres_store.h"
#include "idem/store_uri.h"
#include "postgres_options.h"
#include "postgres_sql.h"

namespace idem {
namespace postgres_internal {

std::string DisplayName(const PostgresStoreOptions& o) {
  std::string s = "postgresql://";
  if (!o.user.empty()) s += o.user + "@";
  s += o.host;
  if (!o.port.empty()) s += ":" + o.port;
  return s + "/" + o.dbname;
}

Status ValidateOptions(const PostgresStoreOptions& o,
                       const std::string& display) {
  auto invalid = [&](const std::string& what) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "postgres store '" + display + "': " + what);
  };
  if (!ValidTableName(o.table)) {
    return invalid("table name '" + o.table +
                   "' is not a plain identifier (letters, digits and '_', "
                   "not starting with a digit, at most " +
                   std::to_string(kMaxTableName) + " bytes)");
  }
  // libpq takes any text and fails to connect to port 0 or 99999 (an
  // outage, kUnavailable): a typo is the options' error.
  if (!o.port.empty()) {
    std::uint64_t port = 0;
    const char* end = o.port.data() + o.port.size();
    const auto [at, ec] = std::from_chars(o.port.data(), end, port);
    if (ec != std::errc() || at != end || port < 1 || port > 65535) {
      return invalid("port must be a number from 1 to 65535, got '" + o.port +
                     "'");
    }
  }
  if (o.pool_size < 1 || o.pool_size > kMaxPool) {
    return invalid("pool must be in 1.." + std::to_string(kMaxPool));
  }
  if (o.acquire_timeout.count() < 0 || o.acquire_timeout > kMaxTimeout) {
    return invalid("acquire_timeout must be in 0..3600000 ms");
  }
  if (o.connect_timeout.count() < 1 || o.connect_timeout > kMaxTimeout) {
    return invalid("connect_timeout must be in 1..3600 s");
  }
  if (o.statement_timeout.count() < 1 || o.statement_timeout > kMaxTimeout) {
    return invalid("statement_timeout must be in 1..3600000 ms");
  }
  return {};
}

}  // namespace postgres_internal

Result<std::unique_ptr<Store>> PostgresStore::OpenFromUri(
    StoreUri& uri, const StoreOptions& options) {
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  if (uri.scheme() != "postgresql" && uri.scheme() != "postgres") {
    return tl::unexpected(uri.InvalidArgument(
        "scheme '" + uri.scheme() + "' is not postgresql or postgres"));
  }
  PostgresStoreOptions o;
  o.host = uri.host();
  o.port = uri.port();
  o.user = uri.user();
  o.password = uri.password();
  o.dbname = uri.path();
  if (o.dbname.empty() || o.dbname.find('/') != std::string::npos) {
    return tl::unexpected(
        uri.InvalidArgument("missing or malformed database name "
                            "(postgresql://user@host:port/dbname)"));
  }
  // The ranges ValidateOptions checks, so that the URI's errors name the
  // parameter.
  IDEM_RETURN_IF_ERROR(uri.ReadString("table", o.table));
  IDEM_RETURN_IF_ERROR(
      uri.ReadUint("pool", o.pool_size, 1, postgres_internal::kMaxPool));
  IDEM_RETURN_IF_ERROR(
      uri.ReadDuration("acquire_timeout_ms", o.acquire_timeout, milliseconds(0),
                       milliseconds(postgres_internal::kMaxTimeout)));
  IDEM_RETURN_IF_ERROR(
      uri.ReadDuration("connect_timeout_s", o.connect_timeout, seconds(1),
                       seconds(postgres_internal::kMaxTimeout)));
  IDEM_RETURN_IF_ERROR(uri.ReadDuration(
      "statement_timeout_ms", o.statement_timeout, milliseconds(1),
      milliseconds(postgres_internal::kMaxTimeout)));
  IDEM_RETURN_IF_ERROR(
      uri.ReadEnum<std::string>("sslmode", o.sslmode,
                                {{"disable", "disable"},
                                 {"allow", "allow"},
                                 {"prefer", "prefer"},
                                 {"require", "require"},
                                 {"verify-ca", "verify-ca"},
                                 {"verify-full", "verify-full"}}));
  IDEM_RETURN_IF_ERROR(uri.ReadBool("create", o.create));
  IDEM_RETURN_IF_ERROR(uri.ReadEnum<PostgresConnect>(
      "connect", o.connect,
      {{"eager", PostgresConnect::kEager}, {"lazy", PostgresConnect::kLazy}}));
  IDEM_RETURN_IF_ERROR(uri.RejectUnknown());
  IDEM_ASSIGN_OR_RETURN(auto store, OpenNamed(o, options, uri.redacted()));
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace idem
