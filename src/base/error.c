/* Error values: see src/base/error.h and docs/error-handling.md.  */
#define _GNU_SOURCE
#include "base/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
sp_make_error (sp_error_t *err, int status, const char *fmt, ...)
{
  char *msg = NULL;
  va_list ap;
  int ret;

  va_start (ap, fmt);
  ret = vasprintf (&msg, fmt, ap);
  va_end (ap);
  if (ret < 0)
    msg = NULL;

  if (msg && status != 0)
    {
      char *with_errno = NULL;
      if (asprintf (&with_errno, "%s: %s", msg, strerror (status)) < 0)
        with_errno = NULL;
      free (msg);
      msg = with_errno;
    }

  *err = calloc (1, sizeof (**err));
  if (*err == NULL)
    {
      free (msg);
      return -1;
    }
  (*err)->status = status;
  (*err)->msg = msg;
  return -1;
}

/* Joins the text fmt makes to err's message, before it ("text: message")
   or after it ("message: text").  Returns -1, whatever happens.  */
static int join_message (sp_error_t *err, bool after, const char *fmt, va_list ap)
    __attribute__ ((format (printf, 3, 0)));

static int
join_message (sp_error_t *err, bool after, const char *fmt, va_list ap)
{
  char *text = NULL;
  char *joined = NULL;

  if (err == NULL || *err == NULL || vasprintf (&text, fmt, ap) < 0)
    return -1;
  if (asprintf (&joined, "%s: %s", after ? sp_error_message (*err) : text,
                after ? text : sp_error_message (*err))
      >= 0)
    {
      free ((*err)->msg);
      (*err)->msg = joined;
    }
  free (text);
  return -1;
}

int
sp_error_wrap (sp_error_t *err, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  join_message (err, false, fmt, ap);
  va_end (ap);
  return -1;
}

int
sp_error_hint (sp_error_t *err, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  join_message (err, true, fmt, ap);
  va_end (ap);
  return -1;
}

int
sp_error_set_cause (sp_error_t *err, int cause)
{
  if (err != NULL && *err != NULL && (*err)->cause == 0)
    (*err)->cause = cause;
  return -1;
}

int
sp_error_cause (const sp_error_t err)
{
  return err != NULL ? err->cause : 0;
}

const char *
sp_error_message (const sp_error_t err)
{
  if (err == NULL)
    return "unknown error";
  if (err->msg == NULL)
    return "out of memory while reporting an error";
  return err->msg;
}

void
sp_error_release (sp_error_t *err)
{
  if (err == NULL || *err == NULL)
    return;
  free ((*err)->msg);
  free (*err);
  *err = NULL;
}
