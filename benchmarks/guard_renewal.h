// What lock renewal costs a request that does not need it: Guard::Run (Begin,
// a handler that returns at once, Finish) with lock_renewal off and on, over
// the ShardedMutexStore, so the rows show the Guard's own work. Rows:
//   GuardRun/renewal_off/real_time/threads:<N>
//   GuardRun/renewal_on/real_time/threads:<N>
// for N in {1, 2}. With renewal on, every request makes its claim's lease and
// adds it to (and removes it from) the Guard's renewal thread; no renewal
// falls due (lock_renewal 20 s), so no ExtendLock write is timed.
//
// To compare against main before renewal (commit 3ea466b, where the
// lock_renewal field exists but does nothing): `git worktree add /tmp/base
// 3ea466b`, copy this file and guard_renewal.cc into its benchmarks/ (with
// the same two lines in CMakeLists.txt and registration.cc), build its
// idem-bench and run both binaries one after the other with
// --benchmark_filter=GuardRun; renewal_off here against renewal_off there
// is what renewal costs a request when it is off.
//
// Thread-safety: call once, before benchmark::RunSpecifiedBenchmarks.

#ifndef IDEM_BENCHMARKS_GUARD_RENEWAL_H_
#define IDEM_BENCHMARKS_GUARD_RENEWAL_H_

namespace idem::bench {

void RegisterGuardRenewal();

}  // namespace idem::bench

#endif  // IDEM_BENCHMARKS_GUARD_RENEWAL_H_
