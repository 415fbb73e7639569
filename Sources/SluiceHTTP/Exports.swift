// The HTTP/1.1 server front. It re-exports the HTTP layer its routes are written in (codecs,
// answers, problems, the parser), so that an app serving its own codec imports this module only.
@_exported import SluiceHTTPCodec
