/* sealed-probe-proxy doctor [--socket PATH] [--user NAME]
   [--client-timeout SECONDS]: from the agent's side, why a client cannot
   reach its proxy.  The client answers ERROR for every failure, as it must;
   this says which, in the client's own order of need: the path by the
   client's rules (base/client_env.h), each directory on it, the socket, the
   user's permission to connect, the client's deadline, a listener, and a
   handshake (a hello frame, docs/protocol.md) that serve answers with a
   constant and for which it debits, queues, audits and launches nothing.
   It stops at the first failure and says what is wrong and what to do.  As
   root with --user it becomes that user in a child (initgroups, setgid,
   setuid), so that every check is the kernel's own for that user, groups
   included.  See docs/operations.md, "Why an agent cannot reach its
   proxy".  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <pwd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "os/fileio.h"
#include "base/client_env.h"
#include "base/clock.h"
#include "base/protocol.h"
#include "base/quote.h"
#include "build_config.h"

#include "proxy/options.h"
#include "proxy/verbs.h"

#define USAGE "usage: sealed-probe-proxy doctor [--socket PATH] [--user NAME] [--client-timeout SECONDS]"

/* Groups shown or compared, at most: more than any real account has.  */
#define GROUPS_MAX 256

/* What doctor checks, and where each value came from.  */
struct doctor
{
  const char *path;
  const char *path_from; /* "--socket", "SEALED_PROBE_SOCKET" or "the default" */
  const char *timeout;   /* NULL: unset */
  const char *timeout_from;
  const char *user; /* the account checked, by name */
  bool user_given;
};

/* The identity this process checks with: its own credentials, which are
   the agent's after the switch.  */
struct who
{
  const char *name;
  uid_t uid;
  gid_t gid;
  gid_t groups[GROUPS_MAX];
  int n_groups;
};

/* The failure: what is wrong, then what to do, on stderr; the verb's exit
   status for a found problem.  */
