import ArgumentParser
import NIOCore
import NIOPosix

/// `nio-echo`: SwiftNIO's TCP echo, line-based, the baseline `sluice-echo` is compared with in
/// `Examples/LoadTest/run.sh`. Each LF-terminated line is framed by ``LineDecoder`` (a zero-copy
/// slice, the LF included) and written back; writes are flushed once per read burst
/// (`channelReadComplete`), as in NIO's own echo example.
@main
struct NIOEcho: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "nio-echo", abstract: "SwiftNIO line echo server (a benchmark baseline).")

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "TCP port.")
    var port = 7072

    @Option(help: "Event loop threads.")
    var threads = 1

    func run() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        defer { try? group.syncShutdownGracefully() }
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(BackPressureHandler())
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineDecoder()))
                    try channel.pipeline.syncOperations.addHandler(LineEchoHandler())
                }
            }
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
        let channel = try bootstrap.bind(host: host, port: port).wait()
        print("nio-echo listening on \(channel.localAddress.map { "\($0)" } ?? "?")")
        try channel.closeFuture.wait()
    }
}

/// Frames LF-terminated lines; each line is passed on as a slice that keeps its LF.
struct LineDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let newline = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) else {
            return .needMoreData
        }
        let length = newline - buffer.readerIndex + 1
        context.fireChannelRead(Self.wrapInboundOut(buffer.readSlice(length: length)!))
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        .needMoreData
    }
}

/// Writes every line back; flushes once per read burst.
final class LineEchoHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.write(data, promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
