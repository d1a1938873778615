/* Progress of long staging work, for an operator at a terminal: per
   repository, one line with the phase and how far along it is (files and
   bytes, objects, or bytes of a download's total when the server sent one),
   redrawn in place ("\r", then the line, then clear to its end) at most once
   every SP_PROGRESS_INTERVAL_MS, and a final line per repository (which
   does not count against the interval).  A phase that counts nothing is
   drawn as it begins, so that no line stays on the terminal through work it
   does not describe.  unstage and a failed stage's removal use the same
   line, with the run (`seeds/RUN`) where the repository would be.

   Off (the fd is not a terminal), nothing is ever written: staging's output
   is then exactly what it is without this module.

   The work being measured only adds to counters (sp_progress_add): the
   clock is read there only when the renderer is on, and a line is drawn only
   once the interval has passed, so the copy is not slowed.

   A line holds only the repository's configured name (the operator's own
   `owner/repo`, shown through sp_quote_name all the same), phase words and
   numbers: never a name or path from the repository, a URL or a secret.
   Callers pass phase words that are string literals.  See docs/staging.md,
   "Progress".

   The same counters are where long work asks whether to go on: a caller
   that catches a signal points the meter at its flag (sp_progress_stop_on),
   and the work checks it where it counts (sp_progress_check), so that an
   interrupted stage stops within one file, block or object and unwinds
   through its ordinary failure path.  This holds whether or not the line is
   drawn.  */
#ifndef SP_OS_PROGRESS_H
#define SP_OS_PROGRESS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/quote.h"

/* What a phase counts, and so how its line reads.  */
enum sp_progress_unit
{
  SP_PROGRESS_STEP,     /* the phase word alone: "acme/big: write the index" */
  SP_PROGRESS_FILES,    /* "N files, B" */
  SP_PROGRESS_TREE,     /* as FILES, and these are the seed's files: the final line reports them */
  SP_PROGRESS_BYTES,    /* "B" */
  SP_PROGRESS_DOWNLOAD, /* "B of T (P%)", or "B" with no total; the final line reports B */
  SP_PROGRESS_OBJECTS,  /* "N of T objects", or "N objects" with no total */
};
/* SP_PROGRESS_STEP counts nothing, so nothing would redraw it later: its line
   is drawn at once, interval or not (at most a few per repository).  */

/* Enough for any signal's name: "signal " and a number.  */
#define SP_PROGRESS_SIGNAL_NAME_MAX 24

/* Enough for any line: the quoted name, a phase word and the numbers.  */
#define SP_PROGRESS_LINE_MAX (SP_QUOTE_BUF_SIZE + 256)

struct sp_progress
{
  /* The current phase's counters: what the work adds to.  */
  uint64_t count; /* files or objects */
  uint64_t bytes;
  uint64_t total; /* bytes (DOWNLOAD) or objects (OBJECTS) expected; 0: unknown */

  /* A signal handler's flag: the number of the signal that asked the work
     to stop, or 0.  NULL: the work never stops.  */
  const volatile sig_atomic_t *stop;

  /* The renderer's own: set by sp_progress_init*, then private.  */
  bool on;
  bool clear_eol; /* "\033[K" clears a line; false: spaces over the last one */
  int fd;
  unsigned columns; /* the terminal's width; 0: unknown, never cut */
  uint64_t (*clock) (void);
  uint64_t interval_ns;
  uint64_t last_draw_ns;
  bool ever_drawn;
  size_t shown; /* bytes of the live line on the terminal; 0: none */
  const char *phase;
  enum sp_progress_unit unit;
  char repo[SP_QUOTE_BUF_SIZE];
  uint64_t started_ns;
  uint64_t files, file_bytes, downloaded; /* for the final line */
};

/* On when fd is a terminal; its width from TIOCGWINSZ; "\033[K" unless TERM
   is unset or "dumb".  */
void sp_progress_init (struct sp_progress *p, int fd);