static int problem (const char *check, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static int
problem (const char *check, const char *fmt, ...)
{
  char text[2048];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (text, sizeof (text), fmt, ap);
  va_end (ap);
  printf ("FAIL %s\n", check);
  fflush (stdout);
  sp_verb_report ("doctor", "%s: %s", check, text);
  return SP_EXIT_FAIL;
}

static void passed (const char *check, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
passed (const char *check, const char *fmt, ...)
{
  va_list ap;

  printf ("ok   %-10s ", check);
  va_start (ap, fmt);
  vprintf (fmt, ap);
  va_end (ap);
  putchar ('\n');
}

static const char *
group_name (gid_t gid, char buf[32])
{
  struct group *g = getgrgid (gid);

  if (g != NULL && strlen (g->gr_name) < 32)
    return strcpy (buf, g->gr_name);
  snprintf (buf, 32, "%u", (unsigned)gid);
  return buf;
}

static const char *
user_name (uid_t uid, char buf[32])
{
  struct passwd *p = getpwuid (uid);

  if (p != NULL && strlen (p->pw_name) < 32)
    return strcpy (buf, p->pw_name);
  snprintf (buf, 32, "%u", (unsigned)uid);
  return buf;
}

static bool
in_groups (const struct who *w, gid_t gid)
{
  if (w->gid == gid)
    return true;
  for (int i = 0; i < w->n_groups; i++)
    if (w->groups[i] == gid)
      return true;
  return false;
}

/* Whether the group database lists name in gid, whatever this session's
   credentials say: a user added with usermod -aG after logging in is.  */
static bool
in_group_database (const char *name, gid_t primary, gid_t gid)
{
  gid_t groups[GROUPS_MAX];
  int n = GROUPS_MAX;

  if (getgrouplist (name, primary, groups, &n) < 0)
    return false;
  for (int i = 0; i < n; i++)
    if (groups[i] == gid)
      return true;
  return false;
}

/* The class of st's mode bits that applies to w, as the kernel picks it:
   owner, else group (the primary or a supplementary one), else others.  */
static mode_t
mode_for (const struct who *w, const struct stat *st)
{
  if (w->uid == st->st_uid)
    return (st->st_mode >> 6) & 7;
  if (in_groups (w, st->st_gid))
    return (st->st_mode >> 3) & 7;
  return st->st_mode & 7;
}

static void
describe (const struct stat *st, char out[96])
{
  char u[32], g[32];

  snprintf (out, 96, "owner %s, group %s, mode %04o", user_name (st->st_uid, u), group_name (st->st_gid, g),
            (unsigned)(st->st_mode & 07777));
}

static int
load_who (struct who *w, const char *name)
{
  w->name = name;
  w->uid = geteuid ();
  w->gid = getegid ();
  w->n_groups = getgroups (GROUPS_MAX, w->groups);
  return w->n_groups < 0 ? -1 : 0;
}

static void
print_who (const struct who *w)
{
  char buf[32];
  int others = 0;

  printf ("user            %s (uid %u, group %s; other groups:", w->name, (unsigned)w->uid,
          group_name (w->gid, buf));
  for (int i = 0; i < w->n_groups; i++)
    if (w->groups[i] != w->gid && ++others)
      printf (" %s", group_name (w->groups[i], buf));
  printf ("%s)\n", others ? "" : " none");
}

/* ---- 1. the path, by the client's rules ---------------------------------- */

static int
check_path (const struct doctor *d)
{
  cleanup_error sp_error_t err = NULL;
  char q[SP_QUOTE_BUF_SIZE];
  int ret = sp_client_socket_check (d->path, &err);

  switch (ret)
    {
    case SP_CLIENT_SOCKET_OK:
      passed ("path", "`%s` (from %s): absolute, %zu bytes of at most %d", sp_quote_name (d->path, q),
              d->path_from, strlen (d->path), SP_CLIENT_SOCKET_MAX_BYTES);
      return 0;
    case SP_CLIENT_SOCKET_EMPTY:
      return problem (
          "path",
          "%s is set but empty, which the client refuses: it answers ERROR to every probe. "
          "Unset it for the default `%s`, or set it to the path serve listens on (serve --socket)",
          SP_SOCKET_ENV, SP_DEFAULT_SOCKET);
    case SP_CLIENT_SOCKET_RELATIVE:
      return problem (
          "path",
          "`%s` (from %s) is not an absolute path; the client refuses a relative one (the working "
          "directory would decide where it connects) and answers ERROR to every probe. "
          "Set %s to the absolute path serve listens on (serve --socket; default `%s`)",
          sp_quote_name (d->path, q), d->path_from, SP_SOCKET_ENV, SP_DEFAULT_SOCKET);
    default:
      return problem ("path",
                      "`%s` (from %s): %s; the client answers ERROR to every probe. "
                      "Give serve a shorter --socket, and %s the same path",
                      sp_quote_name (d->path, q), d->path_from, sp_error_message (err), SP_SOCKET_ENV);
    }
}

/* ---- 2. each directory on the path ---------------------------------------- */

static int
directory_problem (const struct who *w, const char *dir, const struct stat *st)
{
  char q[SP_QUOTE_BUF_SIZE], desc[96], g[32];

  describe (st, desc);
  if (mode_for (w, st) & 1)
    return problem ("directory",
                    "%s may not search `%s` (%s), though its mode allows it: an access control list "
                    "(getfacl) or a security module (AppArmor, SELinux) refuses it. Let %s search it",
                    w->name, sp_quote_name (dir, q), desc, w->name);
  return problem ("directory",
                  "%s may not search `%s` (%s), so it cannot reach the socket below it. "
                  "Let it: `chmod o+x %s`, or `chmod g+x %s` with %s in group `%s` (serve makes the "
                  "socket's own directory root's and 0755)",
                  w->name, sp_quote_name (dir, q), desc, sp_quote_name (dir, q), sp_quote_name (dir, q),
                  w->name, group_name (st->st_gid, g));
}

static int
check_directories (const struct who *w, const struct doctor *d)
{
  char dir[SP_CLIENT_SOCKET_MAX_BYTES + 1];
  char q[SP_QUOTE_BUF_SIZE];
  const char *last = strrchr (d->path, '/');
  size_t n_dirs = 0;

  /* "/" and every prefix ending before a later '/', the socket's own
     directory last.  */
  for (const char *p = d->path; p <= last; p++)
    {
      struct stat st;
      size_t len;

      if (*p != '/')
        continue;
      len = p == d->path ? 1 : (size_t)(p - d->path);
      if (p != d->path && p[-1] == '/')
        continue; /* "//": the same directory again */
      memcpy (dir, d->path, len);
      dir[len] = '\0';
      if (stat (dir, &st) < 0)
        {
          if (errno == ENOENT)
            return problem ("directory",
                            "`%s` does not exist, so neither does the socket: no serve runs with this "
                            "--socket (serve makes the socket's directory when it starts). Start serve "
                            "(`systemctl start sealed-probe-proxy`), or set %s to the --socket serve "
                            "runs with",
                            sp_quote_name (dir, q), SP_SOCKET_ENV);
          return problem ("directory", "`%s`: %s", sp_quote_name (dir, q), strerror (errno));
        }
      if (!S_ISDIR (st.st_mode))
        return problem ("directory",
                        "`%s` is not a directory, so the socket path cannot exist below it. Set %s to "
                        "the --socket serve runs with",
                        sp_quote_name (dir, q), SP_SOCKET_ENV);
      if (faccessat (AT_FDCWD, dir, X_OK, AT_EACCESS) < 0)
        return errno == EACCES ? directory_problem (w, dir, &st)
                               : problem ("directory", "`%s`: %s", sp_quote_name (dir, q), strerror (errno));
      n_dirs++;
    }
  /* The socket's own directory, for the line.  */
  memcpy (dir, d->path, last == d->path ? 1 : (size_t)(last - d->path));
  dir[last == d->path ? 1 : last - d->path] = '\0';
  passed ("directory", "%zu directories down to `%s`: each exists and %s may search it", n_dirs,
          sp_quote_name (dir, q), w->name);
  return 0;
}

/* ---- 3. the socket, and 4. the permission to connect ---------------------- */

static int
check_socket (const struct doctor *d, struct stat *st)
{
  char q[SP_QUOTE_BUF_SIZE], desc[96];

  if (stat (d->path, st) < 0)
    {
      if (errno == ENOENT)
        return problem ("socket",
                        "`%s` does not exist: no serve listens there. Start serve (`systemctl start "
                        "sealed-probe-proxy`, or `sealed-probe-proxy serve --socket %s`), or, when serve "
                        "runs with another --socket, set %s to that path",
                        sp_quote_name (d->path, q), sp_quote_name (d->path, q), SP_SOCKET_ENV);
      return problem ("socket", "`%s`: %s", sp_quote_name (d->path, q), strerror (errno));
    }
  if (!S_ISSOCK (st->st_mode))
    return problem ("socket",
                    "`%s` is %s, not a socket: serve cannot listen there (it refuses to replace anything "
                    "but a stale socket). Remove it, or give serve and %s another path",
                    sp_quote_name (d->path, q), sp_file_type_name (st->st_mode), SP_SOCKET_ENV);
  describe (st, desc);
  passed ("socket", "`%s`: a socket, %s", sp_quote_name (d->path, q), desc);
  return 0;
}

/* Why w may not write the socket, by its mode bits, and what to do.  */
static int
access_problem (const struct who *w, const struct stat *st)
{
  char desc[96], g[32];
  const char *group = group_name (st->st_gid, g);

  describe (st, desc);
  if (mode_for (w, st) & 2)
    return problem ("access",
                    "%s may not connect (%s), though the mode allows it: an access control list (getfacl) "
                    "or a security module (AppArmor, SELinux) refuses it. Let %s write the socket",
                    w->name, desc, w->name);
  if (st->st_gid == 0 && (st->st_mode & 020))
    return problem ("access",
                    "%s may not connect (%s): the socket's group is root, which means serve was started "
                    "without --socket-group, so only root may connect. Restart serve with `--socket-group "
                    "GROUP`, a group %s is in (the install's is `sealed-probe`: `usermod -aG sealed-probe "
                    "%s`)",
                    w->name, desc, w->name, w->name);
  if (!(st->st_mode & 020))
    return problem ("access",
                    "%s may not connect (%s): the socket's group may not write it (serve makes it 0660; "
                    "something changed it since). Restart serve, which makes it again",
                    w->name, desc);
  if (in_group_database (w->name, w->gid, st->st_gid))
    return problem ("access",
                    "%s may not connect (%s): %s is in group `%s` in the group database, but this session "
                    "is not (its groups were set when it logged in, before it was added). Start the agent "
                    "in a new session: log in again, restart its service, or `newgrp %s`",
                    w->name, desc, w->name, group, group);
  return problem ("access",
                  "%s may not connect (%s): %s is not in group `%s`, the socket's group, and only root and "
                  "that group may connect. Add it: `usermod -aG %s %s`, then start the agent in a new "
                  "session (log in again); or give serve `--socket-group` with a group %s is in",
                  w->name, desc, w->name, group, group, w->name, w->name);
}

static int
check_access (const struct who *w, const struct doctor *d, const struct stat *st)
{
  char g[32];

  /* connect(2) on a Unix socket needs write permission on it.  */
  if (faccessat (AT_FDCWD, d->path, W_OK, AT_EACCESS) < 0)
    return errno == EACCES ? access_problem (w, st) : problem ("access", "%s: %s", w->name, strerror (errno));
  if (w->uid == 0)
    passed ("access", "%s may connect: root may connect to any socket", w->name);
  else if (w->uid == st->st_uid)
    passed ("access", "%s may connect: it owns the socket", w->name);
  else if (in_groups (w, st->st_gid) && (st->st_mode & 020))
    passed ("access", "%s may connect: it is in group `%s`, which may write the socket", w->name,
            group_name (st->st_gid, g));
  else
    passed ("access", "%s may connect", w->name);
  return 0;
}

/* ---- 5. the client's deadline ---------------------------------------------- */

static int
check_timeout (const struct doctor *d, int *seconds)
{
  cleanup_error sp_error_t err = NULL;
  char q[SP_QUOTE_BUF_SIZE];

  if (sp_client_timeout_parse (d->timeout, seconds, &err) < 0)
    return problem ("timeout",
                    "%s `%s` (from %s) is not valid: %s. The client then answers ERROR to every probe at "
                    "once, without connecting. Set it to whole seconds from 1 to %d, digits only, or unset "
                    "it for the default, %d",
                    SP_CLIENT_TIMEOUT_ENV, sp_quote_name (d->timeout, q), d->timeout_from,
                    sp_error_message (err), SP_CLIENT_TIMEOUT_MAX_SECONDS, SP_CLIENT_TIMEOUT_DEFAULT_SECONDS);
  if (d->timeout == NULL)
    passed ("timeout", "%s unset: the client's default, %d s", SP_CLIENT_TIMEOUT_ENV, *seconds);
  else
    passed ("timeout", "%s %d s (from %s), within 1..%d", SP_CLIENT_TIMEOUT_ENV, *seconds, d->timeout_from,
            SP_CLIENT_TIMEOUT_MAX_SECONDS);
  return 0;
}

/* ---- 6. a listener, and 7. the handshake ----------------------------------- */

/* Waits for events on fd until deadline (monotonic ms): 0, or -1 with
   errno ETIMEDOUT.  */
static int
wait_for (int fd, short events, int64_t deadline)
{
  for (;;)
    {
      struct pollfd p = { .fd = fd, .events = events };
      int64_t left = deadline - sp_monotonic_ms ();
      int n;

      if (left <= 0)
        {
          errno = ETIMEDOUT;
          return -1;
        }
      n = poll (&p, 1, left > INT_MAX ? INT_MAX : (int)left);
      if (n > 0)
        return 0;
      if (n < 0 && errno != EINTR)
        return -1;
    }
}

/* Connects as the client does; a full backlog is retried until deadline.
   Returns the fd, or -1 with errno.  */
static int
connect_socket (const char *path, int64_t deadline)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  cleanup_close int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

  if (fd < 0)
    return -1;
  memcpy (addr.sun_path, path, strlen (path) + 1);
  while (connect (fd, (const struct sockaddr *)&addr, sizeof (addr)) < 0)
    {
      if (errno == EINPROGRESS)
        {
          int soerr = 0;
          socklen_t len = sizeof (soerr);

          if (wait_for (fd, POLLOUT, deadline) < 0 || getsockopt (fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
            return -1;
          if (soerr != 0)
            {
              errno = soerr;
              return -1;
            }
          break;
        }
      if (errno != EAGAIN && errno != EINTR)
        return -1;
      if (sp_monotonic_ms () >= deadline)
        {
          errno = EAGAIN;
          return -1;
        }
      (void)poll (NULL, 0, 10);
    }
  return get_and_reset_fd (&fd);
}

static int
check_listener (const struct doctor *d, int64_t deadline, int *fd)
{
  char q[SP_QUOTE_BUF_SIZE];

  *fd = connect_socket (d->path, deadline);
  if (*fd >= 0)
    {
      passed ("listener", "a process accepts connections on `%s`", sp_quote_name (d->path, q));
      return 0;
    }
  if (errno == ECONNREFUSED)
    return problem ("listener",
                    "nothing listens on `%s`: it is a stale socket, left by a serve that is no longer "
                    "running (killed with kill -9, or crashed). Start serve again (`systemctl restart "
                    "sealed-probe-proxy`); it replaces the stale socket",
                    sp_quote_name (d->path, q));
  if (errno == EAGAIN)
    return problem ("listener",
                    "serve's listen backlog on `%s` stayed full: it runs but does not accept. Look at its "
                    "log (`journalctl -u sealed-probe-proxy`)",
                    sp_quote_name (d->path, q));
  if (errno == EACCES || errno == EPERM)
    return problem ("listener",
                    "connecting to `%s` was refused (%s) though its mode allows it: a security module "
                    "(AppArmor, SELinux) or an access control list refuses it",
                    sp_quote_name (d->path, q), strerror (errno));
  return problem ("listener", "connect to `%s`: %s", sp_quote_name (d->path, q), strerror (errno));
}

/* Sends the hello, half-closes, and reads what comes back until EOF, at
   most SP_RESPONSE_READ_MAX_BYTES.  Returns the bytes read, or -1 with
   errno.  */
static ssize_t
exchange_hello (int fd, uint8_t reply[SP_RESPONSE_READ_MAX_BYTES], int64_t deadline)
{
  uint8_t hello[SP_HELLO_FRAME_BYTES];
  size_t sent = 0, got = 0;

  sp_hello_encode (hello);
  while (sent < sizeof (hello))
    {
      ssize_t n = send (fd, hello + sent, sizeof (hello) - sent, MSG_NOSIGNAL);

      if (n > 0)
        sent += (size_t)n;
      else if ((errno != EAGAIN && errno != EINTR) || wait_for (fd, POLLOUT, deadline) < 0)
        return -1;
    }
  if (shutdown (fd, SHUT_WR) < 0)
    return -1;
  while (got < SP_RESPONSE_READ_MAX_BYTES)
    {
      ssize_t n = recv (fd, reply + got, SP_RESPONSE_READ_MAX_BYTES - got, 0);

      if (n == 0)
        break;
      if (n > 0)
        got += (size_t)n;
      else if ((errno != EAGAIN && errno != EINTR) || wait_for (fd, POLLIN, deadline) < 0)
        return errno == ECONNRESET ? (ssize_t)got : -1;
    }
  return (ssize_t)got;
}

static int
check_handshake (const struct doctor *d, int fd, int64_t deadline, int wait_seconds)
{
  cleanup_error sp_error_t err = NULL;
  uint8_t reply[SP_RESPONSE_READ_MAX_BYTES];
  char q[SP_QUOTE_BUF_SIZE];
  ssize_t got = exchange_hello (fd, reply, deadline);
  uint8_t version;
  uint8_t index;

  if (got < 0 && errno == ETIMEDOUT)
    return problem ("handshake",
                    "the process on `%s` accepted the connection but sent no handshake reply within %d s: it "
                    "is no sealed-probe-proxy serve, or one that is stuck (or an older serve without the "
                    "handshake, holding its refusal until its --release time). Look at serve's log "
                    "(`journalctl -u sealed-probe-proxy`) and `sealed-probe-proxy version`",
                    sp_quote_name (d->path, q), wait_seconds);
  if (got < 0)
    return problem ("handshake", "`%s`: %s", sp_quote_name (d->path, q), strerror (errno));
  if (sp_hello_reply_decode (reply, (size_t)got, &version, &err) == 0)
    {
      /* The reply names the highest version serve speaks (every lower one
         too): a serve of an older release names 1, and would refuse every
         probe that carries an answer schema.  */
      if (version < SP_FRAME_VERSION_MAX)
        return problem ("handshake",
                        "serve on `%s` speaks wire protocol %u at most, and this release's client speaks %d: "
                        "three-outcome probes would work, but every probe with an answer schema would get "
                        "ERROR. Install the same sealed-probe release for the client and the proxy, and "
                        "restart serve",
                        sp_quote_name (d->path, q), version, SP_FRAME_VERSION_MAX);
      if (version != SP_FRAME_VERSION_MAX)
        return problem ("handshake",
                        "serve on `%s` speaks wire protocol %u, newer than this release's %d: its client "
                        "and this doctor are of an older release. Install the same sealed-probe release "
                        "for the client and the proxy",
                        sp_quote_name (d->path, q), version, SP_FRAME_VERSION_MAX);
      passed ("handshake",
              "serve speaks wire protocol %u, as this client does (and every lower one); nothing was "
              "debited, queued, "
              "audited or launched",
              version);
      return 0;
    }
  if (sp_response_decode (reply, (size_t)got, &index, &err) == 0 && index == SP_RESPONSE_ERROR)
    return problem ("handshake",
                    "serve on `%s` answered ERROR to the handshake: it is older than the handshake and "
                    "refused it as a bad frame (its audit log has a `frame` refusal for it), though it "
                    "would answer probes. Upgrade sealed-probe-proxy to this release and restart serve",
                    sp_quote_name (d->path, q));
  return problem ("handshake",
                  "the process on `%s` answered %zd bytes that are no handshake reply: it is not "
                  "sealed-probe-proxy serve, or not of this release. Find what listens there (`ss -xlp`) and "
                  "point %s at serve's --socket",
                  sp_quote_name (d->path, q), got, SP_SOCKET_ENV);
}

/* ---- the whole diagnosis, as the user ---------------------------------------- */

static int
diagnose (const struct doctor *d)
{
  cleanup_close int fd = -1;
  struct who w;
  struct stat st;
  int seconds;
  int wait_seconds;
  int64_t deadline;

  if (load_who (&w, d->user) < 0)
    return problem ("user", "read this process's groups: %s", strerror (errno));
  print_who (&w);
  if (check_path (d) != 0 || check_directories (&w, d) != 0 || check_socket (d, &st) != 0
      || check_access (&w, d, &st) != 0 || check_timeout (d, &seconds) != 0)
    return SP_EXIT_FAIL;
  /* Doctor's own wait: the client's, but never long.  */
  wait_seconds = seconds < SP_DOCTOR_WAIT_SECONDS ? seconds : SP_DOCTOR_WAIT_SECONDS;
  deadline = sp_monotonic_ms () + (int64_t)wait_seconds * 1000;
  if (check_listener (d, deadline, &fd) != 0 || check_handshake (d, fd, deadline, wait_seconds) != 0)
    return SP_EXIT_FAIL;
  if (w.uid == 0 && !d->user_given)
    printf ("note            run as root, which may connect to any socket: give --user with the agent's "
            "account to check its permissions\n");
  printf ("note            the handshake does not say whether serve has halted or its budget is spent: "
          "`sealed-probe-proxy status` does\n");
  printf ("doctor          %s can reach serve on `%s`: every check passed\n", w.name, d->path);
  return SP_EXIT_OK;
}

/* The account --user names, copied out of getpwnam's static buffer, which
   every later lookup overwrites.  */
struct account
{
  char name[64];
  uid_t uid;
  gid_t gid;
};

/* Becomes the account for good, supplementary groups included: initgroups
   reads them from the group database, as a login does.  */
static int
become (const struct account *pw)
{
  if (initgroups (pw->name, pw->gid) < 0 || setgid (pw->gid) < 0 || setuid (pw->uid) < 0)
    return -1;
  /* A switch that could be undone was not one.  */
  if (pw->uid != 0 && (setuid (0) == 0 || geteuid () != pw->uid))
    return -1;
  return 0;
}

/* The diagnosis in a child that became the account; its exit status is
   doctor's.  */
static int
diagnose_as (const struct doctor *d, const struct account *pw)
{
  pid_t pid;
  int status;

  fflush (NULL);
  pid = fork ();
  if (pid < 0)
    return problem ("user", "fork: %s", strerror (errno));
  if (pid == 0)
    {
      int rc;

      if (become (pw) < 0)
        rc = problem ("user", "become %s (uid %u): %s", pw->name, (unsigned)pw->uid, strerror (errno));
      else
        rc = diagnose (d);
      fflush (NULL);
      _exit (rc);
    }
  while (waitpid (pid, &status, 0) < 0)
    if (errno != EINTR)
      return problem ("user", "wait for the check as %s: %s", pw->name, strerror (errno));
  return WIFEXITED (status) ? WEXITSTATUS (status) : SP_EXIT_FAIL;
}

int
sp_verb_doctor (int argc, char **argv)
{
  const char *socket_opt = NULL, *user = NULL, *timeout_opt = NULL;
  const struct sp_option options[] = {
    { .name = "--socket", .value = &socket_opt },
    { .name = "--user", .value = &user },
    { .name = "--client-timeout", .value = &timeout_opt },
  };
  struct doctor d = { 0 };
  struct account account;
  struct passwd *pw;
  char self[32];
  int ret;

  ret = sp_options_parse ("doctor", USAGE, argc, argv, options, sizeof (options) / sizeof (options[0]));
  if (ret != 0)
    return ret < 0 ? SP_EXIT_OK : ret;

  d.path
      = socket_opt != NULL ? socket_opt : sp_client_socket_path (getenv (SP_SOCKET_ENV), SP_DEFAULT_SOCKET);
  d.path_from = socket_opt != NULL               ? "--socket"
                : getenv (SP_SOCKET_ENV) != NULL ? SP_SOCKET_ENV
                                                 : "the default";
  d.timeout = timeout_opt != NULL ? timeout_opt : getenv (SP_CLIENT_TIMEOUT_ENV);
  d.timeout_from = timeout_opt != NULL ? "--client-timeout" : SP_CLIENT_TIMEOUT_ENV;
  d.user_given = user != NULL;

  if (user == NULL)
    {
      d.user = user_name (geteuid (), self);
      return diagnose (&d);
    }
  errno = 0;
  pw = getpwnam (user);
  if (pw == NULL)
    return sp_options_usage_error ("doctor", USAGE, "--user: no user `%s` in the user database%s%s", user,
                                   errno ? ": " : "", errno ? strerror (errno) : "");
  if (strlen (pw->pw_name) >= sizeof (account.name))
    return sp_options_usage_error ("doctor", USAGE, "--user: the name `%s` is too long", user);
  strcpy (account.name, pw->pw_name);
  account.uid = pw->pw_uid;
  account.gid = pw->pw_gid;
  d.user = account.name;
  if (account.uid == geteuid ())
    return diagnose (&d);
  if (geteuid () != 0)
    return sp_options_usage_error ("doctor", USAGE,
                                   "--user %s needs root, to check as that user; or run doctor as %s, "
                                   "without --user",
                                   user, user);
  return diagnose_as (&d, &account);
}
