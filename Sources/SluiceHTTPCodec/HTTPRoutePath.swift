import Sluice

/// The path an ``HTTPCodec`` answers, checked the same way for every front that serves codecs:
/// exact (`/pay`), or a prefix when it ends with `/` (`/tap/`), the rest of a request's path then
/// being the codec's to decode.
public struct HTTPRoutePath: Sendable, Hashable, CustomStringConvertible {
    /// The longest path a route may name, in bytes.
    public static let maximumLength = 64

    /// The path as the codec names it.
    public let text: String
    /// Whether the path is a prefix (it ends with `/`).
    public let isPrefix: Bool

    /// A route's path.
    ///
    /// - Throws: `SluiceError` with code `.invalidPlugin` when `text` does not start with `/`, is
    ///   longer than ``maximumLength`` bytes, or holds a space, a control byte, a byte outside
    ///   ASCII or `?`.
    public init(_ text: String) throws(SluiceError) {
        guard text.utf8.first == UInt8(ascii: "/"), text.utf8.count <= Self.maximumLength,
              text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "?") })
        else {
            throw SluiceError(
                code: .invalidPlugin,
                message: "a route path starts with /, is at most \(Self.maximumLength) bytes of visible ASCII and has no ?",
                value: text
            )
        }
        self.text = text
        self.isPrefix = text.utf8.last == UInt8(ascii: "/")
    }

    /// The rest of `path` (a request's path, without its query) after this route's path: empty
    /// when `path` is the route's exact path, what follows the prefix when the route is a prefix
    /// and `path` lies under it, and `nil` when the route does not match.
    @inlinable
    public func rest(of path: Substring) -> Substring? {
        // Byte comparisons: a path is ASCII, and Character comparison costs far more.
        guard path.utf8.starts(with: text.utf8) else { return nil }
        if isPrefix {
            return path[path.utf8.index(path.startIndex, offsetBy: text.utf8.count)...]
        }
        return path.utf8.count == text.utf8.count ? "" : nil
    }

    public var description: String { text }
}
