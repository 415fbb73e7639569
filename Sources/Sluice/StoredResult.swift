#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An error an idempotent effect threw, as a shared store keeps it: its description. A replay of
/// a stored failure gives this back.
public struct StoredEffectError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The original error's description.
    public let message: String

    /// An error with `message`.
    public init(message: String) {
        self.message = message
    }

    public var description: String { message }
}

/// How an idempotent plugin's result is kept in a shared store: one tag byte (`S` for an output,
/// `E` for an error), then the output's JSON or the error's description.
enum StoredResult {
    static func canStore<Output>(_ type: Output.Type) -> Bool {
        type is any Codable.Type
    }

    static func encode<Output>(_ result: Result<Output, any Error>) -> [UInt8]? {
        switch result {
        case .success(let output):
            guard let encodable = output as? any Encodable, let data = try? JSONEncoder().encode(encodable) else {
                return nil
            }
            return [UInt8(ascii: "S")] + Array(data)
        case .failure(let error):
            return [UInt8(ascii: "E")] + Array(String(describing: error).utf8)
        }
    }

    static func decode<Output>(_ bytes: [UInt8], as type: Output.Type) -> Result<Output, any Error>? {
        guard let tag = bytes.first else { return nil }
        let body = bytes.dropFirst()
        switch tag {
        case UInt8(ascii: "S"):
            guard let decodable = type as? any Decodable.Type,
                let value = try? JSONDecoder().decode(decodable, from: Data(body)) as? Output
            else { return nil }
            return .success(value)
        case UInt8(ascii: "E"):
            return .failure(StoredEffectError(message: String(decoding: body, as: UTF8.self)))
        default:
            return nil
        }
    }
}
