/* Staging's progress line: see src/os/progress.h.  Output is
   best effort: a write that fails turns the renderer off, never staging.  */
#define _GNU_SOURCE
#include "os/progress.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/clock.h"

#define CLEAR_EOL "\033[K"

void
sp_progress_init_with (struct sp_progress *p, int fd, bool on, bool clear_eol, unsigned columns,
                       uint64_t (*clock) (void))
{
  *p = (struct sp_progress){
    .on = on,
    .clear_eol = clear_eol,
    .fd = fd,
    .columns = columns,
    .clock = clock != NULL ? clock : sp_monotonic_ns,
    .interval_ns = (uint64_t)SP_PROGRESS_INTERVAL_MS * 1000000ULL,
  };
}

void
sp_progress_init (struct sp_progress *p, int fd)
{
  const char *term = getenv ("TERM");
  struct winsize ws = { 0 };
  bool on = isatty (fd) == 1;

  if (on && ioctl (fd, TIOCGWINSZ, &ws) < 0)
    ws.ws_col = 0;
  sp_progress_init_with (p, fd, on, term != NULL && term[0] != '\0' && strcmp (term, "dumb") != 0, ws.ws_col,
                         NULL);
}

const char *
sp_progress_bytes (uint64_t bytes, char buf[SP_PROGRESS_NUMBER_MAX])
{
  static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
  unsigned k = 0;
  uint64_t tenths;

  if (bytes < 1024)
    {
      snprintf (buf, SP_PROGRESS_NUMBER_MAX, "%llu B", (unsigned long long)bytes);
      return buf;
    }
  while (k + 1 < sizeof (units) / sizeof (units[0]) && bytes >> (10 * (k + 2)) != 0)
    k++;
  /* 128 bits: bytes * 10 overflows 64 above 1.6 EiB.  */
  tenths = (uint64_t)(((unsigned __int128)bytes * 10) >> (10 * (k + 1)));
  snprintf (buf, SP_PROGRESS_NUMBER_MAX, "%llu.%llu %s", (unsigned long long)(tenths / 10),
            (unsigned long long)(tenths % 10), units[k]);
  return buf;
}

const char *
sp_progress_duration (uint64_t ns, char buf[SP_PROGRESS_NUMBER_MAX])
{
  uint64_t tenths = ns / 100000000ULL;

  if (tenths < 600)
    snprintf (buf, SP_PROGRESS_NUMBER_MAX, "%llu.%llu s", (unsigned long long)(tenths / 10),
              (unsigned long long)(tenths % 10));
  else
    snprintf (buf, SP_PROGRESS_NUMBER_MAX, "%llu min %llu s", (unsigned long long)(tenths / 600),
              (unsigned long long)(tenths / 10 % 60));
  return buf;
}

static const char *
plural (uint64_t n, const char *one, const char *many)
{
  return n == 1 ? one : many;
}

size_t
sp_progress_format (const struct sp_progress *p, bool final, uint64_t now_ns, char buf[SP_PROGRESS_LINE_MAX])
{
  char a[SP_PROGRESS_NUMBER_MAX], b[SP_PROGRESS_NUMBER_MAX], c[SP_PROGRESS_NUMBER_MAX];
  unsigned long long count = (unsigned long long)p->count;
  int n;

  if (final)
    n = snprintf (buf, SP_PROGRESS_LINE_MAX, "%s: staged %llu %s, %s%s%s%s in %s", p->repo,
                  (unsigned long long)p->files, plural (p->files, "file", "files"),
                  sp_progress_bytes (p->file_bytes, a), p->downloaded ? ", " : "",
                  p->downloaded ? sp_progress_bytes (p->downloaded, b) : "",
                  p->downloaded ? " downloaded" : "", sp_progress_duration (now_ns - p->started_ns, c));
  else if (p->phase == NULL)
    n = snprintf (buf, SP_PROGRESS_LINE_MAX, "%s", p->repo);
  else
    switch (p->unit)
      {
      case SP_PROGRESS_FILES:
      case SP_PROGRESS_TREE:
        n = snprintf (buf, SP_PROGRESS_LINE_MAX, "%s: %s: %llu %s, %s", p->repo, p->phase, count,
                      plural (p->count, "file", "files"), sp_progress_bytes (p->bytes, a));
        break;
      case SP_PROGRESS_BYTES:
        n = snprintf (buf, SP_PROGRESS_LINE_MAX, "%s: %s: %s", p->repo, p->phase,
                      sp_progress_bytes (p->bytes, a));
        break;
      case SP_PROGRESS_DOWNLOAD:
        if (p->total == 0)
          n = snprintf (buf, SP_PROGRESS_LINE_MAX, "%s: %s: %s", p->repo, p->phase,
                        sp_progress_bytes (p->bytes, a));
        else
          n = snprintf (buf, SP_PROGRESS_LINE_MAX, "%s: %s: %s of %s (%u%%)", p->repo, p->phase,
                        sp_progress_bytes (p->bytes, a), sp_progress_bytes (p->total, b),
                        p->bytes >= p->total ? 100u
                                             : (unsigned)((unsigned __int128)p->bytes * 100 / p->total));
        break;
      case SP_PROGRESS_OBJECTS:
        if (p->total == 0)
          n = snprintf (buf, SP_PROGRESS_LINE_MAX, "%s: %s: %llu %s", p->repo, p->phase, count,
                        plural (p->count, "object", "objects"));
        else
          n = snprintf (buf, SP_PROGRESS_LINE_MAX, "%s: %s: %llu of %llu objects", p->repo, p->phase, count,
                        (unsigned long long)p->total);
        break;
      case SP_PROGRESS_STEP:
      default:
        n = snprintf (buf, SP_PROGRESS_LINE_MAX, "%s: %s", p->repo, p->phase);
        break;
      }
  if (n < 0)
    {
      buf[0] = '\0';
      return 0;
    }
  return (size_t)n < SP_PROGRESS_LINE_MAX ? (size_t)n : SP_PROGRESS_LINE_MAX - 1;
}

