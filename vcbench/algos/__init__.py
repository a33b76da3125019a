"""Learning algorithms: each a `make_train(...)` returning jittable functions."""
