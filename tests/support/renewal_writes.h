// The body of the SQL stores' "one row write per renewal" tests (SQLite,
// PostgreSQL): a renewal (ExtendLock) is one UPDATE of one row, and a
// renewal that fails writes nothing. Each store counts the rows written to
// its records table in its own SQL (a trigger).

#ifndef IDEM_TESTS_SUPPORT_RENEWAL_WRITES_H_
#define IDEM_TESTS_SUPPORT_RENEWAL_WRITES_H_

#include <functional>
#include <string>

#include "idem/store.h"
#include "idem/types.h"

namespace idem::testing {

// Claims `id` with `fp` at kT0, then calls `count_writes` (installs the
// counter, from 0, of every row written to the records table, the store's
// own connections included) and renews the claim ten times (at kT0 + 1 s,
// + 2 s, ...): `writes` (the counter's value, as text) must say 10; then
// once with a wrong token, which must answer false and leave it at 10.
void ExpectOneRowWrittenPerRenewal(Store& store, const RecordId& id,
                                   const Fingerprint& fp,
                                   const std::function<void()>& count_writes,
                                   const std::function<std::string()>& writes);

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_RENEWAL_WRITES_H_
