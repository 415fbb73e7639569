import DequeModule
import SluiceCore
import SluiceLibevent
import SluiceLineProtocol
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One load connection: sends requests, matches replies by id (or in order, raw echo),
/// records latency and checks every reply. All methods run on its loop's thread.
final class LoadConnection: TCPLineHandler, LoadClient {
    /// A request waiting for its reply.
    struct InFlight {
        var verb: Verb
        /// The (intended) send time, ns on the monotonic clock.
        var start: Int64
        /// PAY: the pair number; SEARCH: the query number.
        var tag: UInt64
    }

    let index: Int
    private let state: LoopState
    private let shared: LoadShared
    /// Strong: the connection holds this handler until it closes, and closing drops that
    /// reference, which breaks the cycle (every connection is closed by `LoopState.finish`).
    private var connection: TCPConnection?
    private var nextID: UInt64 = 1
    private var inFlight: InFlightTable<InFlight>
    private var rawInFlight = Deque<Int64>()
    private var line: [UInt8] = []
    /// Open loop: when the next request is due.
    var nextIntendedSend: Int64 = 0

    init(index: Int, state: LoopState) {
        self.index = index
        self.state = state
        self.shared = state.shared
        line.reserveCapacity(256)
        inFlight = InFlightTable(capacity: state.shared.configuration.depth)
    }

    /// Requests sent and not answered yet.
    var outstanding: Int { shared.configuration.rawEcho ? rawInFlight.count : inFlight.count }

    func close() {
        connection?.close()
    }

    // MARK: Sending

    /// Closed loop: fills the pipeline to `depth`.
    func startClosedLoop() {
        let now = SluiceLoop.monotonicNow().nanoseconds
        for _ in 0..<shared.configuration.depth {
            guard send(start: now) else { return }
        }
    }

    /// Open loop: sends every request due by `now`, each timed from its intended send instant.
    func sendDue(now: Int64, interval: Int64) {
        let deadline = shared.sendDeadline.load(ordering: .relaxed)
        while nextIntendedSend <= now && nextIntendedSend < deadline {
            guard send(start: nextIntendedSend) else { return }
            nextIntendedSend += interval
        }
    }

    /// Builds and writes one request if the budget allows; `false` when no more may be sent.
    @discardableResult
    private func send(start: Int64) -> Bool {
        guard let connection, connection.isOpen, shared.claim() else { return false }
        if shared.configuration.rawEcho {
            rawInFlight.append(start)
            shared.payload.withUnsafeBytes { _ = connection.write($0) }
            state.stats.recordSent(.echo)
            state.sentCount.add(1, ordering: .relaxed)
            return true
        }
        let verb = shared.configuration.mix.pick(using: &state.random)
        let id = nextID
        nextID += 1
        line.removeAll(keepingCapacity: true)
        line.appendDecimal(id)
        line.append(0x20)
        line.append(contentsOf: verb.wireBytes)
        var tag: UInt64 = 0
        switch verb {
        case .echo:
            line.append(0x20)
            line.append(contentsOf: shared.payload)
        case .tap:
            line.append(0x20)
            appendKey(shared.sampler.next(using: &state.random))
        case .pay:
            let payment = state.nextPayment(connection: index)
            tag = payment.pair
            line.append(0x20)
            appendKey(payment.key)
            line.append(0x20)
            line.append(contentsOf: shared.idemPrefix)
            line.appendDecimal(payment.pair)
            line.append(0x20)
            line.appendDecimal(PaymentRecord.amount(ofPair: payment.pair))
        case .search:
            tag = id
            line.append(0x20)
            appendKey(shared.sampler.next(using: &state.random))
            line.append(contentsOf: " q".utf8)
            line.appendDecimal(id)
        }
        line.append(0x0A)
        inFlight.insert(InFlight(verb: verb, start: start, tag: tag), id: id)
        line.withUnsafeBytes { _ = connection.write($0) }
        state.stats.recordSent(verb)
        state.sentCount.add(1, ordering: .relaxed)
        return true
    }

    private func appendKey(_ key: UInt64) {
        line.append(contentsOf: shared.keyPrefix)
        line.appendDecimal(key)
    }

    // MARK: TCPLineHandler

    func connectionOpened(_ connection: TCPConnection) {
        self.connection = connection
        state.connections.append(self)
        state.openConnections.add(1, ordering: .relaxed)
    }

    func connection(_ connection: TCPConnection, received line: UnsafeRawBufferPointer) {
        let now = SluiceLoop.monotonicNow().nanoseconds
        if shared.configuration.rawEcho {
            receivedRaw(line, now: now)
        } else {
            received(line, now: now)
        }
        if shared.configuration.rate == nil {
            send(start: now)
        }
    }

