import SluiceLibevent
import Synchronization

/// The (key, idem) → charge id records of ``FakeProtocolServer``: each fake has its own, or
/// several share one, as `sluice-echo` instances share one store. Charge ids carry a prefix of
/// the store, so two stores never hand out the same id.
final class FakeChargeStore: Sendable {
    private let charges = Mutex([String: String]())
    private let counter = Atomic<Int>(0)
    private let prefix = String(UInt32.random(in: 0...UInt32.max), radix: 36)

    /// The charge of `record`: the one stored (replayed), or a new one stored now, unless
    /// `idempotent` is false (then every call charges anew).
    func charge(_ record: String, idempotent: Bool) -> (charge: String, replayed: Bool) {
        charges.withSanitizedLock { charges in
            if idempotent, let known = charges[record] { return (known, true) }
            let charge = "ch\(prefix)_\(counter.wrappingAdd(1, ordering: .relaxed).newValue)"
            charges[record] = charge
            return (charge, false)
        }
    }
}
