#if Hummingbird
import HTTPTypes
import Hummingbird
import NIOCore

/// A `ResponseBodyWriter` that keeps the bytes written to it, up to a limit.
struct ResponseCollector: ResponseBodyWriter {
    /// The response body was longer than the limit.
    struct TooLarge: Error {}

    /// Where the bytes go: a reference, since `ResponseBody.write(_:)` consumes the writer.
    final class Sink {
        var bytes: [UInt8] = []
    }

    let sink: Sink
    let limit: Int

    mutating func write(_ buffer: ByteBuffer) async throws {
        guard sink.bytes.count + buffer.readableBytes <= limit else { throw TooLarge() }
        sink.bytes.append(contentsOf: buffer.readableBytesView)
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}

    /// The body of `response`, or `nil` when it is longer than `limit` bytes.
    static func body(of response: Response, limit: Int) async throws -> [UInt8]? {
        let sink = Sink()
        do {
            try await response.body.write(ResponseCollector(sink: sink, limit: limit))
        } catch is TooLarge {
            return nil
        }
        return sink.bytes
    }
}
#endif
