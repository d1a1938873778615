/* See src/os/log.h.  */
#define _GNU_SOURCE
#include "os/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* A longer line is written in pieces, still under stderr's lock.  */
#define SP_LOG_LINE_BYTES 4096

static bool to_journal;

void
sp_log_init (void)
{
  const char *stream = getenv ("JOURNAL_STREAM");
  uintmax_t dev, ino;
  struct stat st;
  char tail;

  /* systemd writes the two numbers in decimal; anything else is not its.  */
  to_journal = stream != NULL && sscanf (stream, "%ju:%ju%c", &dev, &ino, &tail) == 2
               && fstat (STDERR_FILENO, &st) == 0 && (uintmax_t)st.st_dev == dev
               && (uintmax_t)st.st_ino == ino;
}

bool
sp_log_to_journal (void)
{
  return to_journal;
}

void
sp_vlog (enum sp_log_priority priority, const char *fmt, va_list ap)
{
  char line[SP_LOG_LINE_BYTES];
  int head = to_journal ? snprintf (line, sizeof (line), "<%d>", (int)priority) : 0;
  va_list again;
  int n;

  /* One write when the line fits, so that nothing else on fd 2 cuts it.  */
  va_copy (again, ap);
  n = vsnprintf (line + head, sizeof (line) - (size_t)head - 1, fmt, again);
  va_end (again);
  flockfile (stderr);
  if (n >= 0 && (size_t)(head + n) < sizeof (line) - 1)
    {
      line[head + n] = '\n';
      fwrite (line, 1, (size_t)(head + n) + 1, stderr);
    }
  else
    {
      if (to_journal)
        fprintf (stderr, "<%d>", (int)priority);
      vfprintf (stderr, fmt, ap);
      fputc ('\n', stderr);
    }
  funlockfile (stderr);
}

void
sp_log (enum sp_log_priority priority, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  sp_vlog (priority, fmt, ap);
  va_end (ap);
}
