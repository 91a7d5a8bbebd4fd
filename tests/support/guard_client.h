// A client of a Guard for tests that drive it directly (no HTTP): one POST
// /orders per call with the given Idempotency-Key in scope "tenant", whose
// handler answers 201 "order" and counts its runs.
//
// Thread-safety: one thread at a time.

#ifndef IDEM_TESTS_SUPPORT_GUARD_CLIENT_H_
#define IDEM_TESTS_SUPPORT_GUARD_CLIENT_H_

#include <string_view>

#include "idem/guard.h"
#include "idem/response.h"

namespace idem::testing {

struct GuardClient {
  Guard* guard;
  int runs = 0;  // Handler runs so far.

  idem::Response Send(std::string_view key) {
    const HeaderView headers[] = {{"Idempotency-Key", key}};
    RequestView request;
    request.method = "POST";
    request.target = "/orders";
    request.headers = headers;
    request.body = "{}";
    request.scope = "tenant";
    return guard->Run(request, [&] {
      ++runs;
      return idem::Response{201, {{"Content-Type", "text/plain"}}, "order"};
    });
  }
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_GUARD_CLIENT_H_
