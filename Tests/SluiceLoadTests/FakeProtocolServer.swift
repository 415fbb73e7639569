import SluiceCore
import SluiceLibevent
import SluiceLineProtocol
import Synchronization

/// A tiny in-test server speaking sluice-echo's line protocol well enough for the
/// load tool: PING, ECHO, TAP (never throttles), PAY (idempotent per (key, idem): one charge,
/// duplicates replayed), SEARCH (replied after a short delay, so replies overtake each other),
/// STATS. A `Fault` makes it misbehave in one precise way, for checks that must fail.
final class FakeProtocolServer: Sendable {
    enum Fault: Sendable, Equatable {
        case none
        /// Every PAY charges anew (no idempotency): a double charge for every duplicate.
        case chargeEveryPay
        /// The n-th request (counting from 1) gets no reply.
        case dropReply(Int)
        /// TAP answers `ERR internal` (an effect that failed).
        case errOnTap
        /// TAP answers `ERR busy` (a refusal the protocol allows).
        case busyOnTap
        /// ECHO answers with other text.
        case corruptEcho
    }

    /// This instance's counters (what its `STATS` reports): the charges it made itself, also
    /// when its (key, idem) records are in a store shared with other instances.
    struct Ledger: Sendable {
        var payments = 0
        var taps = 0
        var searches = 0
    }

    let fault: Fault
    let ledger = Mutex(Ledger())
    let requests = Atomic<Int>(0)
    /// The (key, idem) records: this server's own unless it is given one shared with others.
    let store: FakeChargeStore
    /// Connections that sent a request other than `STATS` (the load's, not the probes').
    let loadConnections = Atomic<Int>(0)

    init(fault: Fault, store: FakeChargeStore = FakeChargeStore()) {
        self.fault = fault
        self.store = store
    }

    /// The reply to one request line, or `nil` for no reply (SEARCH replies later).
    func reply(to text: String, connection: TCPConnection) -> String? {
        let number = requests.wrappingAdd(1, ordering: .relaxed).newValue
        let parts = text.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2 else { return "- ERR malformed" }
        let id = parts[0]
        if case .dropReply(let dropped) = fault, dropped == number { return nil }
        let rest = parts.count > 2 ? parts[2] : ""
        switch parts[1].uppercased() {
        case "PING":
            return "\(id) PONG"
        case "ECHO":
            return fault == .corruptEcho ? "\(id) OK x\(rest)" : "\(id) OK \(rest)"
        case "TAP":
            if fault == .errOnTap { return "\(id) ERR internal" }
            if fault == .busyOnTap { return "\(id) ERR busy" }
            let taps = ledger.withSanitizedLock { $0.taps += 1; return $0.taps }
            return "\(id) OK tap=\(taps)"
        case "PAY":
            let args = rest.split(separator: " ").map(String.init)
            guard args.count == 3 else { return "\(id) ERR usage PAY" }
            let (charge, replayed) = store.charge(args[0] + " " + args[1], idempotent: fault != .chargeEveryPay)
            if !replayed { ledger.withSanitizedLock { $0.payments += 1 } }
            return "\(id) OK charge=\(charge)" + (replayed ? " replayed=true" : "")
        case "SEARCH":
            let args = rest.split(separator: " ", maxSplits: 1).map(String.init)
            guard args.count == 2 else { return "\(id) ERR usage SEARCH" }
            ledger.withSanitizedLock { $0.searches += 1 }
            let reply = "\(id) OK results=\(args[1])\n"
            connection.loop.schedule(after: .milliseconds(2)) { connection.write(reply) }
            return nil
        case "STATS":
            let snapshot = ledger.withSanitizedLock { $0 }
            return "\(id) OK taps=\(snapshot.taps) payments=\(snapshot.payments) declines=0 searches=\(snapshot.searches) cancelled=0 keys=0 connections=0"
        default:
            return "\(id) ERR unknown-verb"
        }
    }
}

/// Replies through a ``FakeProtocolServer`` (or echoes raw lines).
final class FakeHandler: TCPLineHandler {
    let server: FakeProtocolServer?
    let corruptRaw: Bool
    /// Whether this connection was counted in the server's `loadConnections`.
    private var counted = false

    init(server: FakeProtocolServer?, corruptRaw: Bool = false) {
        self.server = server
        self.corruptRaw = corruptRaw
    }

    func connectionOpened(_ connection: TCPConnection) {}

    func connection(_ connection: TCPConnection, received line: UnsafeRawBufferPointer) {
        guard let server else {
            var reply = Array(line)
            if corruptRaw, !reply.isEmpty { reply[0] = UInt8(ascii: "#") }
            reply.append(0x0A)
            reply.withUnsafeBytes { _ = connection.write($0) }
            return
        }
        let text = String(decoding: line, as: UTF8.self)
        if !counted && !text.hasSuffix(" STATS") {
            counted = true
            server.loadConnections.wrappingAdd(1, ordering: .relaxed)
        }
        if let reply = server.reply(to: text, connection: connection) {
            connection.write(reply + "\n")
        }
    }

    func connectionReceivedOverlongLine(_ connection: TCPConnection) {
        connection.write("- ERR line-too-long\n")
    }

    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) {}
}

/// Runs `body` with a fake server listening on a free port.
func withFakeServer(
    _ server: FakeProtocolServer?, corruptRaw: Bool = false, _ body: (Int) async throws -> Void
) async throws {
    let group = try SluiceLoopGroup(loopCount: 1, namePrefix: "fake")
    do {
        let tcp = try await TCPServer.bind(group: group, configuration: TCPConfiguration(port: 0)) { _ in
            FakeHandler(server: server, corruptRaw: corruptRaw)
        }
        try await body(tcp.port)
    } catch {
        group.shutdownGracefully()
        throw error
    }
    group.shutdownGracefully()
}
