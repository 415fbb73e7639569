#if Hummingbird
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Sluice
import SluiceCore
import SluiceHTTPCodec

/// Stripe-style idempotency in front of the rest of the chain: the first request with an
/// `Idempotency-Key` runs it, and its response (status, header fields, body) is stored and
/// replayed to every retry with `Idempotent-Replayed: true`.
///
/// The key closure scopes the records (a user, an API key: two users' `Idempotency-Key: "1"`
/// are two records); `nil` means the request is not governed and passes through. A governed
/// request is answered:
///
/// | case | answer |
/// | --- | --- |
/// | first request | the chain's response, stored whatever its status (an `HTTPResponseError` the chain throws is stored as its response, any other thrown error as a 500 `internal` problem) |
/// | first request refused by a ``RateLimitMiddleware`` or ``ThrottleMiddleware`` behind it | the refusal, not stored: the record is released and a retry is decided again |
/// | first request answered with a status of `unstoredStatuses` (400, 401, 403, 404, 405, 406, 411, 413, 414, 415, 422, 428, 429, 431 by default: validation, authentication, limits) | the answer, not stored: the record is released and the corrected retry runs |
/// | retry, same body | the stored response, `Idempotent-Replayed: true` |
/// | retry while the first runs | 409 `conflict` with `Retry-After: 1`, or with `.join` the first's response, replayed |
/// | same key, another method, path, query or body | 422 `mismatch` |
/// | no `Idempotency-Key` | 400 `missing-idempotency-key` when required, else passes through |
/// | a malformed or repeated `Idempotency-Key` | 400 `bad-idempotency-key` |
/// | a scope (what the key closure returned) empty or over 256 bytes | 400 `bad-key` |
/// | a body over `requestBodyLimit` | 413 `body-too-large`, nothing runs |
/// | a response body over `storedBodyLimit` | 500 `response-not-stored`, to the first request and every retry |
///
/// A stored response keeps its status, body and header fields but for the hop-by-hop ones
/// (`Connection` and those it names, `Keep-Alive`, `Upgrade`, `TE`, `Trailer`, `Proxy-*`,
/// `Transfer-Encoding`, `Content-Length`: the server writes its own) and those about a decision
/// made for the first request (`RateLimit`, `RateLimit-Policy`, `Retry-After`), which only
/// the first request gets. A limiter in front of this middleware adds its own to a replay.
///
/// The fingerprint is the method, the full request target (the path and the query, as the client
/// sent them) and a digest of the body (its length and a 64-bit stable hash: not cryptographic,
/// and a collision only ever meets the same client's records). A JSON body counts by its
/// canonical form (members sorted, no whitespace, strings escaped one way), so the same JSON laid
/// out otherwise replays; `fingerprint: .exactBytes` counts every body by its bytes.
///
/// Place it before ``RateLimitMiddleware`` so that a replay is answered before the limit is
/// consulted and spends no quota; a 429 from the limit is not stored.
///
/// ```swift
/// router.group("pay")
///     .add(middleware: IdempotencyMiddleware(payments, gate: gate) { request, _ in request.headers[.authorization] })
///     .add(middleware: RateLimitMiddleware(payLimit, gate: gate) { request, _ in request.headers[.authorization] })
/// ```
public struct IdempotencyMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The rule keeping the records.
    public let rule: IdempotencyRule
    /// The gate the rule was registered for.
    public let gate: Gate
    private let key: @Sendable (Request, Context) -> String?

    /// A middleware keeping `rule`'s records on `gate`, scoped by `key`.
    ///
    /// - Parameters:
    ///   - rule: a rule registered in the registry `gate` was made from.
    ///   - gate: the shared gate.
    ///   - key: the records' scope (a user, an API key), or `nil` to let a request through
    ///     ungoverned.
    ///     A scope is 1 to 256 bytes of UTF-8: a request with an empty or a longer one is
    ///     answered 400 `bad-key` (hash a long value, or name what it stands for).
    public init(_ rule: IdempotencyRule, gate: Gate, key: @escaping @Sendable (Request, Context) -> String?) {
        self.rule = rule
        self.gate = gate
        self.key = key
    }

    /// Answers `request` from its record, or runs the rest of the chain as the record's one
    /// execution.
    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let scope = key(request, context) else { return try await next(request, context) }
        if let refusal = RuleKey.refusal(for: scope) { return refusal }
        let options = rule.options
        let values = request.headers[values: .idempotencyKey]
        if values.isEmpty, !options.required { return try await next(request, context) }
        // Two field lines make a list (RFC 9110): never one key.
        guard values.count <= 1 else {
            return HTTPProblem(.badRequest, "bad-idempotency-key", detail: "a request carries one Idempotency-Key").answer.response
        }
        let idem: String
        switch IdempotencyKeyField.parse(values.first) {
        case .success(let key): idem = key
        case .failure(let problem): return problem.answer.response
        }
        var request = request
        let body: ByteBuffer
        do {
            body = try await request.collectBody(upTo: options.requestBodyLimit)
        } catch is NIOTooManyBytesError {
            return HTTPProblem(
                .contentTooLarge, "body-too-large",
                detail: "a request with an Idempotency-Key has a body of at most \(options.requestBodyLimit) bytes").answer.response
        }
        let identity = RequestIdentity(
            record: Self.record(scope: scope, idem: idem),
            fingerprint: Self.fingerprint(request, body: body, mode: options.fingerprint), concurrent: options.concurrent)
        let forwarded = request
        let limit = options.storedBodyLimit
        let unstored = options.unstoredStatuses
        return await withoutActuallyEscaping(next) { next in
            let chain = ChainCall(
                ChainCall.Chain {
                    await Self.respond(next, forwarded, context, storedBodyLimit: limit, unstoredStatuses: unstored)
                })
            let outcome = await gate.submit(rule.handle, IdempotentResponsePlugin.Call(key: scope, identity: identity, chain: chain))
            // `next` may not outlive this call: wait until the chain can no longer run.
            let ran = await chain.settle()
            switch outcome {
            case .ran(let stored, let info):
                // The request that ran the chain also gets the fields about the decisions made
                // for it (`RateLimit`, `Retry-After`), which a replay does not. A refusal is never
                // a replay: it was not stored (a duplicate that joined gets it as it is).
                var answer = info.source == .executed || stored.refusal ? stored.firstAnswer : stored.answer
                if !stored.refusal { HTTPOutcomeMapping.markReplayed(&answer, info) }
                return answer.response
            case .cancelled:
                // This request's caller was cancelled while its chain ran: the chain finished
                // meanwhile (and its answer was stored, but for a refusal), so that is the answer.
                guard let ran else { return HTTPOutcomeMapping.answer(for: outcome).response }
                return ran.firstAnswer.response
            default:
                return HTTPOutcomeMapping.answer(for: outcome).response
            }
        }
    }

    /// The record of `(scope, idem)`: `<scope's byte count>:<scope><idem>`, so that no two pairs
    /// make the same record.
    static func record(scope: String, idem: String) -> String {
        "\(scope.utf8.count):\(scope)\(idem)"
    }

    /// The method, the request target (path and query) and the body's length and stable hash:
    /// of its canonical form for a JSON body that has one (`mode` `.canonicalJSON`, marked `j`),
    /// else of its bytes.
    static func fingerprint(
        _ request: Request, body: ByteBuffer, mode: IdempotencyMiddlewareOptions.Fingerprint = .canonicalJSON
    ) -> String {
        let bytes = body.withUnsafeReadableBytes { Array($0) }
        var digested = bytes
        var kind = ""
        if mode == .canonicalJSON, isJSON(request.headers[.contentType]), let canonical = CanonicalJSON.canonical(bytes) {
            digested = canonical
            kind = "j"
        }
        let digest = digested.withUnsafeBytes { StableHash.of($0) }
        // The target holds no space: the body's digest starts after the last one.
        return "\(request.method.rawValue) \(request.head.path ?? "") \(kind)\(digested.count):\(String(digest, radix: 16))"
    }

    /// Whether a `Content-Type` names JSON: `application/json`, or a `+json` suffix.
    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let mediaType = contentType.prefix { $0 != ";" }.filter { $0 != " " && $0 != "\t" }.lowercased()
        return mediaType == "application/json" || (mediaType.hasPrefix("application/") && mediaType.hasSuffix("+json"))
    }

    /// Runs the rest of the chain and keeps its response, whatever happens once it has started:
    /// an `HTTPResponseError` it throws is rendered and kept like a response, any other error
    /// (the route's, a `CancellationError`, the response body's writer's) becomes a kept 500
    /// `internal` problem, since the route may have done its work (charged a card) before it
    /// failed. A refusal by Sluice's own middleware behind it, or a response with a status of
    /// `unstoredStatuses`, is marked, so that its record is released.
    static func respond(
        _ next: (Request, Context) async throws -> Response, _ request: Request, _ context: Context, storedBodyLimit: Int,
        unstoredStatuses: Set<Int>
    ) async -> StoredResponse {
        let marker = InnerRefusal.Marker()
        let response: Response
        do {
            response = try await InnerRefusal.$marker.withValue(marker) { try await next(request, context) }
        } catch let error as any HTTPResponseError {
            do {
                response = try error.response(from: request, context: context)
            } catch {
                return failure(error, context: context)
            }
        } catch {
            return failure(error, context: context)
        }
        let body: [UInt8]?
        do {
            body = try await ResponseCollector.body(of: response, limit: storedBodyLimit)
        } catch {
            return failure(error, context: context)
        }
        guard let body else {
            context.logger.error(
                "an idempotent response was not stored: its body is over the limit",
                metadata: ["status": "\(response.status.code)", "limit": "\(storedBodyLimit)"])
            let problem = HTTPProblem(
                .internalServerError, "response-not-stored",
                detail: "the request was processed once, but its response was longer than the \(storedBodyLimit) bytes an idempotency record keeps")
            return StoredResponse(answer: problem.answer)
        }
        var stored = StoredResponse(status: response.status, fields: response.headers, body: body)
        // Refused by Sluice's own limiter behind it, or for the request's own shape: not kept.
        stored.refusal = marker.isRefused || unstoredStatuses.contains(response.status.code)
        return stored
    }

    /// The 500 kept for a chain that failed with `error` after it started.
    static func failure(_ error: any Error, context: Context) -> StoredResponse {
        context.logger.error(
            "an idempotent request failed; its 500 is stored and replayed", metadata: ["error": "\(String(reflecting: error))"])
        let problem = HTTPProblem(
            .internalServerError, "internal",
            detail: "the request failed while it was processed; it is not run again for this Idempotency-Key")
        return StoredResponse(answer: problem.answer)
    }
}
#endif
