import HTTPTypes
import Sluice

/// How one HTTP route maps to a plugin: it decodes a request into the plugin's input and renders
/// the plugin's typed outcome as an ``HTTPAnswer``.
///
/// ```swift
/// struct LikeHTTPCodec: HTTPCodec {
///     typealias Plugin = LikePlugin
///     let method = HTTPRequest.Method.post
///     let path = "/like/"
///     func decode(_ request: HTTPRequestView, rest: Substring) throws(HTTPProblem) -> String {
///         try HTTPPathKey.decode(rest)
///     }
///     func encode(_ outcome: GateOutcome<Int>, for postID: String) -> HTTPAnswer {
///         guard case .ran(let likes, _) = outcome else { return HTTPOutcomeMapping.answer(for: outcome) }
///         var json = JSONText()
///         json.member("likes", likes)
///         return .json(.ok, json.finished())
///     }
/// }
/// ```
public protocol HTTPCodec: Sendable {
    /// The plugin whose requests this route carries.
    associatedtype Plugin: GatePlugin

    /// The method it answers.
    var method: HTTPRequest.Method { get }
    /// The path: exact (`/pay`), or a prefix when it ends with `/` (`/tap/`), the rest of the
    /// path then being the codec's to decode. Every front checks it as ``HTTPRoutePath`` does.
    var path: String { get }
    /// Decodes a request; `rest` is the path after a prefix (empty for an exact path).
    func decode(_ request: HTTPRequestView, rest: Substring) throws(HTTPProblem) -> Plugin.Input
    /// Renders any outcome of a request for `input` (a replay renders the same answer as the
    /// first execution from the same outcome and an input with the same fingerprint).
    func encode(_ outcome: GateOutcome<Plugin.Output>, for input: Plugin.Input) -> HTTPAnswer
}
