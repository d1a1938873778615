/* Errors are values: a failing function fills *err and returns a negative value
   (or NULL).  Only main() prints.  See docs/error-handling.md.  */
#ifndef SP_BASE_ERROR_H
#define SP_BASE_ERROR_H

struct sp_error_s
{
  int status; /* errno, or 0 when the failure is not a syscall's */
  char *msg;  /* NULL only when allocating the message failed */
  int cause;  /* what kind of failure, for a caller that tells kinds apart; 0: not said */
};
typedef struct sp_error_s *sp_error_t;

/* Sets *err (which must be NULL) and returns -1.  A non-zero status appends
   strerror(status) to the message, as crun's make_error does.  */
int sp_make_error (sp_error_t *err, int status, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

/* Prefixes the message of an existing error with context: "context: message".
   Returns -1 so that callers can write `return sp_error_wrap (err, ...)`.  */
int sp_error_wrap (sp_error_t *err, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* Appends what to do to the message of an existing error: "message: hint",
   so that the hint stays last whatever context is wrapped around it later
   ("what is wrong: what to do").  Returns -1.  */
int sp_error_hint (sp_error_t *err, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* Says what kind of failure *err is, for a caller that classifies it as a
   value (enum sp_cause, base/cause.h) rather than by its words.  The
   innermost site that knows wins: a cause already set stays.  Returns -1.  */
int sp_error_set_cause (sp_error_t *err, int cause);
/* The cause set, or 0.  */
int sp_error_cause (const sp_error_t err);

/* The message, never NULL.  */
const char *sp_error_message (const sp_error_t err);

void sp_error_release (sp_error_t *err);

static inline void
sp_error_cleanup (sp_error_t *err)
{
  sp_error_release (err);
}
#define cleanup_error __attribute__ ((cleanup (sp_error_cleanup)))

#endif
