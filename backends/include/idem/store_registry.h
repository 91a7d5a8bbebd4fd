// The stores this build of idem::stores has: one descriptor per enabled
// backend (idem/store/store_descriptor.h), in a list CMake generates from
// the backends' idem_add_backend() calls. Linking idem::stores links each of
// them, so the list is exactly what the binary can open; nothing depends on
// static initializers, which a static archive would drop.
//
// Thread-safety: immutable; any thread.

#ifndef IDEM_STORE_REGISTRY_H_
#define IDEM_STORE_REGISTRY_H_

#include <span>
#include <string>
#include <string_view>

#include "idem/store/store_descriptor.h"

namespace idem {

// Every enabled backend's descriptor, in the order of their folders' names.
std::span<const StoreDescriptor* const> RegisteredStores();

// The descriptor of the backend that opens URIs of `scheme` (lowercase),
// or nullptr.
const StoreDescriptor* FindStoreByScheme(std::string_view scheme);

// The descriptor of backend `name` ("sqlite"), or nullptr.
const StoreDescriptor* FindStoreByName(std::string_view name);

// `uri` as StoreUri::Parse takes it: rewritten by the backends that take
// URIs RFC 3986 does not allow (StoreDescriptor::rewrite_uri), unchanged
// otherwise.
std::string ParseableStoreUri(std::string_view uri);

}  // namespace idem

#endif  // IDEM_STORE_REGISTRY_H_
