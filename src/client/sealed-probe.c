/* sealed-probe: the agent-side client.  It forwards --repo, three --outcome
   values and the script on stdin to the proxy over one Unix socket, and
   prints exactly one canonical JSON line.  Whatever happens it prints that
   line, exits 0 and writes nothing to stderr, so that the agent learns the
   answer and nothing else (docs/protocol.md, "The client").  It links libc
   and the pure core only.

   Every helper returns -1 on failure without a reason: the only thing the
   client may ever report is ERROR.  */
#define _GNU_SOURCE
#include "build_commit.h"
#include "build_config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/answer.h"
#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/client_env.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/outcome.h"
#include "base/protocol.h"

_Static_assert(SP_CLIENT_SOCKET_MAX_BYTES == sizeof (((struct sockaddr_un *)0)->sun_path) - 1,
               "client_env.h's bound is sun_path's");

/* Time left to print the answer once the deadline has passed: the ERROR line
   that reports a timeout must still get out, but never block forever.  */
#define OUTPUT_GRACE_MS 1000

/* Waits until fd is ready for events (or has hung up, which the next read or
   write then reports), or the deadline passes.  */
static int
wait_for (int fd, short events, int64_t deadline)
{
  for (;;)
    {
      struct pollfd p = { .fd = fd, .events = events };
      int64_t left = deadline - sp_monotonic_ms ();
      int n;

      if (left <= 0)
        return -1;
      n = poll (&p, 1, left > INT_MAX ? INT_MAX : (int)left);
      if (n > 0)
        return (p.revents & POLLNVAL) ? -1 : 0;
      if (n < 0 && errno != EINTR)
        return -1;
    }
}

/* Writes all of buf, to stdout or the socket, within the deadline.  */
static int
write_all (int fd, const uint8_t *buf, size_t len, int64_t deadline)
{
  size_t off = 0;

  while (off < len)
    {
      ssize_t n = write (fd, buf + off, len - off);

      if (n > 0)
        {
          off += (size_t)n;
          continue;
        }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return -1;
      if (wait_for (fd, POLLOUT, deadline) < 0)
        return -1;
    }
  return 0;
}

/* Prints the one line the agent sees and returns main's exit status, always
   0: the answer is in the line, never in the status.  */
static int
answer (const struct sp_bytes *outcome)
{
  char line[SP_ANSWER_MAX_BYTES + 1];
  ssize_t n = sp_answer_render (outcome, line, sizeof (line) - 1);

  if (n < 0)
    n = sp_answer_render (NULL, line, sizeof (line) - 1);
  line[n++] = '\n';
  (void)write_all (STDOUT_FILENO, (const uint8_t *)line, (size_t)n, sp_monotonic_ms () + OUTPUT_GRACE_MS);
  return 0;
}

/* The client's --version, on fd 2 if it is open.  */
static void
print_version (void)
{
  char text[256];
  int n = snprintf (text, sizeof (text), "sealed-probe %s\ncommit: %s\nprotocol: %d\n", PACKAGE_VERSION,
                    SP_BUILD_COMMIT, SP_FRAME_VERSION_MAX);

  if (n > 0 && (size_t)n < sizeof (text) && fcntl (STDERR_FILENO, F_GETFD) >= 0)
    (void)write_all (STDERR_FILENO, (const uint8_t *)text, (size_t)n, sp_monotonic_ms () + OUTPUT_GRACE_MS);
}

/* Makes fds 0..2 safe.  A closed one becomes /dev/null, so that no fd opened
   later (the socket above all) can land on stdout.  Then stderr goes to
   /dev/null, so that nothing reaches it, not even a sanitizer report.  */
static int
secure_stdio (void)
{
  int null_fd;

  for (int fd = 0; fd <= STDERR_FILENO; fd++)
    {
      if (fcntl (fd, F_GETFD) >= 0 || errno != EBADF)
        continue;
      /* open takes the lowest free fd, which is this one.  */
      null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC);
      if (null_fd != fd)
        {
          if (null_fd >= 0)
            close (null_fd);
          return -1;
        }
    }
  null_fd = open ("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null_fd < 0)
    return -1;
  if (dup2 (null_fd, STDERR_FILENO) < 0)
    {
      close (null_fd);
      return -1;
    }
  close (null_fd);
  return 0;
}

static void
on_watchdog (int sig)
{
  (void)sig;
}

/* A closed stdout or socket must be an EPIPE, not a silent death.  */
static int
ignore_sigpipe (void)
{
  struct sigaction ignore = { .sa_handler = SIG_IGN };

  sigemptyset (&ignore.sa_mask);
  return sigaction (SIGPIPE, &ignore, NULL);
}

