import SluiceCore
import SluiceLibevent
import Synchronization

/// What one client loop records: the statistics, the payment ledger and the tallies of the
/// checks, plus atomic progress counters the reporter reads from another thread.
final class LoopState: @unchecked Sendable {
    // @unchecked Sendable: every `var` here is touched only on `loop`'s thread (the
    // connections' callbacks, the ticker, and `loop.submit` closures); the runner reads the
    // atomics from outside, which is what they are for.

    let loop: SluiceLoop
    let shared: LoadShared
    var random: SplitMix64
    var stats = LatencyStats()
    var ledger = PaymentLedger()
    var outcome = LoadOutcome()
    /// The first few unexpected lines, for the report.
    var samples: [String] = []
    var connections: [any LoadClient] = []
    /// HTTP mode: responses per status code (index = status, 100…599).
    var httpStatuses = [Int](repeating: 0, count: 600)
    private var ticker: LoopTimer?

    let sentCount = Atomic<Int>(0)
    let repliedCount = Atomic<Int>(0)
    /// Requests sent that will never be answered: HTTP mode counts here those of a connection it
    /// lost or that the server closed behind them, so the drain does not wait for them.
    let abandonedCount = Atomic<Int>(0)
    let errorCount = Atomic<Int>(0)
    let openConnections = Atomic<Int>(0)

    init(loop: SluiceLoop, shared: LoadShared, seed: UInt64) {
        self.loop = loop
        self.shared = shared
        self.random = SplitMix64(seed: seed)
    }

    /// Keeps a line for the report (at most 10).
    func sample(_ what: String, _ line: UnsafeRawBufferPointer) {
        guard samples.count < 10 else { return }
        samples.append("\(what): \(String(decoding: line.prefix(200), as: UTF8.self))")
    }

    /// Counts a response with HTTP status `status` (100…599).
    func countStatus(_ status: Int) {
        if httpStatuses.indices.contains(status) { httpStatuses[status] += 1 }
    }

    /// A fresh payment for connection `connection`, or (with probability `--dup-ratio`) a
    /// recent one another connection sent; counted in the ledger either way.
    func nextPayment(connection: Int) -> PaymentRecord {
        let ratio = shared.configuration.dupRatio
        if ratio > 0, Double.random(in: 0..<1, using: &random) < ratio,
            let duplicate = shared.duplicate(excludingConnection: connection, draw: random.next())
        {
            ledger.recordSent(duplicate: true)
            return duplicate
        }
        let payment = PaymentRecord(pair: shared.nextPair(), key: shared.sampler.next(using: &random), connection: connection)
        ledger.recordSent(duplicate: false)
        if ratio > 0 { shared.publish(payment) }
        return payment
    }

    /// Starts every connection of this loop (loop thread).
    func start(at start: Int64) {
        if let interval = shared.configuration.openLoopInterval {
            let step = interval.nanosecondsClamped
            let total = shared.configuration.connections
            for connection in connections {
                // Spread the connections' send instants over one interval.
                connection.nextIntendedSend = start + step * Int64(connection.index) / Int64(total)
            }
            tick()
        } else {
            for connection in connections { connection.startClosedLoop() }
        }
    }

    /// Open loop: sends every request whose intended time has come, then sleeps until the next
    /// one is due (a precise loop timer: a late client would add its own lateness to the
    /// latencies it measures from the intended send times).
    private func tick() {
        let now = SluiceLoop.monotonicNow().nanoseconds
        guard let interval = shared.configuration.openLoopInterval?.nanosecondsClamped else { return }
        var next = Int64.max
        for connection in connections {
            connection.sendDue(now: now, interval: interval)
            next = min(next, connection.nextIntendedSend)
        }
        guard !shared.stopSending.load(ordering: .relaxed),
            next < shared.sendDeadline.load(ordering: .relaxed)
        else { return }
        // A connection that could not send (closed) keeps its due time: retry in 1 ms, not at once.
        let at = next > now ? next : now + 1_000_000
        ticker = loop.schedule(at: Instant(nanoseconds: at)) { [self] in tick() }
    }

    /// Open loop, at the run's deadline: sends whatever was due before it and is not sent yet
    /// (a loop that fell behind catches up), so that the run sends one request per intended
    /// instant before the deadline however fast the machine is. Each is timed from its intended
    /// instant, so its lateness shows in the latencies.
    func sendEverythingDue() {
        guard let interval = shared.configuration.openLoopInterval?.nanosecondsClamped else { return }
        for connection in connections {
            connection.sendDue(now: .max, interval: interval)
        }
    }

    /// Ends the run on this loop: counts what is still unanswered, closes the connections and
    /// returns what was recorded (loop thread).
    func finish() -> LoopResult {
        ticker?.cancel()
        ticker = nil
        for connection in connections {
            outcome.missingReplies += connection.outstanding
            connection.close()
        }
        connections.removeAll()
        outcome.sent = sentCount.load(ordering: .relaxed)
        outcome.replies = repliedCount.load(ordering: .relaxed)
        for (status, count) in httpStatuses.enumerated() where count > 0 {
            outcome.httpStatuses[String(status), default: 0] += count
        }
        return LoopResult(stats: stats, ledger: ledger, outcome: outcome, samples: samples)
    }
}

/// What one loop recorded, handed to the runner at the end.
struct LoopResult: Sendable {
    var stats: LatencyStats
    var ledger: PaymentLedger
    var outcome: LoadOutcome
    var samples: [String]
}
