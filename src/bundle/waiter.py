# The interpreter of a sandbox started ahead (docs/runtimes.md, "Interpreters
# started ahead"): `python3 -I -S -B -c` this, started before any request.
# It waits for end of file on its stdin, a pipe whose other end only serve
# holds and closes once /probe/probe.py holds the script; then it runs that
# file as `python3 -I -S -B /probe/probe.py` would, with the same sys.argv,
# sys.orig_argv and __main__ names (tests/integration/test_started_ahead.py).
# It leaves no name behind.  Its one import beyond a cold start's modules is
# json (and what json imports): every probe writes its answer as JSON (the
# result contract), and that import is most of a trivial probe's time after
# the signal.
def _sp_wait():
    import posix, sys, _frozen_importlib_external, json
    while posix.read(0, 4096):
        pass
    path = '/probe/probe.py'
    with open(path, 'rb') as f:
        source = f.read()
    main = globals()
    del main['_sp_wait']
    main['__loader__'] = _frozen_importlib_external.SourceFileLoader('__main__', path)
    main['__file__'] = path
    main['__cached__'] = None
    sys.argv[0] = path
    sys.orig_argv[-2:] = [path]
    return compile(source, path, 'exec', dont_inherit=True)
exec(_sp_wait(), globals())
