import SluiceCore
import SluiceLibevent

/// What a line server (or client) does with one connection's lines: a `TCPConnectionHandler`
/// whose bytes are split into LF-terminated lines by ``LineFramer`` first. Every method is
/// called on the connection's loop thread.
///
/// `TCPServer.bind(group:configuration:framing:refusal:accounting:logger:makeLineHandler:)` and
/// `TCPClient.connect(host:port:on:configuration:framing:timeout:makeLineHandler:)` frame the
/// lines with the framing's ``LineFraming/maximumLineLength``, time each line with its
/// ``LineFraming/lineTimeout`` and hand lines over for at most the transport's `turnDuration` in
/// a row.
public protocol TCPLineHandler: AnyObject {
    /// The connection is open; nothing has been read yet.
    func connectionOpened(_ connection: TCPConnection)
    /// A complete line arrived. `line` excludes the LF (and a CR before it) and is valid only
    /// during the call: copy what must outlive it.
    func connection(_ connection: TCPConnection, received line: UnsafeRawBufferPointer)
    /// A line longer than the configured maximum arrived; it is skipped up to its LF and the
    /// connection stays usable.
    func connectionReceivedOverlongLine(_ connection: TCPConnection)
    /// The peer closed its sending side (a half-close): nothing more will be read, but replies
    /// can still be written. The default closes the connection once its output is written;
    /// a handler with replies still to come closes it later with `closeAfterFlush()`.
    func connectionInputEnded(_ connection: TCPConnection)
    /// A line did not complete within the configured line timeout of its first byte. The
    /// connection closes (reason `TCPConnection.CloseReason.frameTimeout`) once what the
    /// handler writes now has been sent; the default writes nothing.
    func connectionLineTimedOut(_ connection: TCPConnection)
    /// The connection is closed; nothing more will be read or written.
    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason)
}

extension TCPLineHandler {
    public func connectionInputEnded(_ connection: TCPConnection) {
        connection.closeAfterFlush()
    }

    public func connectionLineTimedOut(_ connection: TCPConnection) {}
}

/// Frames a connection's bytes into lines for a ``TCPLineHandler``.
final class LineFramingHandler: TCPConnectionHandler {
    private let lines: any TCPLineHandler
    private var framer: LineFramer
    private let lineTimeout: Duration?
    private let turnDuration: Duration?

    /// Lines handed over between two looks at the clock while a turn lasts.
    private static let linesPerClockCheck = 16

    init(_ lines: any TCPLineHandler, framing: LineFraming, turnDuration: Duration?) {
        self.lines = lines
        self.framer = LineFramer(maximumLineLength: framing.maximumLineLength)
        self.lineTimeout = framing.lineTimeout
        self.turnDuration = turnDuration
    }

    func connectionOpened(_ connection: TCPConnection) {
        lines.connectionOpened(connection)
    }

    func connection(_ connection: TCPConnection, received bytes: UnsafeRawBufferPointer) -> Int {
        let lines = self.lines
        let turnEnds = turnDuration.map { SluiceLoop.monotonicNow() + $0 }
        var sinceClockCheck = 0
        var turnOver = false
        var handed = false
        let consumed = framer.consume(bytes) { event in
            handed = true
            switch event {
            case .line(let line):
                lines.connection(connection, received: line)
            case .overlong:
                lines.connectionReceivedOverlongLine(connection)
            }
            if let turnEnds {
                sinceClockCheck += 1
                if sinceClockCheck == Self.linesPerClockCheck {
                    sinceClockCheck = 0
                    turnOver = SluiceLoop.monotonicNow() >= turnEnds
                }
            }
            return connection.acceptsInput && !turnOver
        }
        guard connection.isOpen else { return consumed }
        if turnOver && connection.acceptsInput && consumed < bytes.count {
            connection.yieldTurn()
        }
        // What is left (or the overlong line being skipped) is a line begun: it must complete
        // within the line timeout of its first byte; a completed line starts the clock again.
        if let lineTimeout, framer.isSkipping || consumed < bytes.count {
            connection.timeFrame(lineTimeout, restart: handed)
        } else {
            connection.timeFrame(nil)
        }
        return consumed
    }

    func connectionInputEnded(_ connection: TCPConnection) {
        lines.connectionInputEnded(connection)
    }

    func connectionFrameTimedOut(_ connection: TCPConnection) {
        lines.connectionLineTimedOut(connection)
    }

    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) {
        lines.connectionClosed(connection, reason: reason)
    }
}
