#if Hummingbird
import HTTPTypes
import Hummingbird

/// An error the rest of the chain threw, with header fields a middleware adds to the answer it
/// becomes (the rate-limit fields on a route's 404, say).
struct FieldsAddedError: HTTPResponseError {
    /// What the chain threw.
    let original: any HTTPResponseError
    /// The fields to add.
    let fields: HTTPFields

    var status: HTTPResponse.Status { original.status }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = try original.response(from: request, context: context)
        Self.add(fields, to: &response.headers)
        return response
    }

    /// Puts `fields` in `headers`, each in place of any field of its name there: appended as they
    /// are when the name is absent (as it mostly is), without making and checking them again.
    static func add(_ fields: HTTPFields, to headers: inout HTTPFields) {
        for field in fields {
            if headers.contains(field.name) {
                headers[fields: field.name] = [field]
            } else {
                headers.append(field)
            }
        }
    }

    /// Runs `body`; an `HTTPResponseError` it throws leaves with `fields` added, any other error
    /// leaves as it was thrown.
    static func adding(_ fields: HTTPFields, _ body: () async throws -> Response) async throws -> Response {
        do {
            var response = try await body()
            add(fields, to: &response.headers)
            return response
        } catch let error as any HTTPResponseError {
            throw FieldsAddedError(original: error, fields: fields)
        }
    }
}
#endif