/* A last resort: should any call block despite poll (a blocking stdin shared
   with another reader, say), SIGALRM interrupts it every second once the
   deadline has passed, and the EINTR sends the caller back to its deadline
   check.  No SA_RESTART, on purpose.  */
static int
arm_watchdog (int seconds)
{
  struct sigaction watchdog = { .sa_handler = on_watchdog };
  struct itimerval timer = {
    .it_value = { .tv_sec = seconds + 1 },
    .it_interval = { .tv_sec = 1 },
  };

  sigemptyset (&watchdog.sa_mask);
  if (sigaction (SIGALRM, &watchdog, NULL) < 0)
    return -1;
  return setitimer (ITIMER_REAL, &timer, NULL);
}

/* Accepts exactly `--repo R` once and `--outcome V` three times, in any
   order, each flag and its value as separate arguments.  Flags and values
   strictly alternate, so a value is never mistaken for a flag.  */
static int
parse_args (int argc, char **argv, struct sp_request *req)
{
  cleanup_error sp_error_t err = NULL;
  size_t n_outcomes = 0;
  bool have_repo = false;

  if (argc < 1 || argc > SP_CLIENT_MAX_ARGS)
    return -1;
  for (int i = 1; i < argc; i += 2)
    {
      struct sp_bytes value;

      if (i + 1 >= argc)
        return -1;
      value.data = (const uint8_t *)argv[i + 1];
      value.len = strlen (argv[i + 1]);
      if (strcmp (argv[i], "--repo") == 0 && !have_repo)
        {
          req->repo = value;
          have_repo = true;
        }
      else if (strcmp (argv[i], "--outcome") == 0 && n_outcomes < SP_OUTCOME_COUNT)
        req->outcomes[n_outcomes++] = value;
      else
        return -1;
    }
  if (!have_repo || n_outcomes != SP_OUTCOME_COUNT)
    return -1;
  /* The proxy re-validates everything; these checks only fail early.  */
  if (req->repo.len == 0 || req->repo.len > SP_REPO_MAX_BYTES)
    return -1;
  return sp_outcomes_check (req->outcomes, &err);
}

/* The socket from SEALED_PROBE_SOCKET, or the default, by client_env.h's
   rules (`doctor` says which one a path breaks).  */
static int
proxy_address (struct sockaddr_un *addr, socklen_t *addr_len)
{
  cleanup_error sp_error_t err = NULL;
  const char *path = sp_client_socket_path (getenv (SP_SOCKET_ENV), SP_DEFAULT_SOCKET);
  size_t n = strlen (path);

  if (sp_client_socket_check (path, &err) != SP_CLIENT_SOCKET_OK)
    return -1;
  memset (addr, 0, sizeof (*addr));
  addr->sun_family = AF_UNIX;
  memcpy (addr->sun_path, path, n + 1);
  *addr_len = (socklen_t)(offsetof (struct sockaddr_un, sun_path) + n + 1);
  return 0;
}

/* The overall deadline in seconds from SEALED_PROBE_TIMEOUT, by
   client_env.h's rules: set but invalid is an error, not the default.  */
static int
client_timeout (int *seconds)
{
  cleanup_error sp_error_t err = NULL;

  return sp_client_timeout_parse (getenv (SP_CLIENT_TIMEOUT_ENV), seconds, &err);
}

/* Reads the script from stdin into buf (SP_SCRIPT_MAX_BYTES + 1 bytes, one
   to detect an oversized script).  A terminal is refused: the agent would
   wait on a prompt it cannot see.  */
static int
read_script (uint8_t *buf, struct sp_bytes *script, int64_t deadline)
{
  size_t used = 0;

  if (isatty (STDIN_FILENO))
    return -1;
  for (;;)
    {
      ssize_t n;

      if (wait_for (STDIN_FILENO, POLLIN, deadline) < 0)
        return -1;
      n = read (STDIN_FILENO, buf + used, SP_SCRIPT_MAX_BYTES + 1 - used);
      if (n == 0)
        break;
      if (n < 0)
        {
          if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
            continue;
          return -1;
        }
      used += (size_t)n;
      if (used > SP_SCRIPT_MAX_BYTES)
        return -1;
    }
  if (used == 0)
    return -1;
  script->data = buf;
  script->len = used;
  return 0;
}

/* Connects a non-blocking socket.  A Unix socket connects at once or fails
   with EAGAIN when the listen backlog is full; then it retries shortly.  */
