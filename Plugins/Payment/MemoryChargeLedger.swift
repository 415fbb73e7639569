import Sluice
import SluiceCore
import SluiceLibevent
import Synchronization

/// A ``ChargeLedger`` in this process's memory: the default ledger of ``SimulatedProcessor``.
///
/// Entries are kept for `retention` from their charge (a provider forgets idempotency keys
/// after a day, and so should the records it is paired with), at most `capacity` of them; a
/// ledger full of live entries refuses new records (``ChargeLedgerError/Code/full``) rather
/// than forget a charge. Instances that share a store but not a ledger each keep their own:
/// what one charged, another does not know.
public final class MemoryChargeLedger: ChargeLedger {
    private struct Entry {
        var fence: FencingToken
        let charge: String
        let expiresAt: Instant
    }

    private let entries = Mutex<[String: Entry]>([:])
    private let retention: Duration
    private let capacity: Int
    private let now: @Sendable () -> Instant

    /// A ledger keeping each charge `retention`, at most `capacity` of them, on the clock `now`.
    public init(
        retention: Duration = .seconds(24 * 60 * 60), capacity: Int = 1 << 20,
        now: @escaping @Sendable () -> Instant = { SluiceLoop.monotonicNow() }
    ) {
        self.retention = retention
        self.capacity = max(1, capacity)
        self.now = now
    }

    /// Live entries (charged records) now.
    public var count: Int {
        let t = now()
        return entries.withSanitizedLock { $0.values.count { t < $0.expiresAt } }
    }

    /// The charge recorded for `record`, if any.
    public func charge(of record: String) -> String? {
        let t = now()
        return entries.withSanitizedLock { entries in
            entries[record].flatMap { t < $0.expiresAt ? $0.charge : nil }
        }
    }

    public func charge(_ call: LedgerCall, on caller: any StoreCaller) async throws(ChargeLedgerError) -> LedgerAnswer {
        let t = now()
        let capacity = self.capacity
        let retention = self.retention
        let answer = entries.withSanitizedLock { entries -> LedgerAnswer? in
            if var entry = entries[call.record], t < entry.expiresAt {
                if call.fence < entry.fence { return .stale(newest: entry.fence) }
                entry.fence = call.fence
                entries[call.record] = entry
                return .alreadyCharged(entry.charge)
            }
            if entries[call.record] == nil, entries.count >= capacity {
                entries = entries.filter { t < $0.value.expiresAt }
                guard entries.count < capacity else { return nil }
            }
            entries[call.record] = Entry(fence: call.fence, charge: call.chargeID, expiresAt: t + retention)
            return .charged(call.chargeID)
        }
        guard let answer else {
            throw ChargeLedgerError(code: .full, message: "the ledger is full of live charges", value: call.record)
        }
        return answer
    }
}
