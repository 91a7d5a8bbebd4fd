// The exception boundary of a backend: nothing a database library or the
// standard library throws crosses idem's public API (errors are values:
// docs/ARCHITECTURE.md, "Layers").
//
// Thread-safety: a pure function template.

#ifndef IDEM_STORE_CATCH_EXCEPTIONS_H_
#define IDEM_STORE_CATCH_EXCEPTIONS_H_

#include <exception>
#include <new>
#include <string>

#include "idem/error.h"

namespace idem {

// Runs `fn` (which returns a Result) and turns an exception into an error:
// std::bad_alloc -> kResourceExhausted, anything else -> kInternal. The
// message starts with `context()`, which is only called when something was
// thrown, so the happy path builds no string.
template <typename Context, typename Fn>
auto CatchExceptions(Context&& context, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return MakeError(ErrorCode::kResourceExhausted,
                     std::string(context()) + ": out of memory");
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInternal,
                     std::string(context()) + ": exception: " + e.what());
  } catch (...) {
    return MakeError(ErrorCode::kInternal,
                     std::string(context()) + ": unknown exception");
  }
}

}  // namespace idem

#endif  // IDEM_STORE_CATCH_EXCEPTIONS_H_
