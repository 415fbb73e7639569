/// A fencing token: the number a record's owner passes with every change it makes elsewhere, so
/// that the place changed can refuse a change from an owner that has been replaced.
///
/// It grows with every claim of the same record, and also across a store that lost its data: its
/// high 42 bits are the store's *epoch* (for `RedisStore`, the Redis clock's millisecond at which
/// the store's epoch marker was written; a store that comes back empty writes a new marker, at a
/// later millisecond), its low 22 bits a counter of the record's claims within that epoch. Tokens
/// of one record compare as numbers (``value``); tokens of different records are not comparable.
///
/// Pass it downstream with the record's identity (``EffectRecord``): a downstream that keeps, per
/// record, the greatest token it has seen, and refuses a call with a smaller one, can never act
/// for an owner whose lease another owner took over, even if that owner was paused between its
/// commit guard and its call.
public struct FencingToken: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The token as one number: `epoch << 22 | counter`.
    public let value: UInt64

    /// The bits of the claim counter (the low part): 4,194,303 claims of one record per epoch.
    public static let counterBits = 22

    /// The largest claim counter.
    public static let maximumCounter = UInt32(1 << counterBits) - 1

    /// The token whose number is `value`.
    public init(value: UInt64) {
        self.value = value
    }

    /// The token of the `counter`-th claim in `epoch` (its millisecond; below 2^42). A counter
    /// above ``maximumCounter`` is cut to its low bits.
    public init(epoch: UInt64, counter: UInt32) {
        self.value = epoch << UInt64(Self.counterBits) | UInt64(counter & Self.maximumCounter)
    }

    /// The store's epoch when the record was claimed (its high part).
    public var epoch: UInt64 { value >> UInt64(Self.counterBits) }

    /// The claim's number within its epoch (its low part).
    public var counter: UInt32 { UInt32(truncatingIfNeeded: value) & Self.maximumCounter }

    public static func < (lhs: FencingToken, rhs: FencingToken) -> Bool { lhs.value < rhs.value }

    /// The token as 20 decimal digits with leading zeros, so that two tokens compare as text
    /// the way they compare as numbers (a Lua script can compare them without losing precision:
    /// Lua's numbers are doubles).
    public var paddedDecimal: String {
        let digits = String(value)
        return String(repeating: "0", count: 20 - digits.count) + digits
    }

    public var description: String { "\(epoch).\(counter)" }
}