static int
connect_proxy (const struct sockaddr_un *addr, socklen_t addr_len, int64_t deadline)
{
  cleanup_close int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

  if (fd < 0)
    return -1;
  for (;;)
    {
      int soerr = 0;
      socklen_t soerr_len = sizeof (soerr);

      if (connect (fd, (const struct sockaddr *)addr, addr_len) == 0)
        return get_and_reset_fd (&fd);
      if (errno == EINPROGRESS)
        {
          if (wait_for (fd, POLLOUT, deadline) < 0
              || getsockopt (fd, SOL_SOCKET, SO_ERROR, &soerr, &soerr_len) < 0 || soerr != 0)
            return -1;
          return get_and_reset_fd (&fd);
        }
      if (errno != EAGAIN && errno != EINTR)
        return -1;
      if (sp_monotonic_ms () >= deadline)
        return -1;
      (void)poll (NULL, 0, 10);
    }
}

/* Reads the reply until EOF, but never more than SP_RESPONSE_READ_MAX_BYTES:
   once that many arrive the reply is too long, whatever follows.  */
static int
read_reply (int fd, uint8_t buf[SP_RESPONSE_READ_MAX_BYTES], size_t *len, int64_t deadline)
{
  size_t used = 0;

  while (used < SP_RESPONSE_READ_MAX_BYTES)
    {
      ssize_t n = read (fd, buf + used, SP_RESPONSE_READ_MAX_BYTES - used);

      if (n == 0)
        {
          *len = used;
          return 0;
        }
      if (n > 0)
        {
          used += (size_t)n;
          continue;
        }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return -1;
      if (wait_for (fd, POLLIN, deadline) < 0)
        return -1;
    }
  return -1;
}

/* Sends req and returns the proxy's verdict: SP_RESPONSE_ERROR or the
   1-based outcome index, or -1 when the exchange failed.  */
static int
ask_proxy (const struct sp_request *req, const struct sockaddr_un *addr, socklen_t addr_len, int64_t deadline)
{
  cleanup_free uint8_t *frame = malloc (SP_REQUEST_FRAME_MAX_BYTES);
  cleanup_error sp_error_t err = NULL;
  cleanup_close int fd = -1;
  uint8_t reply[SP_RESPONSE_READ_MAX_BYTES];
  size_t frame_len;
  size_t reply_len;
  uint8_t index;

  if (frame == NULL || sp_request_encode (req, frame, SP_REQUEST_FRAME_MAX_BYTES, &frame_len, &err) < 0)
    return -1;
  fd = connect_proxy (addr, addr_len, deadline);
  if (fd < 0 || write_all (fd, frame, frame_len, deadline) < 0)
    return -1;
  /* EOF marks the end of the request; the reply follows.  */
  if (shutdown (fd, SHUT_WR) < 0 || read_reply (fd, reply, &reply_len, deadline) < 0)
    return -1;
  if (sp_response_decode (reply, reply_len, &index, &err) < 0)
    return -1;
  return index;
}

int
main (int argc, char **argv)
{
  cleanup_free uint8_t *script_buf = NULL;
  struct sp_request req;
  struct sockaddr_un addr;
  socklen_t addr_len;
  int64_t deadline;
  int seconds;
  int index;

  memset (&req, 0, sizeof (req));
  req.version = SP_FRAME_VERSION_V1;
  /* --version alone is no probe: the version goes to stderr, the one thing
     the client ever writes there, before fd 2 points at /dev/null; stdout
     still gets its one line, ERROR; nothing is contacted.  */
  if (argc == 2 && strcmp (argv[1], "--version") == 0)
    {
      print_version ();
      (void)secure_stdio (); /* fd 1 made safe for the line, whatever it returns */
      return answer (NULL);
    }
  if (secure_stdio () < 0 || ignore_sigpipe () < 0)
    return answer (NULL);
  if (client_timeout (&seconds) < 0 || arm_watchdog (seconds) < 0)
    return answer (NULL);
  deadline = sp_monotonic_ms () + (int64_t)seconds * 1000;
  if (parse_args (argc, argv, &req) < 0 || proxy_address (&addr, &addr_len) < 0)
    return answer (NULL);

  script_buf = malloc (SP_SCRIPT_MAX_BYTES + 1);
  if (script_buf == NULL || read_script (script_buf, &req.script, deadline) < 0)
    return answer (NULL);

  index = ask_proxy (&req, &addr, addr_len, deadline);
  return answer (index > 0 ? &req.outcomes[index - 1] : NULL);
}
