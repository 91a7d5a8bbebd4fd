// ThreadSanitizer suppressions of this test binary (TSan builds only).
//
// gRPC, Abseil and protobuf as Debian ships them are not built with
// ThreadSanitizer: gRPC's locks are absl::Mutex and its own atomics, which
// TSan cannot see, so every hand-over between gRPC's threads (a message
// parsed on one and read on another, an arena freed on a third) looks like
// a race, in gRPC's own frames or in grpcpp's inline header code compiled
// into this binary (whose frames are then the only ones a report shows of
// gRPC's side, beside libstdc++'s). Reports with a frame of those
// libraries or of grpcpp's headers on either side are suppressed; races
// between idem's own accesses (the adapter's executor, its store-call
// pool, the test's threads) are still reported. RocksDB's lines repeat
// backends/rocksdb's weak list, which this strong definition replaces.

#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:librocksdb.so\n"
         "race:librocksdb.so\n"
         "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libgpr.so\n"
         "called_from_lib:libupb.so\n"
         "called_from_lib:libprotobuf.so\n"
         "race:libgrpc\n"
         "race:libgpr.so\n"
         "race:libupb.so\n"
         "race:libabsl_\n"
         "race:libprotobuf.so\n"
         "race:/usr/include/grpcpp/\n";
}
#endif
