/// Why an effect may not pass its commit point (``EffectContext/commit()``): it must not make
/// its irreversible change, and should throw this error (or return) without doing so. Its
/// record is then given back if it still holds it (nothing was committed), so that a retry runs
/// once. An effect also throws it when its downstream refused or missed a call that the
/// downstream keeps by record (``Code/staleFence``, ``Code/downstreamUnavailable``).
///
/// When the refusal says another owner may hold the record (``Code/leaseNotSafe``,
/// ``Code/leaseLost``, ``Code/staleFence``), the effect's callers are not answered with it:
/// they wait for the record's result as a duplicate does (joining it), and are answered
/// `conflict` if it is still running a lease later, or `unavailable` if the record turns out
/// free (a retry then runs it).
///
/// A code, a message and the offending value (the library's error pattern).
public struct CommitRefusal: Error, Hashable, Sendable, CustomStringConvertible {
    /// Why the commit was refused, as a stable, comparable code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        /// The effect was cancelled (its caller left a single execution, a newer request
        /// replaced it, or the gate's drain ran out of time).
        public static let cancelled = Code(name: "cancelled")
        /// The effect holds a shared store's lease that may run out before its change lands:
        /// the store cannot be reached (its connection is lost, or the lease's last renewal got
        /// no answer), or less than a third of the lease is left by this process's clock (the
        /// process was paused). Another instance could take the record over.
        public static let leaseNotSafe = Code(name: "leaseNotSafe")
        /// The store said another owner holds the record now.
        public static let leaseLost = Code(name: "leaseLost")
        /// The effect is not running under the gate any more.
        public static let notRunning = Code(name: "notRunning")
        /// Thrown by an effect, not by the guard: the downstream refused its call because it has
        /// seen a greater fence for the record (``EffectRecord``): another owner took the record
        /// over. Nothing was changed; the gate answers the effect's callers with the record's
        /// result once its current owner stores it.
        public static let staleFence = Code(name: "staleFence")
        /// Thrown by an effect, not by the guard: the downstream did not answer, and it keeps
        /// its changes by record, so a retry cannot repeat a change that landed. The record is
        /// given back and the callers are answered `unavailable`, so that they retry.
        public static let downstreamUnavailable = Code(name: "downstreamUnavailable")
        public var description: String { name }
    }

    /// Why.
    public let code: Code
    /// A human-readable explanation.
    public let message: String
    /// The offending value (the lease time left, the record).
    public let value: String

    /// Creates a refusal.
    public init(code: Code, message: String, value: String) {
        self.code = code
        self.message = message
        self.value = value
    }

    public var description: String { "CommitRefusal(\(code)): \(message) [\(value)]" }
}

extension CommitRefusal {
    /// Whether another owner may hold the record: the callers then wait for its result.
    var mayHaveAnotherOwner: Bool {
        code == .leaseNotSafe || code == .leaseLost || code == .staleFence
    }
}
