// The key parser of idempotency_key.h without its allocation, for the
// Guard's hot path: the key is hashed into the record id at once and needs
// no string of its own.

#ifndef IDEM_CORE_SRC_IDEMPOTENCY_KEY_VIEW_H_
#define IDEM_CORE_SRC_IDEMPOTENCY_KEY_VIEW_H_

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

#include "idem/idempotency_key.h"

namespace idem::internal {

// ParseIdempotencyKeyHeaders, with the same rules and errors, returning a
// view: into the header value when the key needs no unescaping (a bare
// token, or an sf-string without backslashes), else into `scratch`, which
// holds the unescaped key. Valid while both live and `scratch` is not
// changed.
tl::expected<std::string_view, KeyError> ParseIdempotencyKeyView(
    std::span<const std::string_view> values, std::size_t max_key_length,
    std::string& scratch);

}  // namespace idem::internal

#endif  // IDEM_CORE_SRC_IDEMPOTENCY_KEY_VIEW_H_
