import SluiceEmbeddingExample

// `swift run sluice-embedding`: the embedding example, printed.
try await EmbeddingExample.run()
