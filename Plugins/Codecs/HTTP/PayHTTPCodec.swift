import HTTPTypes
import Sluice
import SluiceCore
import SluiceHTTPCodec
import SluiceLibevent
import SluicePayment

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `POST /pay` with `Idempotency-Key` and `{"key": "<key>", "amount": <int>}`:
/// 201 `{"charge":"<cid>","amount":<n>}` · 402 `payment-declined` (with `"reason"`) · either with
/// `Idempotent-Replayed: true` when replayed (or joined) · 409 `conflict` while the first runs
/// (unless duplicates join) · 422 `mismatch` · 400 `missing-idempotency-key`,
/// `bad-idempotency-key`, `bad-json`, `bad-key`, `bad-amount` · 503 `busy` · 429 `limited`
/// (with `"policy"`, the refusing stage) when the plugin has limits: rate stages add
/// `Retry-After` and one `RateLimit-Policy`/`RateLimit` item each, also on a 201.
///
/// The record is the pair (account key, `Idempotency-Key`); the amount is its fingerprint. A
/// replay is rendered from the stored outcome, so it carries the first answer's status and body
/// byte for byte.
public struct PayHTTPCodec: HTTPCodec {
    public typealias Plugin = PaymentPlugin

    public let method = HTTPRequest.Method.post
    public let path = "/pay"
    /// What a duplicate gets while the first request runs: `.reject` (409) or `.join`.
    public let concurrent: IdempotencyOptions.Concurrent

    /// The codec for `plugin`'s requests; a duplicate while the first runs gets 409 unless
    /// `concurrent` is `.join`.
    public init(_ plugin: PaymentPlugin, concurrent: IdempotencyOptions.Concurrent = .reject) {
        self.concurrent = concurrent
    }

    /// The JSON body, read member by member so that each bad member gets its own problem.
    private struct Body: Decodable {
        enum Member: String, CodingKey {
            case key
            case amount
        }

        /// Which member was bad.
        struct BadMember: Error {
            let member: Member
        }

        let key: String
        let amount: Int

        init(from decoder: any Decoder) throws {
            let object = try decoder.container(keyedBy: Member.self)
            guard let key = try? object.decode(String.self, forKey: .key) else { throw BadMember(member: .key) }
            guard let amount = try? object.decode(Int.self, forKey: .amount) else { throw BadMember(member: .amount) }
            self.key = key
            self.amount = amount
        }
    }

    public func decode(_ request: HTTPRequestView, rest: Substring) throws(HTTPProblem) -> PaymentPlugin.Payment {
        let idem: String
        // Two field lines make a list (RFC 9110): never one key.
        if request.headerCount(.idempotencyKey) > 1 {
            throw HTTPProblem(.badRequest, "bad-idempotency-key", detail: "a request carries one Idempotency-Key")
        }
        switch IdempotencyKeyField.parse(request.headerValue(.idempotencyKey)) {
        case .success(let key): idem = key
        case .failure(let problem): throw problem
        }
        let body: Body
        do {
            body = try request.withBody { bytes in try JSONDecoder().decode(Body.self, from: Data(bytes)) }
        } catch let bad as Body.BadMember {
            throw Self.fieldProblem(bad.member.rawValue)
        } catch {
            throw Self.fieldProblem("")
        }
        let key = try HTTPPathKey.checkKey(body.key)
        guard PaymentPlugin.isValidAmount(body.amount) else { throw Self.fieldProblem("amount") }
        return PaymentPlugin.Payment(key: key, idem: idem, amount: body.amount, concurrent: concurrent)
    }

    private static func fieldProblem(_ field: String) -> HTTPProblem {
        if field == "key" {
            return HTTPProblem(.badRequest, "bad-key", detail: "key must be a string of 1 to \(HTTPPathKey.maximumLength) bytes of visible ASCII")
        }
        if field == "amount" {
            return HTTPProblem(.badRequest, "bad-amount", detail: "amount must be an integer from 1 to \(PaymentPlugin.maximumAmount)")
        }
        return HTTPProblem(.badRequest, "bad-json", detail: #"the body must be a JSON object {"key": "...", "amount": <integer>}"#)
    }

    public func encode(_ outcome: GateOutcome<PaymentOutcome>, for input: Plugin.Input) -> HTTPAnswer {
        guard case .ran(let payment, let info) = outcome else { return HTTPOutcomeMapping.answer(for: outcome) }
        var answer: HTTPAnswer
        switch payment {
        case .charged(let charge), .alreadyCharged(let charge):
            var json = JSONText()
            json.member("charge", charge)
            json.member("amount", input.amount)
            answer = .json(.created, json.finished())
        case .declined(let reason):
            answer = HTTPProblem(
                HTTPResponse.Status(code: 402, reasonPhrase: "Payment Required"), "payment-declined", detail: "the payment was declined: \(reason)",
                extensions: ["reason": reason]).answer
        }
        HTTPOutcomeMapping.markReplayed(&answer, info)
        HTTPOutcomeMapping.addLimits(&answer, info)
        // The processor returned a charge it had made for this record: a replay too.
        if payment.isAlreadyCharged { answer.fields[.idempotentReplayed] = "true" }
        return answer
    }
}
