/* serve's signals (docs/operations.md, "Signals"; sealed-probe-proxy(8)):
   every signal whose default would end the process without its cleanup
   arrives through one signalfd instead.  SIGTERM, SIGINT, SIGHUP and SIGQUIT
   stop serve the clean way, as a daemon's operator expects of each (systemd
   and kill send SIGTERM, a terminal's Ctrl-C SIGINT and Ctrl-\ SIGQUIT, a
   dropped session SIGHUP, and serve has nothing to reload); the others are
   ignored, one line each.  SIGHUP, SIGINT or SIGQUIT ignored when serve
   started (nohup, a shell's background job) stay ignored, as every Unix
   program keeps them: whoever started serve so asked for it to outlive
   them.  SIGTERM always stops it.  Faults (SIGSEGV, SIGBUS, ...) and SIGKILL are not
   catchable in any useful way: the next start removes what they leave.  */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "os/log.h"
#include "serve/serve.h"

static const int stop_signals[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT };
/* What would otherwise end serve at once; SIGXFSZ blocked turns a write
   past a file size limit into EFBIG, an error value.  */
static const int ignored_signals[]
    = { SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGXCPU, SIGXFSZ, SIGSTKFLT };

/* Whether sig was ignored when serve started.  */
static bool
ignored_at_start (int sig)
{
  struct sigaction now;

  return sigaction (sig, NULL, &now) == 0 && now.sa_handler == SIG_IGN;
}

static void
fill_set (sigset_t *set)
{
  sigemptyset (set);
  for (size_t i = 0; i < sizeof (stop_signals) / sizeof (stop_signals[0]); i++)
    if (stop_signals[i] == SIGTERM || !ignored_at_start (stop_signals[i]))
      sigaddset (set, stop_signals[i]);
  for (size_t i = 0; i < sizeof (ignored_signals) / sizeof (ignored_signals[0]); i++)
    sigaddset (set, ignored_signals[i]);
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
    sigaddset (set, sig);
}

int
sp_serve_signals_open (sp_error_t *err)
{
  sigset_t set;
  int fd;

  fill_set (&set);
  if (sigprocmask (SIG_BLOCK, &set, NULL) < 0)
    return sp_make_error (err, errno, "block the signals serve handles");
  fd = signalfd (-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0)
    return sp_make_error (err, errno, "signalfd");
  /* A client that leaves early must not kill the proxy.  */
  signal (SIGPIPE, SIG_IGN);
  return fd;
}

bool
sp_serve_signal_stops (int signo)
{
  for (size_t i = 0; i < sizeof (stop_signals) / sizeof (stop_signals[0]); i++)
    if (stop_signals[i] == signo)
      return true;
  return false;
}

/* "SIGTERM", or "signal 40" for a real-time one.  */
static void
signal_name (int signo, char *buf, size_t size)
{
  const char *abbrev = sigabbrev_np (signo);

  if (abbrev != NULL)
    snprintf (buf, size, "SIG%s", abbrev);
  else
    snprintf (buf, size, "signal %d", signo);
}

int
sp_serve_signals_read (int signal_fd, const char *verb)
{
  for (;;)
    {
      struct signalfd_siginfo info;
      ssize_t n = read (signal_fd, &info, sizeof (info));
      char name[32];

      if (n != (ssize_t)sizeof (info))
        return 0; /* EAGAIN: none left */
      signal_name ((int)info.ssi_signo, name, sizeof (name));
      if (sp_serve_signal_stops ((int)info.ssi_signo))
        {
          sp_log (SP_LOG_NOTICE, "sealed-probe-proxy: %s: %s from pid %u: stopping cleanly", verb, name,
                  info.ssi_pid);
          return (int)info.ssi_signo;
        }
      sp_log (SP_LOG_WARNING,
              "sealed-probe-proxy: %s: %s from pid %u ignored: SIGTERM, SIGINT, SIGHUP or SIGQUIT stop it",
              verb, name, info.ssi_pid);
    }
}
