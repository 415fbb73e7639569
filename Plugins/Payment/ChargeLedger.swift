import Sluice

/// A payment processor's book of charges, kept by record identity as a good provider keeps
/// them by idempotency key: the downstream end that makes a charge exactly-once.
///
/// For each record (`EffectRecord.downstreamKey`) it keeps the charge made and the greatest
/// fence it has seen. A call whose fence is smaller than that is refused as stale, charging
/// nothing (its owner was replaced: another instance took the record over); a call for a record
/// already charged returns that charge; otherwise it records the new charge. Checking and
/// recording are one step, so two owners racing for a record get one charge between them.
public protocol ChargeLedger: Sendable {
    /// Charges `call` unless its record was charged already or its fence is stale. `caller` is
    /// where the call comes from (the effect's loop): a ledger keeping a connection per loop
    /// picks the caller's, and a simulation passes a caller of its own.
    ///
    /// - Throws: ``ChargeLedgerError`` when the ledger cannot answer: then nothing is known
    ///   about the call, and only a retry with the same record can tell.
    func charge(_ call: LedgerCall, on caller: any StoreCaller) async throws(ChargeLedgerError) -> LedgerAnswer
}

/// One call to a ``ChargeLedger``.
public struct LedgerCall: Sendable, Hashable {
    /// The record's identity (`EffectRecord.downstreamKey`): the provider's idempotency key.
    public let record: String
    /// The fence of the caller's claim.
    public let fence: FencingToken
    /// The amount in minor units.
    public let amount: Int
    /// The id the charge gets if this call makes it.
    public let chargeID: String

    /// A call for `record` with `fence`, charging `amount` as `chargeID`.
    public init(record: String, fence: FencingToken, amount: Int, chargeID: String) {
        self.record = record
        self.fence = fence
        self.amount = amount
        self.chargeID = chargeID
    }
}

/// What a ``ChargeLedger`` did with a call.
public enum LedgerAnswer: Sendable, Hashable {
    /// It made the charge, with the call's id.
    case charged(String)
    /// The record was charged before (with this id); nothing new was charged.
    case alreadyCharged(String)
    /// The ledger has seen a greater fence for the record (`newest`): nothing was charged.
    case stale(newest: FencingToken)
}

/// A ledger that could not answer: a code, a message and the offending value.
public struct ChargeLedgerError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Why, as a stable, comparable code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        /// The ledger did not answer (unreachable, too slow).
        public static let unavailable = Code(name: "unavailable")
        /// The ledger is full of live entries and refuses new records.
        public static let full = Code(name: "full")
        /// The ledger answered something it should not have.
        public static let protocolError = Code(name: "protocolError")
        public var description: String { name }
    }

    /// Why.
    public let code: Code
    /// A human-readable explanation.
    public let message: String
    /// The offending value (the record, the reply).
    public let value: String

    /// Creates an error.
    public init(code: Code, message: String, value: String) {
        self.code = code
        self.message = message
        self.value = value
    }

    public var description: String { "ChargeLedgerError(\(code)): \(message) [\(value)]" }
}
