// The Sluice runtime: gate shards, plugin registry and server wiring (see DESIGN §2).
@_exported import SluiceCore
@_exported import SluiceLibevent
