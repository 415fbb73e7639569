#ifndef SLUICE_CSLUICECACHEHINTS_H
#define SLUICE_CSLUICECACHEHINTS_H

#include <stdint.h>

/// Asks the processor to start loading the cache line at `address` for a read, and returns at
/// once. A hint only: it never faults (an address that is not mapped, or no longer is, is
/// ignored), and it changes nothing any program computes.
static inline __attribute__((always_inline)) void sluice_prefetch(uintptr_t address) {
    __builtin_prefetch((const void *)address, 0, 3);
}

/// Tells the processor that this thread is waiting in a spin loop (x86's `pause`, Arm's
/// `yield`): the loop then leaves more of the core to its sibling thread, and on x86 it takes
/// less power and leaving it costs no pipeline flush when the awaited write comes. A hint only.
static inline __attribute__((always_inline)) void sluice_spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

#endif