/* For tests: on or off as given, with a clock of theirs (monotonic ns).  */
void sp_progress_init_with (struct sp_progress *p, int fd, bool on, bool clear_eol, unsigned columns,
                            uint64_t (*clock) (void));

/* Points the work at flag, which a signal handler sets to the signal's
   number: from then on sp_progress_check fails once it is set.  */
void sp_progress_stop_on (struct sp_progress *p, const volatile sig_atomic_t *flag);

/* The signal that asked the work to stop, or 0.  p may be NULL.  */
static inline int
sp_progress_stopped (const struct sp_progress *p)
{
  return p != NULL && p->stop != NULL ? (int)*p->stop : 0;
}

/* Where work can stop: 0 to go on, or -1 with *err saying which signal
   interrupted it ("interrupted by SIGINT").  p may be NULL.  */
int sp_progress_check (const struct sp_progress *p, sp_error_t *err);

/* "SIGINT", "SIGTERM", "SIGHUP", or "signal N".  */
const char *sp_progress_signal_name (int sig, char buf[SP_PROGRESS_SIGNAL_NAME_MAX]);

/* A repository begins: its name, and the time the final line measures from.  */
void sp_progress_repo (struct sp_progress *p, const char *repo);

/* A phase begins: its word (a string literal), what it counts, and the total
   expected, 0 when unknown.  The counters start from zero.  Drawn when the
   interval has passed.  */
void sp_progress_phase (struct sp_progress *p, const char *phase, enum sp_progress_unit unit, uint64_t total);

/* Draws the line if the renderer is on and the interval has passed.  */
void sp_progress_tick (struct sp_progress *p);

/* The hot path: adds to the current phase's counters.  p may be NULL.  */
static inline void
sp_progress_add (struct sp_progress *p, uint64_t count, uint64_t bytes)
{
  if (p == NULL)
    return;
  p->count += count;
  p->bytes += bytes;
  if (p->on)
    sp_progress_tick (p);
}

/* Sets the counters outright, for work that reports its own totals so far
   (libcurl's transfer, libgit2's pack builder).  p may be NULL.  */
static inline void
sp_progress_set (struct sp_progress *p, uint64_t count, uint64_t bytes, uint64_t total)
{
  if (p == NULL)
    return;
  p->count = count;
  p->bytes = bytes;
  p->total = total;
  if (p->on)
    sp_progress_tick (p);
}

/* For a removal's counting callback (sp_tree_remove_counted): one file more,
   of bytes bytes.  ctx is the struct sp_progress, or NULL.  */
void sp_progress_count_file (void *ctx, uint64_t bytes);

/* The repository is done: its final line, ended by a newline, over the live
   one: "acme/big: staged 100000 files, 1.2 MiB in 3.4 s", with ", D
   downloaded" for a download.  */
void sp_progress_done (struct sp_progress *p);

/* Removes the live line, if any, so that what is printed next (an error, the
   summary on stdout) starts on a clean line.  */
void sp_progress_clear (struct sp_progress *p);

/* Formatting, pure, tenths rounded down: "0 B", "1023 B", "1.0 KiB",
   "12.3 MiB", ... "15.9 EiB"; "0.4 s", "59.9 s", "1 min 0 s", "61 min 5 s".
   Return buf.  */
#define SP_PROGRESS_NUMBER_MAX 32
const char *sp_progress_bytes (uint64_t bytes, char buf[SP_PROGRESS_NUMBER_MAX]);
const char *sp_progress_duration (uint64_t ns, char buf[SP_PROGRESS_NUMBER_MAX]);

/* The live line as it would be drawn now (the final one when final), without
   "\r", clearing or newline, and not cut to the terminal's width.  Returns
   its length.  */
size_t sp_progress_format (const struct sp_progress *p, bool final, uint64_t now_ns,
                           char buf[SP_PROGRESS_LINE_MAX]);

#endif
