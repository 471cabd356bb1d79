// liblazyjit.so: the public API, whose code lives in the layer libraries linked in whole.
