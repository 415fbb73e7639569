/// What the client saw of its payments: which (key, idem) pairs it sent fresh, and the charge
/// id each OK reply named. Two different charge ids for one pair is a double charge seen from
/// the client; unique pairs sent is what `payments` in `STATS` must grow by.
public struct PaymentLedger: Sendable {
    /// Pairs sent for the first time (a duplicate reuses one of these).
    public private(set) var uniquePairsSent = 0
    /// PAY requests that reused an earlier pair.
    public private(set) var duplicatesSent = 0
    /// The charge id first seen for each pair (by pair number).
    public private(set) var charges: [UInt64: String] = [:]
    /// Pairs for which replies named two different charge ids.
    public private(set) var conflictingPairs: Set<UInt64> = []

    public init() {}

    /// Counts a PAY sent; `duplicate` when it reused an earlier pair.
    public mutating func recordSent(duplicate: Bool) {
        if duplicate { duplicatesSent += 1 } else { uniquePairsSent += 1 }
    }

    /// Records the charge id an OK reply named for pair `pair`.
    public mutating func recordCharge(pair: UInt64, chargeID: String) {
        if let known = charges[pair] {
            if known != chargeID { conflictingPairs.insert(pair) }
        } else {
            charges[pair] = chargeID
        }
    }

    /// Adds what `other` saw (another loop's ledger).
    public mutating func merge(_ other: PaymentLedger) {
        uniquePairsSent += other.uniquePairsSent
        duplicatesSent += other.duplicatesSent
        conflictingPairs.formUnion(other.conflictingPairs)
        for (pair, chargeID) in other.charges {
            recordCharge(pair: pair, chargeID: chargeID)
        }
    }
}
