/* What the programs say on stderr, each line with its priority
   (docs/operations.md, "The journal").  Under systemd, stderr is a stream
   to the journal, which reads a leading `<N>` as the line's priority
   (sd-daemon(3)): a line is prefixed only when stderr is that stream, as
   the JOURNAL_STREAM variable tells (systemd.exec(5)), so that a terminal,
   a pipe or a file gets the same lines without it.  */
#ifndef SP_OS_LOG_H
#define SP_OS_LOG_H

#include <stdarg.h>
#include <stdbool.h>

/* sd-daemon(3)'s levels, the syslog ones.  */
enum sp_log_priority
{
  SP_LOG_ERR = 3,     /* the verb fails, or serve halts */
  SP_LOG_WARNING = 4, /* something went wrong and serve goes on, or a leftover was removed */
  SP_LOG_NOTICE = 5,  /* a normal but significant change: ready, stopped, a stopping signal */
  SP_LOG_INFO = 6,    /* a routine event worth a line */
  SP_LOG_DEBUG = 7,   /* one line per request */
};

/* Reads JOURNAL_STREAM ("DEVICE:INODE") and compares it with stderr's:
   call before the environment is wiped.  */
void sp_log_init (void);

/* Whether lines carry the `<N>` prefix (stderr is the journal).  */
bool sp_log_to_journal (void);

/* One line on stderr: the prefix when it goes to the journal, then fmt,
   then a newline, written together so that threads never interleave.  */
void sp_log (enum sp_log_priority priority, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
void sp_vlog (enum sp_log_priority priority, const char *fmt, va_list ap)
    __attribute__ ((format (printf, 2, 0)));

#endif
