import SluiceCore
import SluiceLibevent
import Synchronization

/// State every client loop shares during a run: the configuration, the request budget, the
/// stop flag and the pool of recent payments that duplicates reuse. Everything mutable is
/// atomic or behind a `Mutex`.
final class LoadShared: Sendable {
    let configuration: LoadConfiguration
    let sampler: KeySampler
    /// Distinguishes this run's idem keys (and `unique` keys) from earlier runs' on the same
    /// server.
    let nonce: String
    /// The ECHO text (protocol mode) or the whole line with its LF (raw echo).
    let payload: [UInt8]
    /// What key number `n`'s name starts with: `k`, or `k<nonce>-` for `unique` keys.
    let keyPrefix: [UInt8]
    /// What pair number `p`'s idem key starts with: `<nonce>-`.
    let idemPrefix: [UInt8]
    /// Requests left to claim (`Int.max` for a timed run).
    private let remaining: Atomic<Int>
    /// Timed runs: the instant (monotonic ns) from which no request is due any more (open loop
    /// stops scheduling there exactly); `Int64.max` for a counted run.
    let sendDeadline = Atomic<Int64>(Int64.max)
    /// Set once no more requests may start.
    let stopSending = Atomic<Bool>(false)
    /// Set when the run has ended (connections closing now are not failures).
    let finished = Atomic<Bool>(false)
    private let pairCounter = Atomic<UInt64>(0)
    private let duplicates = Mutex(DuplicatePool())

    init(configuration: LoadConfiguration, nonce: String) throws(LoadError) {
        self.configuration = configuration
        self.sampler = try KeySampler(distribution: configuration.keyDistribution, keyCount: configuration.keys)
        self.nonce = nonce
        if case .unique = configuration.keyDistribution {
            self.keyPrefix = Array("k\(nonce)-".utf8)
        } else {
            self.keyPrefix = Array("k".utf8)
        }
        self.idemPrefix = Array("\(nonce)-".utf8)
        if configuration.rawEcho {
            var line = (0..<(configuration.lineBytes - 1)).map { UInt8(ascii: "a") + UInt8($0 % 26) }
            line.append(0x0A)
            self.payload = line
        } else {
            self.payload = (0..<configuration.echoBytes).map { UInt8(ascii: "a") + UInt8($0 % 26) }
        }
        switch configuration.limit {
        case .requests(let count): remaining = Atomic(count)
        case .duration: remaining = Atomic(Int.max)
        }
    }

    /// Claims the right to send one request; `false` once the budget is spent or sending stopped.
    @inline(__always)
    func claim() -> Bool {
        if stopSending.load(ordering: .relaxed) { return false }
        if remaining.wrappingSubtract(1, ordering: .relaxed).oldValue > 0 { return true }
        stopSending.store(true, ordering: .relaxed)
        return false
    }

    /// A fresh payment pair number.
    func nextPair() -> UInt64 {
        pairCounter.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    /// Offers a freshly sent payment for later duplicates.
    func publish(_ payment: PaymentRecord) {
        duplicates.withSanitizedLock { $0.add(payment) }
    }

    /// A recent payment sent by another connection, if any.
    func duplicate(excludingConnection connection: Int, draw: UInt64) -> PaymentRecord? {
        duplicates.withSanitizedLock { $0.pick(excludingConnection: connection, draw: draw) }
    }
}

/// One (key, idem, amount) payment, as sent.
struct PaymentRecord: Sendable {
    var pair: UInt64
    var key: UInt64
    var connection: Int

    /// The amount of a pair: fixed per pair (a duplicate must not be a MISMATCH), 1…999999 so
    /// it is never declined (≥ 1000000 is).
    static func amount(ofPair pair: UInt64) -> UInt64 { 1 + (pair &* 7919) % 999_999 }
}

/// The most recent payments, for duplicates to reuse.
struct DuplicatePool: Sendable {
    static let capacity = 4096
    private var ring: [PaymentRecord] = []
    private var next = 0

    mutating func add(_ payment: PaymentRecord) {
        if ring.count < Self.capacity {
            ring.append(payment)
        } else {
            ring[next] = payment
            next = (next + 1) % Self.capacity
        }
    }

    /// One of the most recent payments not sent by `connection` (a few tries), if any.
    func pick(excludingConnection connection: Int, draw: UInt64) -> PaymentRecord? {
        guard !ring.isEmpty else { return nil }
        // Prefer the newest ones (likely still in flight): draw among the last 64.
        let window = min(ring.count, 64)
        for attempt in 0..<4 {
            let back = Int((draw >> UInt64(attempt * 8)) % UInt64(window))
            let newest = ring.count < Self.capacity ? ring.count - 1 : (next - 1 + Self.capacity) % Self.capacity
            let index = (newest - back + ring.count) % ring.count
            if ring[index].connection != connection { return ring[index] }
        }
        return nil
    }
}
