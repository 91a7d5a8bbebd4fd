#include "idem/open_store.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>

#include "idem/store/store_descriptor.h"
#include "idem/store_registry.h"
#include "idem/store_uri.h"
#include "idem/sweeper.h"

namespace idem {
namespace {

// "a, b, c".
std::string JoinNames(const std::vector<std::string_view>& names) {
  std::string out;
  for (std::string_view n : names) {
    out += out.empty() ? "" : ", ";
    out += n;
  }
  return out;
}

// Every parameter the URI still has is one `store` takes: the error names
// the first other one and what the scheme takes.
Status CheckParameters(const StoreUri& uri, const StoreDescriptor& store) {
  for (const auto& [name, value] : uri.params()) {
    if (std::find(store.parameters.begin(), store.parameters.end(), name) ==
        store.parameters.end()) {
      return tl::unexpected(uri.InvalidArgument(
          "unknown parameter '" + name + "' for " + uri.scheme() +
          ": (it takes " + JoinNames(store.parameters) +
          ", sweep_interval_s)"));
    }
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<Store>> OpenStore(std::string_view uri,
                                         const StoreOptions& options) {
  IDEM_ASSIGN_OR_RETURN(StoreUri parsed,
                        StoreUri::Parse(ParseableStoreUri(uri)));
  // Every scheme's: the sweeper is OpenStore's, not a backend's.
  SweeperOptions sweeper;
  sweeper.interval = options.sweep_interval;
  IDEM_RETURN_IF_ERROR(parsed.ReadDuration(
      "sweep_interval_s", sweeper.interval, std::chrono::seconds(0),
      std::chrono::duration_cast<std::chrono::seconds>(kMaxSweepInterval)));
  sweeper.clock = options.clock;
  sweeper.log = options.log;
  sweeper.metrics = options.metrics;
  if (sweeper.interval < Duration::zero() ||
      sweeper.interval > kMaxSweepInterval) {
    return tl::unexpected(parsed.InvalidArgument(
        "StoreOptions::sweep_interval must be from 0 to 24 h"));
  }
  const StoreDescriptor* store = FindStoreByScheme(parsed.scheme());
  if (store == nullptr) {
    std::string known;
    for (const std::string& s : AvailableStoreSchemes()) {
      known += known.empty() ? "" : ", ";
      known += s + ":";
    }
    return tl::unexpected(
        parsed.InvalidArgument("unknown store scheme '" + parsed.scheme() +
                               "' (this build has: " + known + ")"));
  }
  IDEM_RETURN_IF_ERROR(CheckParameters(parsed, *store));
  IDEM_ASSIGN_OR_RETURN(auto opened, store->open(parsed, options));
  return WithSweeper(std::move(opened), std::move(sweeper));
}

std::vector<std::string> AvailableStoreSchemes() {
  std::vector<std::string> out;
  for (const StoreDescriptor* store : RegisteredStores()) {
    for (std::string_view s : store->schemes) out.emplace_back(s);
  }
  return out;
}

}  // namespace idem
