internal import CHiredis

extension RedisReply {
    /// Copies a hiredis reply (hiredis frees it once the reply callback returns).
    init(copying reply: UnsafePointer<redisReply>) {
        let value = reply.pointee
        switch value.type {
        case REDIS_REPLY_STATUS:
            self = .status(Self.text(value.str, count: value.len))
        case REDIS_REPLY_ERROR:
            self = .error(Self.text(value.str, count: value.len))
        case REDIS_REPLY_INTEGER:
            self = .integer(Int(truncatingIfNeeded: value.integer))
        case REDIS_REPLY_STRING:
            self = .string(Self.bytes(value.str, count: value.len))
        case REDIS_REPLY_ARRAY:
            var elements: [RedisReply] = []
            if let element = value.element {
                elements.reserveCapacity(value.elements)
                for index in 0..<value.elements {
                    if let child = element[index] {
                        elements.append(RedisReply(copying: child))
                    } else {
                        elements.append(.null)
                    }
                }
            }
            self = .array(elements)
        default:
            // REDIS_REPLY_NIL, and nothing else in this protocol version.
            self = .null
        }
    }

    private static func bytes(_ pointer: UnsafeMutablePointer<CChar>?, count: Int) -> [UInt8] {
        guard let pointer, count > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    private static func text(_ pointer: UnsafeMutablePointer<CChar>?, count: Int) -> String {
        String(decoding: bytes(pointer, count: count), as: UTF8.self)
    }
}
