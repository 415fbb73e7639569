import Sluice

/// Echoes every line back, LF-terminated; an overlong line gets `- ERR line-too-long`.
final class EchoHandler: TCPConnectionHandler {
    private static let newline: [UInt8] = [0x0A]
    private static let lineTooLong: [UInt8] = Array("- ERR line-too-long\n".utf8)

    func connectionOpened(_ connection: TCPConnection) {}

    func connection(_ connection: TCPConnection, received line: UnsafeRawBufferPointer) {
        Self.newline.withUnsafeBytes { newline in
            _ = connection.write(line, newline, UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    func connectionReceivedOverlongLine(_ connection: TCPConnection) {
        Self.lineTooLong.withUnsafeBytes { _ = connection.write($0) }
    }

    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason) {}
}
