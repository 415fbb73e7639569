/// What the client saw of its payments: which (key, idem) pairs it sent fresh, the charge id
/// each OK reply (HTTP: 201) named, and the pairs answered DECLINED (HTTP: 402). Two different
/// charge ids for one pair, or a pair both charged and declined, is a double execution seen from
/// the client; the pairs charged are what `payments` in `STATS` (HTTP: `sluice_payments_total`)
/// must grow by, the pairs declined what `declines` must grow by.
public struct PaymentLedger: Sendable {
    /// Pairs sent for the first time (a duplicate reuses one of these).
    public private(set) var uniquePairsSent = 0
    /// PAY requests that reused an earlier pair.
    public private(set) var duplicatesSent = 0
    /// The charge id first seen for each pair (by pair number).
    public private(set) var charges: [UInt64: String] = [:]
    /// Pairs answered DECLINED (HTTP: 402), first execution or replay.
    public private(set) var declinedPairs: Set<UInt64> = []
    /// Pairs for which replies named two different charge ids, or both a charge and a decline.
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
            if declinedPairs.contains(pair) { conflictingPairs.insert(pair) }
        }
    }

    /// Records that pair `pair` was answered DECLINED (HTTP: 402).
    public mutating func recordDecline(pair: UInt64) {
        declinedPairs.insert(pair)
        if charges[pair] != nil { conflictingPairs.insert(pair) }
    }

    /// Adds what `other` saw (another loop's ledger).
    public mutating func merge(_ other: PaymentLedger) {
        uniquePairsSent += other.uniquePairsSent
        duplicatesSent += other.duplicatesSent
        conflictingPairs.formUnion(other.conflictingPairs)
        for (pair, chargeID) in other.charges {
            recordCharge(pair: pair, chargeID: chargeID)
        }
        for pair in other.declinedPairs {
            recordDecline(pair: pair)
        }
    }
}
