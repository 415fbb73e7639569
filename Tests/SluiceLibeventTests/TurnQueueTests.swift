import SluiceCore
import SluiceLibevent
import SluiceTestSupport
import Synchronization
import Testing

/// What the busy and light connections of one test share.
private final class TurnLog: Sendable {
    /// Turns the busy connections have taken.
    let busyTurns = Atomic<Int>(0)
    /// For each ping, `busyTurns` when it was handled.
    let handledAfterTurns = Mutex<[Int]>([])
}

/// A connection whose first byte is `B` is busy for ever: each call works for 200 µs, consumes
/// nothing and yields its turn (a connection with more work than any turn). One whose first
/// byte is `L` is light: each call notes how many busy turns have run and answers `ok`.
private final class TurnHandler: TCPConnectionHandler {
    private let log: TurnLog
    private var busy: Bool?

    init(log: TurnLog) { self.log = log }

    func connectionOpened(_ connection: TCPConnection) {}

    func connection(_ connection: TCPConnection, received bytes: UnsafeRawBufferPointer) -> Int {
        if busy == nil, let first = bytes.first { busy = first == UInt8(ascii: "B") }
        guard let busy else { return 0 }
        if busy {
            let ends = SluiceLoop.monotonicNow() + .microseconds(200)
            while SluiceLoop.monotonicNow() < ends {}
            log.busyTurns.add(1, ordering: .sequentiallyConsistent)
            connection.yieldTurn()
            return 0
        }
        let turns = log.busyTurns.load(ordering: .sequentiallyConsistent)
        log.handledAfterTurns.withSanitizedLock { $0.append(turns) }
        _ = Array("ok\n".utf8).withUnsafeBytes { connection.write($0) }
        return bytes.count
    }

    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) {}
}

@Suite struct TurnQueueTests {
    /// 100 connections each with more than a turn's work, one connection that sends a little:
    /// the loop serves the busy ones a bounded slice of time per pass, then polls its sockets,
    /// so the light one waits a few turns, not one turn of every busy connection (100 turns,
    /// 20 ms, when every busy connection took its turn in each pass). Counted in turns, not
    /// timed: a slower machine makes fewer turns fit a slice, not more.
    @Test func aLightConnectionWaitsAFewTurnsNotOneTurnOfEveryBusyConnection() async throws {
        let group = try SluiceLoopGroup(loopCount: 1, namePrefix: "turn-queue")
        defer { group.shutdownGracefully() }
        let log = TurnLog()
        let server = try await TCPServer.bind(group: group, configuration: TCPConfiguration(port: 0)) { _ in
            TurnHandler(log: log)
        }
        let light = try LineClient(port: server.port, timeoutSeconds: 20)
        let busyCount = 100
        let load = Array("Busy".utf8)
        var busy: [LineClient] = []
        for _ in 0..<busyCount {
            let client = try LineClient(port: server.port, timeoutSeconds: 20)
            try client.send(load)
            busy.append(client)
        }
        // Every busy connection has had a turn or two: they all cycle through the loop's queue,
        // and keep doing so until the server shuts down.
        try await pollUntil(seconds: 20) { log.busyTurns.load(ordering: .relaxed) >= 2 * busyCount }
        // Turns are counted from after the ping is sent: a test thread preempted between reading
        // the count and sending would otherwise count the busy turns of its own delay.
        var sentAfterTurns: [Int] = []
        for ping in 0..<5 {
            try light.send(ping == 0 ? "Lp" : "p")
            sentAfterTurns.append(log.busyTurns.load(ordering: .sequentiallyConsistent))
            #expect(try await light.readLine() == "ok")
        }
        let handled = log.handledAfterTurns.withSanitizedLock { $0 }
        #expect(handled.count == 5)
        let gaps = zip(handled, sentAfterTurns).map { $0 - $1 }
        // A slice of 1 ms holds about 5 busy turns; the pass under way when the ping arrives
        // may have just begun, and the connections the last pass resumed take one turn each.
        #expect(gaps.allSatisfy { $0 <= 30 }, "busy turns between a ping and its handling: \(gaps)")
        _ = busy
    }
}