static void
emit (struct sp_progress *p, const char *s, size_t len)
{
  while (len > 0)
    {
      ssize_t w = write (p->fd, s, len);

      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        {
          /* Progress is a courtesy: a terminal that cannot take it gets
             no more of it, and staging goes on.  */
          if (errno != EAGAIN)
            p->on = false;
          return;
        }
      s += w;
      len -= (size_t)w;
    }
}

/* "\r", the line, then whatever clears the rest of the old one.  Only live
   lines count against the interval: a final line is one per repository.  */
static void
draw (struct sp_progress *p, bool final, uint64_t now)
{
  char line[SP_PROGRESS_LINE_MAX];
  char out[2 * SP_PROGRESS_LINE_MAX + 8];
  size_t len = sp_progress_format (p, final, now, line);
  size_t at = 0;

  /* A live line must not wrap, or "\r" would return to its last row only.  */
  if (!final && p->columns > 1 && len >= p->columns)
    len = p->columns - 1;
  out[at++] = '\r';
  memcpy (out + at, line, len);
  at += len;
  if (p->clear_eol)
    {
      memcpy (out + at, CLEAR_EOL, strlen (CLEAR_EOL));
      at += strlen (CLEAR_EOL);
    }
  else
    for (size_t i = len; i < p->shown; i++)
      out[at++] = ' ';
  if (final)
    out[at++] = '\n';
  emit (p, out, at);
  p->shown = final ? 0 : len;
  if (!final)
    {
      p->last_draw_ns = now;
      p->ever_drawn = true;
    }
}

void
sp_progress_tick (struct sp_progress *p)
{
  uint64_t now;

  if (p == NULL || !p->on)
    return;
  now = p->clock ();
  if (p->ever_drawn && now - p->last_draw_ns < p->interval_ns)
    return;
  draw (p, false, now);
}

/* What the final line reports, taken from the phase that counted it.  */
static void
keep (struct sp_progress *p)
{
  if (p->phase == NULL)
    return;
  if (p->unit == SP_PROGRESS_TREE)
    {
      p->files = p->count;
      p->file_bytes = p->bytes;
    }
  else if (p->unit == SP_PROGRESS_DOWNLOAD)
    p->downloaded = p->bytes;
}

static bool
plain_name (const char *name)
{
  size_t len = strnlen (name, SP_REPO_MAX_BYTES + 1);

  if (len > SP_REPO_MAX_BYTES)
    return false;
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)name[i] <= 0x20 || (unsigned char)name[i] >= 0x7f || name[i] == '`' || name[i] == '\\')
      return false;
  return true;
}

void
sp_progress_repo (struct sp_progress *p, const char *repo)
{
  if (p == NULL)
    return;
  /* The configured name is checked already (sp_repo_name_check): it is
     shown whole; anything else would be quoted.  */
  if (plain_name (repo))
    memcpy (p->repo, repo, strlen (repo) + 1);
  else
    sp_quote_name (repo, p->repo);
  p->phase = NULL;
  p->count = p->bytes = p->total = 0;
  p->files = p->file_bytes = p->downloaded = 0;
  p->started_ns = p->on ? p->clock () : 0;
}

void
sp_progress_phase (struct sp_progress *p, const char *phase, enum sp_progress_unit unit, uint64_t total)
{
  if (p == NULL)
    return;
  keep (p);
  p->phase = phase;
  p->unit = unit;
  p->count = p->bytes = 0;
  p->total = total;
  /* A step counts nothing, so no later count would draw it: without this,
     the last phase's line would stand through the whole step.  */
  if (unit == SP_PROGRESS_STEP && p->on)
    draw (p, false, p->clock ());
  else
    sp_progress_tick (p);
}

void
sp_progress_count_file (void *ctx, uint64_t bytes)
{
  sp_progress_add (ctx, 1, bytes);
}

void
sp_progress_stop_on (struct sp_progress *p, const volatile sig_atomic_t *flag)
{
  if (p != NULL)
    p->stop = flag;
}

const char *
sp_progress_signal_name (int sig, char buf[SP_PROGRESS_SIGNAL_NAME_MAX])
{
  switch (sig)
    {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      snprintf (buf, SP_PROGRESS_SIGNAL_NAME_MAX, "signal %d", sig);
      return buf;
    }
}

int
sp_progress_check (const struct sp_progress *p, sp_error_t *err)
{
  char name[SP_PROGRESS_SIGNAL_NAME_MAX];
  int sig = sp_progress_stopped (p);

  if (sig == 0)
    return 0;
  return sp_make_error (err, 0, "interrupted by %s", sp_progress_signal_name (sig, name));
}

void
sp_progress_done (struct sp_progress *p)
{
  if (p == NULL)
    return;
  keep (p);
  p->phase = NULL;
  if (p->on)
    draw (p, true, p->clock ());
}

void
sp_progress_clear (struct sp_progress *p)
{
  char out[SP_PROGRESS_LINE_MAX + 8];
  size_t at = 0;

  if (p == NULL || !p->on || p->shown == 0)
    return;
  out[at++] = '\r';
  if (p->clear_eol)
    {
      memcpy (out + at, CLEAR_EOL, strlen (CLEAR_EOL));
      at += strlen (CLEAR_EOL);
    }
  else
    {
      memset (out + at, ' ', p->shown);
      at += p->shown;
      out[at++] = '\r';
    }
  emit (p, out, at);
  p->shown = 0;
}
