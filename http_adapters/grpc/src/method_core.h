// One protected method: its name, its route options (validated once, by
// Guard::MakeRouteOptions), what of its calls is stored, its handler, and
// the adapter it belongs to. Thread-safety: immutable, shared by every call.

#ifndef IDEM_GRPC_SRC_METHOD_CORE_H_
#define IDEM_GRPC_SRC_METHOD_CORE_H_

#include <memory>
#include <string>
#include <vector>

#include "adapter_state.h"
#include "idem/grpc/handler.h"
#include "idem/guard_options.h"

namespace idem::grpc {

class MethodCore {
 public:
  std::shared_ptr<AdapterState> adapter;
  std::string full_name;
  std::shared_ptr<const GuardOptions> route;
  // Lowercase keys.
  std::vector<std::string> replayed_initial;
  std::vector<std::string> replayed_trailing;
  AnyHandler handler;
};

}  // namespace idem::grpc

#endif  // IDEM_GRPC_SRC_METHOD_CORE_H_
