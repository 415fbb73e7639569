import Sluice
import SluiceLineProtocol
import SluicePluginTesting
import SluiceTestSupport
import Testing

/// What one client may hold of the server: requests in flight, connections, time per line.
@Suite struct ConnectionBoundsTests {
    /// At the cap of requests in flight, a connection stops reading: the lines behind wait in
    /// the socket until replies have gone out, and each reply lets one more line in. A `PING`
    /// sent behind ten slow payments (cap 4) is read once the last two payments are in flight
    /// and a reply of the second round has gone out: after seven replies, or eight if the
    /// second round's replies all went out before the connection read again.
    @Test func aConnectionStopsReadingAtItsCapOfRequestsInFlight() async throws {
        try await withServer(configure: { $0.maximumInFlight = 4 }) { server in
            let client = try server.client()
            var lines = (0..<10).map { "\($0) PAY acct\($0) i\($0) 100\n" }.joined()
            lines += "p PING\n"
            try client.send(lines)
            var replies: [String] = []
            for expected in [4, 4, 2] {
                try await pollUntil { await server.executions() == expected }
                // Whatever the session read has reached its shard: still no more than the cap.
                for loop in server.group.loops { await loop.submit {} }
                #expect(await server.executions() == expected)
                await server.clock.advance(by: .milliseconds(20))
                replies += try await client.readLines(expected == 2 ? 3 : 4)
            }
            let pong = try #require(replies.firstIndex(of: "p PONG"))
            #expect((7...8).contains(pong))
            #expect(replies.filter { $0.contains(" OK charge=") }.count == 10)
        }
    }

    /// Over the connection cap, a new connection reads why and is closed; once a connection
    /// has gone, a new one is served again.
    @Test func connectionsOverTheCapAreToldWhyAndClosed() async throws {
        try await withServer(configure: { $0.tcp.maximumConnections = 2 }) { server in
            let first = try server.client()
            let second = try server.client()
            try first.send("1 PING\n")
            try second.send("2 PING\n")
            #expect(try await first.readLine() == "1 PONG")
            #expect(try await second.readLine() == "2 PONG")
            let third = try server.client()
            #expect(try await third.readLine() == "- ERR too-many-connections")
            #expect(try await third.waitForClose())
            first.abort()
            try await pollUntil { server.server.connectionCount == 1 }
            let fourth = try server.client()
            try fourth.send("4 PING\n")
            #expect(try await fourth.readLine() == "4 PONG")
        }
    }

    /// A line must be complete within the line timeout of its first byte: bytes trickling in
    /// do not extend it, as they do the idle timeout. On a manual loop clock, one loop.
    @Test func aTricklingLineIsClosedAtTheLineTimeout() async throws {
        let loopClock = ManualLoopClock()
        try await withServer(loops: 1, loopClock: loopClock, configure: {
            $0.framing.lineTimeout = .seconds(10)
            $0.tcp.idleTimeout = .seconds(60)
        }) { server in
            let healthy = try server.client()
            let slow = try server.client()
            try await pollUntil { server.server.connectionCount == 2 }
            try slow.send("1 PI")
            // The server times the line once it has read its first bytes.
            let lineDeadline = loopClock.now + .seconds(10)
            try await pollUntil { loopClock.nextDeadline.map { $0 <= lineDeadline } ?? false }
            // A byte a second: each is read (a round trip on the other connection of the loop
            // comes after it), none extends the line's time.
            for second in 1...9 {
                loopClock.advance(by: .seconds(1))
                try slow.send("N")
                try healthy.send("\(second) PING\n")
                #expect(try await healthy.readLine() == "\(second) PONG")
                #expect(!slow.hasInputNow)
            }
            loopClock.advance(by: .seconds(1))
            #expect(try await slow.readLine() == "- ERR line-timeout")
            #expect(try await slow.waitForClose())
            // Complete lines are never timed: the other connection is still served.
            try healthy.send("2 PING\n")
            #expect(try await healthy.readLine() == "2 PONG")
        }
    }
}