    private func receivedRaw(_ line: UnsafeRawBufferPointer, now: Int64) {
        guard let start = rawInFlight.popFirst() else {
            state.outcome.unmatchedReplies += 1
            state.errorCount.add(1, ordering: .relaxed)
            state.sample("unmatched", line)
            return
        }
        state.stats.record(.echo, .ok, latencyNanoseconds: now - start)
        state.repliedCount.add(1, ordering: .relaxed)
        let expected = shared.payload.count - 1
        let matches = line.count == expected && shared.payload.withUnsafeBytes { bytesEqual(line, UnsafeRawBufferPointer(rebasing: $0.prefix(expected))) }
        if !matches {
            state.outcome.badReplies += 1
            state.errorCount.add(1, ordering: .relaxed)
            state.sample("echo differs", line)
        }
    }

    private func received(_ line: UnsafeRawBufferPointer, now: Int64) {
        guard var fields = ReplyFields(line) else {
            state.outcome.unexpectedReplies += 1
            state.errorCount.add(1, ordering: .relaxed)
            state.sample("unparseable", line)
            return
        }
        if fields.isConnectionError {
            state.outcome.connectionErrors += 1
            state.errorCount.add(1, ordering: .relaxed)
            state.sample("connection error", line)
            return
        }
        if shared.configuration.verbatimEcho, fields.isVerbatimEcho {
            fields.kind = .ok
        }
        guard let id = fields.id, let request = inFlight.remove(id: id) else {
            state.outcome.unmatchedReplies += 1
            state.errorCount.add(1, ordering: .relaxed)
            state.sample("unmatched", line)
            return
        }
        state.stats.record(request.verb, fields.kind, latencyNanoseconds: now - request.start)
        state.repliedCount.add(1, ordering: .relaxed)
        if fields.kind == .error, Self.isBusy(fields.details) {
            state.outcome.busyReplies += 1
            return
        }
        if fields.kind == .error {
            state.outcome.errorReplies += 1
            state.errorCount.add(1, ordering: .relaxed)
            state.sample("ERR to \(request.verb.wireName)", line)
            return
        }
        guard fields.kind.isExpected(for: request.verb) else {
            state.outcome.unexpectedReplies += 1
            state.errorCount.add(1, ordering: .relaxed)
            state.sample("unexpected to \(request.verb.wireName)", line)
            return
        }
        if !replyMatches(fields, request) {
            state.outcome.badReplies += 1
            state.errorCount.add(1, ordering: .relaxed)
            state.sample("reply differs from \(request.verb.wireName)", line)
        }
    }

    /// Whether the reply's details agree with the request (ECHO text, SEARCH query, a charge id
    /// for a PAY that ran, a tap count for a TAP that ran).
    private func replyMatches(_ fields: ReplyFields, _ request: InFlight) -> Bool {
        switch (request.verb, fields.kind) {
        case (.echo, .ok):
            return shared.payload.withUnsafeBytes { bytesEqual(fields.details, $0) }
        case (.search, .ok):
            guard let results = fields.field("results"), results.first == UInt8(ascii: "q") else { return false }
            return ReplyFields.decimal(UnsafeRawBufferPointer(rebasing: results.dropFirst())) == request.tag
        case (.pay, .ok), (.pay, .okReplayed):
            guard let charge = fields.field("charge"), !charge.isEmpty else { return false }
            state.ledger.recordCharge(pair: request.tag, chargeID: String(decoding: charge, as: UTF8.self))
            return true
        case (.pay, .declined), (.pay, .declinedReplayed):
            state.ledger.recordDecline(pair: request.tag)
            return true
        case (.tap, .ok):
            return fields.field("tap") != nil
        default:
            return true
        }
    }

    func connectionReceivedOverlongLine(_ connection: TCPConnection) {
        state.outcome.unexpectedReplies += 1
        state.errorCount.add(1, ordering: .relaxed)
        if state.samples.count < 10 { state.samples.append("a reply line longer than the maximum") }
    }

    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) {
        state.openConnections.subtract(1, ordering: .relaxed)
        if !shared.finished.load(ordering: .relaxed) {
            state.outcome.connectionsClosedEarly += 1
            state.errorCount.add(1, ordering: .relaxed)
            if state.samples.count < 10 { state.samples.append("connection \(index) closed early: \(reason)") }
        }
    }
}

extension [UInt8] {
    /// Appends `value` in decimal ASCII.
    @inline(__always)
    mutating func appendDecimal(_ value: UInt64) {
        var digits = 1
        var scan = value
        while scan >= 10 {
            scan /= 10
            digits += 1
        }
        let start = count
        append(contentsOf: repeatElement(0, count: digits))
        var rest = value
        for position in stride(from: start + digits - 1, through: start, by: -1) {
            self[position] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        }
    }
}

extension LoadConnection {
    /// Whether an `ERR` reply's details are `busy`.
    static func isBusy(_ details: UnsafeRawBufferPointer) -> Bool {
        details.count == 4 && details.elementsEqual("busy".utf8)
    }
}

/// Whether two byte ranges hold the same bytes (`memcmp`).
@inline(__always)
func bytesEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    guard a.count == b.count else { return false }
    guard a.count > 0, let left = a.baseAddress, let right = b.baseAddress else { return true }
    return memcmp(left, right, a.count) == 0
}
