#ifndef SLUICE_CSLUICECACHEHINTS_H
#define SLUICE_CSLUICECACHEHINTS_H

#include <stdint.h>

/// Asks the processor to start loading the cache line at `address` for a read, and returns at
/// once. A hint only: it never faults (an address that is not mapped, or no longer is, is
/// ignored), and it changes nothing any program computes.
static inline __attribute__((always_inline)) void sluice_prefetch(uintptr_t address) {
    __builtin_prefetch((const void *)address, 0, 3);
}

#endif
