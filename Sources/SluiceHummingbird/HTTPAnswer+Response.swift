#if Hummingbird
import HTTPTypes
import Hummingbird
import NIOCore
import SluiceHTTPCodec

extension HTTPAnswer {
    /// This answer as a Hummingbird `Response` (status, header fields, body).
    var response: Response {
        Response(status: status, headers: fields, body: body.isEmpty ? ResponseBody() : ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }
}
#endif
