/// A small random number generator with state of its own (SplitMix64), seeded once. The load
/// tester keeps one per client loop, so that runs with the same `--seed` make the same choices.
///
/// Jitter on a request path (a poll's delay, a reconnect's backoff) draws from one of these,
/// kept by its owner (a lane, a connection) and used where that owner is used. The system
/// generator has no state at all: every `inout` access to one shares a single address, which
/// ThreadSanitizer reports as a race between two threads drawing at once. A seeded generator
/// also lets a test replay a sequence.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator starting from `seed`.
    public init(seed: UInt64) {
        state = seed
    }

    /// A generator seeded from the system's generator.
    public init() {
        self.init(seed: UInt64.random(in: .min ... .max))
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
