// ASAN_POISON_MEMORY_REGION and ASAN_UNPOISON_MEMORY_REGION for the memory
// store's own memory (memory_record_memory.h, memory_block_cache.h): under
// AddressSanitizer a block that is free or cached is poisoned, so a use of
// it is reported as such; in other builds they do nothing.

#ifndef IDEM_BACKENDS_MEMORY_POISON_H_
#define IDEM_BACKENDS_MEMORY_POISON_H_

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

#endif  // IDEM_BACKENDS_MEMORY_POISON_H_
