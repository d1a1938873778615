"""`serve` owns only what it made (docs/operations.md, "The socket" and
"The ready file"): a second serve pointed at a socket path that another
serve listens on refuses, naming it; stopping either of two serves that took
one path in turn never removes the other's socket; a stale socket from a
killed serve is replaced; and the ready file a kill -9 leaves (holding the
dead pid) is gone once a restart begins, even one that then fails its
preflight.  The workspaces' directory it makes is 0711 whatever its umask,
and an existing one the sandboxes' ids cannot search is refused."""

import os
import stat
import sys
import tempfile
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sp_harness import Tap, serve_test  # noqa: E402

B, S = serve_test()

tap = Tap()
work = S.Work("sp-serve-own-")
YES = S.answer("YES")
QUICK = S.answer_script("YES")


def inode(path):
    try:
        st = os.lstat(path)
        return (st.st_dev, st.st_ino)
    except FileNotFoundError:
        return None


def is_socket(path):
    return os.path.lexists(path) and stat.S_ISSOCK(os.lstat(path).st_mode)


shared = tempfile.mkdtemp(prefix="sp-own-")  # short: sun_path holds 107 bytes
os.chmod(shared, 0o755)
sock = os.path.join(shared, f"p-{uuid.uuid4().hex[:8]}.sock")
servers = []


def serve(state, **kw):
    srv = S.Serve(work, config, state, socket_path=sock, **kw)
    servers.append(srv)
    return srv


try:
    alpha = work.make_clone("alpha", {"README.md": b"alpha\n"})
    config = work.write_config(["acme/alpha"], timeout=10, maxInvocations=1000)
    state_a = work.staged_state(config, [("acme/alpha", alpha)])
    state_b = work.staged_state(config, [("acme/alpha", alpha)])

    # ---- a second serve refuses while the first listens -----------------------
    a = serve(state_a)
    if not tap.ok(a.start(), "two serves: the first becomes ready", a.stderr()):
        raise SystemExit
    a_sock = inode(sock)
    b = serve(state_b)
    b_ready = b.start()
    err = b.stderr()
    tap.ok(not b_ready and b.returncode == 1 and sock in err and "in use" in err,
           "two serves: the second refuses while the first listens, naming the socket",
           f"ready {b_ready} exit {b.returncode}: {err!r}")
    tap.ok(not os.path.lexists(b.ready_file), "two serves: the refused one wrote no ready file")
    tap.ok(inode(sock) == a_sock and a.probe(QUICK, "acme/alpha") == YES,
           "two serves: the first's socket is untouched and it still answers", (a_sock, inode(sock)))

    # ---- stopping either never removes the other's socket --------------------
    # The path is taken from the first (as an operator or a script might), and
    # the second makes its own socket there.
    os.unlink(sock)
    b = serve(state_b)
    tap.ok(b.start(), "taken path: a serve starts at the freed path while the first still runs", b.stderr())
    b_sock = inode(sock)
    rc = a.stop()
    tap.ok(rc == 0 and inode(sock) == b_sock and b_sock is not None,
           "taken path: stopping the first leaves the second's socket in place", (rc, b_sock, inode(sock)))
    tap.ok(b.probe(QUICK, "acme/alpha") == YES, "taken path: the second still answers through it")
    rc = b.stop()
    tap.ok(rc == 0 and not os.path.lexists(sock), "taken path: stopping the second removes its own socket",
           (rc, inode(sock)))

    # ---- kill -9, then a restart that fails its preflight, then one that works --
    ready = os.path.join(shared, "ready")
    a = serve(state_a, ready_path=ready)
    if not tap.ok(a.start(), "kill -9: serve becomes ready", a.stderr()):
        raise SystemExit
    dead = a.pid
    a.kill9()
    tap.ok(os.path.exists(ready) and a.ready_content() == f"{dead}\n" and is_socket(sock),
           "kill -9: the ready file (holding the dead pid) and a stale socket are left behind",
           (a.ready_content(), inode(sock)))
    failing = serve(state_a, ready_path=ready, binary=f"/nonexistent/{B.binary_name}", probe_id_base=a.probe_id_base)
    started = failing.start()
    tap.ok(not started and failing.returncode == 1 and not os.path.lexists(ready),
           "kill -9 then a restart that fails its preflight: no ready file is left",
           f"ready {started} exit {failing.returncode} ready file {failing.ready_content()!r}: {failing.stderr()!r}")
    c = serve(state_a, ready_path=ready, probe_id_base=a.probe_id_base)
    tap.ok(c.start() and c.ready_content() == f"{c.pid}\n",
           "stale socket: a new serve replaces the killed one's socket, and its ready file holds its own pid",
           c.stderr())
    tap.ok(c.probe(QUICK, "acme/alpha") == YES, "stale socket: the new serve answers through it")
    rc = c.stop()
    tap.ok(rc == 0 and not os.path.lexists(sock) and not os.path.lexists(ready),
           "stale socket: on stop it removes its own socket and ready file", (rc, inode(sock), inode(ready)))

    # ---- the workspaces' directory: 0711 whatever serve's umask ----------------
    # (In build's matrix serve runs with umask 077: SP_TEST_SERVE_UMASK.)
    wd = S.work_dir(state_a)
    umask = "inherited" if S.serve_umask() < 0 else f"{S.serve_umask():03o}"
    c = serve(state_a, probe_id_base=a.probe_id_base)
    if c.start():
        modes = {p: stat.S_IMODE(os.stat(p).st_mode) for p in (wd, os.path.join(wd, c.run))}
        c.stop()
        tap.ok(set(modes.values()) == {0o711},
               f"work directory: it and the run's are made 0711 exactly, with serve's umask {umask}", modes)
    else:
        tap.ok(False, "work directory: serve becomes ready", c.stderr())
    # One left by someone else, that the sandboxes' ids cannot search.
    os.mkdir(wd, 0o700)
    try:
        d = serve(state_a, probe_id_base=a.probe_id_base)
        started = d.start()
        err = d.stderr()
        tap.ok(not started and d.returncode == 1 and wd in err and "searchable by every id" in err,
               "work directory: one the sandboxes' ids cannot search is refused before serving, naming it",
               f"ready {started} exit {d.returncode}: {err[-400:]!r}")
    finally:
        if os.path.isdir(wd):  # the refused serve removes its own state's key directory when empty
            os.rmdir(wd)
finally:
    for srv in servers:
        srv.cleanup()
    for p in (sock, os.path.join(shared, "ready")):
        if os.path.lexists(p):
            os.unlink(p)
    os.rmdir(shared)
    work.close()
tap.finish()
