// MemoryStore::OpenFromUri: a `memory:` URI's parameters into
// MemoryStoreOptions (memory_store.h).

#include <limits>
#include <memory>
#include <utility>

#include "idem/memory_store.h"
#include "idem/store_uri.h"

namespace idem {

Result<std::unique_ptr<Store>> MemoryStore::OpenFromUri(
    StoreUri& uri, const StoreOptions& /*options*/) {
  if (uri.scheme() != "memory") {
    return tl::unexpected(
        uri.InvalidArgument("scheme '" + uri.scheme() + "' is not memory"));
  }
  if (!uri.user().empty() || !uri.password().empty() || !uri.host().empty() ||
      !uri.port().empty() || !uri.path().empty()) {
    return tl::unexpected(uri.InvalidArgument(
        "unexpected path or host (the memory store takes only "
        "?capacity=N&max_bytes=M)"));
  }
  // The URI gives numbers; Open alone judges them (its errors then name the
  // URI).
  constexpr std::size_t kAny = std::numeric_limits<std::size_t>::max();
  MemoryStoreOptions options;
  IDEM_RETURN_IF_ERROR(uri.ReadUint("capacity", options.capacity, 0, kAny));
  IDEM_RETURN_IF_ERROR(uri.ReadUint("max_bytes", options.max_bytes, 0, kAny));
  IDEM_RETURN_IF_ERROR(uri.RejectUnknown());
  auto store = Open(options);
  if (!store && store.error().code() == ErrorCode::kInvalidArgument) {
    return tl::unexpected(uri.InvalidArgument(store.error().message()));
  }
  if (!store) return tl::unexpected(store.error());
  return std::unique_ptr<Store>(std::move(*store));
}

}  // namespace idem
