#include "open_existing.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

#include "idem/open_store.h"
#include "idemctl.h"

namespace idem::idemctl {
namespace {

// The scheme as text, lowercase: a redis-cluster:// URI with several hosts
// is not one StoreUri::Parse reads (OpenStore rewrites it first).
std::string SchemeOf(std::string_view uri) {
  std::string scheme(uri.substr(0, uri.find(':')));
  for (char& c : scheme) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return scheme;
}

}  // namespace

std::string ExistingOnly(std::string_view uri) {
  constexpr std::array<std::string_view, 3> kDropped = {"sweep_interval_s",
                                                        "create", "connect"};
  const std::string scheme = SchemeOf(uri);
  const bool creates = scheme == "rocksdb" || scheme == "sqlite" ||
                       scheme == "postgresql" || scheme == "postgres";
  const auto q = uri.find('?');
  const auto hash = uri.find('#', q == std::string_view::npos ? 0 : q);
  std::string out(uri.substr(0, std::min(q, hash)));
  std::string kept;
  if (q != std::string_view::npos) {
    const std::string_view query = uri.substr(
        q + 1,
        hash == std::string_view::npos ? std::string_view::npos : hash - q - 1);
    std::size_t start = 0;
    while (start <= query.size()) {
      auto end = query.find('&', start);
      if (end == std::string_view::npos) end = query.size();
      const std::string_view param = query.substr(start, end - start);
      const std::string_view name = param.substr(0, param.find('='));
      if (!param.empty() &&
          std::find(kDropped.begin(), kDropped.end(), name) == kDropped.end()) {
        if (!kept.empty()) kept += '&';
        kept += param;
      }
      start = end + 1;
    }
  }
  if (creates) kept += kept.empty() ? "create=false" : "&create=false";
  if (!kept.empty()) out += "?" + kept;
  if (hash != std::string_view::npos) out += uri.substr(hash);
  return out;
}

Result<std::unique_ptr<Store>> OpenExisting(const std::string& uri,
                                            Output& output, int* code) {
  if (SchemeOf(uri) == "memory") {
    const std::string message =
        "a memory: store lives inside its application's process; idemctl "
        "cannot reach it (use a store the application shares: rocksdb, "
        "sqlite, postgresql, redis)";
    *code = output.Fail(kUsage, message);
    return MakeError(ErrorCode::kInvalidArgument, message);
  }
  StoreOptions options;
  options.sweep_interval = Duration::zero();
  auto store = OpenStore(ExistingOnly(uri), options);
  if (!store) {
    *code = output.StoreFailed("cannot open the store", store.error());
    return tl::unexpected(store.error());
  }
  return store;
}

}  // namespace idem::idemctl
