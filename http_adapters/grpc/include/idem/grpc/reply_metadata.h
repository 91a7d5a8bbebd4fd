// ReplyMetadata: the initial and trailing metadata a protected handler sends
// with its answer, through the adapter so that the allowlisted keys
// (MethodOptions::replayed_initial_metadata / replayed_trailing_metadata)
// are stored with the call and replayed. The adapter adds every entry to the
// call's ServerContext after the handler completes; metadata a handler adds
// to the context itself is sent too, but never stored (gRPC offers no way to
// read it back).
//
// Keys must be valid gRPC metadata keys (lowercase; binary values under
// keys ending in "-bin"), as for ServerContext::AddInitialMetadata.
//
// Thread-safety: single owner; the handler uses it until it completes, from
// the thread it runs on.

#ifndef IDEM_GRPC_REPLY_METADATA_H_
#define IDEM_GRPC_REPLY_METADATA_H_

#include <string>
#include <utility>
#include <vector>

namespace idem::grpc {

using MetadataEntries = std::vector<std::pair<std::string, std::string>>;

class ReplyMetadata {
 public:
  void AddInitial(std::string key, std::string value) {
    initial_.emplace_back(std::move(key), std::move(value));
  }
  void AddTrailing(std::string key, std::string value) {
    trailing_.emplace_back(std::move(key), std::move(value));
  }

  // In the order added.
  const MetadataEntries& initial() const { return initial_; }
  const MetadataEntries& trailing() const { return trailing_; }

 private:
  MetadataEntries initial_;
  MetadataEntries trailing_;
};

}  // namespace idem::grpc

#endif  // IDEM_GRPC_REPLY_METADATA_H_
