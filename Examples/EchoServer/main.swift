print("sluice-echo: not yet")
