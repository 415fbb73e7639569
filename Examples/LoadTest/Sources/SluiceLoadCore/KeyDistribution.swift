import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// How request keys are drawn from `--keys N` keys: `uniform`, `zipf:<s>` (rank r drawn with
/// probability ∝ 1/r^s), or `unique` (every request a key never used before).
public enum KeyDistribution: Sendable, Hashable, CustomStringConvertible {
    case uniform
    case zipf(exponent: Double)
    case unique

    /// Parses `uniform`, `unique` or `zipf:<s>` with `s` a finite number > 0.
    public init(parsing text: String) throws(LoadError) {
        let lower = text.lowercased()
        if lower == "uniform" {
            self = .uniform
        } else if lower == "unique" {
            self = .unique
        } else if lower.hasPrefix("zipf:") {
            guard let exponent = Double(lower.dropFirst(5)), exponent.isFinite, exponent > 0 else {
                throw LoadError("--key-dist: zipf needs an exponent > 0, e.g. zipf:1.1", input: text)
            }
            self = .zipf(exponent: exponent)
        } else {
            throw LoadError("--key-dist must be uniform, unique or zipf:<s>", input: text)
        }
    }

    public var description: String {
        switch self {
        case .uniform: "uniform"
        case .unique: "unique"
        case .zipf(let exponent): "zipf:\(exponent)"
        }
    }
}

/// Draws key numbers for a ``KeyDistribution``. Immutable after `init` (the zipf table) apart
/// from the atomic counter of `unique`, so one sampler serves every loop.
public final class KeySampler: Sendable {
    /// The distribution.
    public let distribution: KeyDistribution
    /// How many keys (`uniform`, `zipf`); ignored by `unique`.
    public let keyCount: Int
    /// For `zipf`: the cumulative probability of ranks `0...i`, ascending, last = 1.
    private let cumulative: [Double]
    private let uniqueCounter = Atomic<UInt64>(0)

    /// A sampler over `keyCount` keys (at least 1).
    public init(distribution: KeyDistribution, keyCount: Int) throws(LoadError) {
        guard keyCount >= 1 else { throw LoadError("--keys must be at least 1", input: "\(keyCount)") }
        self.distribution = distribution
        self.keyCount = keyCount
        if case .zipf(let exponent) = distribution {
            var weights = [Double](repeating: 0, count: keyCount)
            var total = 0.0
            for rank in 0..<keyCount {
                let weight = 1.0 / pow(Double(rank + 1), exponent)
                total += weight
                weights[rank] = total
            }
            for rank in 0..<keyCount { weights[rank] /= total }
            weights[keyCount - 1] = 1.0
            self.cumulative = weights
        } else {
            self.cumulative = []
        }
    }

    /// The next key number: `0..<keyCount` (0 the most popular under zipf), or a fresh number
    /// for `unique`.
    public func next(using random: inout some RandomNumberGenerator) -> UInt64 {
        switch distribution {
        case .uniform:
            return UInt64.random(in: 0..<UInt64(keyCount), using: &random)
        case .unique:
            return uniqueCounter.wrappingAdd(1, ordering: .relaxed).oldValue
        case .zipf:
            return UInt64(rank(forUniform: Double.random(in: 0..<1, using: &random)))
        }
    }

    /// For `zipf`: the rank whose cumulative probability first exceeds `u` (`0 ≤ u < 1`).
    public func rank(forUniform u: Double) -> Int {
        var low = 0
        var high = cumulative.count - 1
        while low < high {
            let middle = (low + high) / 2
            if cumulative[middle] > u { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
