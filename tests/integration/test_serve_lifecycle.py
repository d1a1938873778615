print("1..0 # SKIP being written")
