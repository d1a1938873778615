/* Taking a credential out of the environment, for staging only: the value is
   copied, then wiped in place and unset, so that no child and no reader of
   /proc/PID/environ (which shows the environment as it was at exec) ever
   sees it again.  */
#ifndef SP_STAGE_SECRET_ENV_H
#define SP_STAGE_SECRET_ENV_H

/* Returns a copy of the value of the first of names[] (NULL-terminated) that
   is set and non-empty, or NULL; *which (if not NULL) names it.  Every one of
   names[] is wiped and unset either way.  The caller wipes and frees the copy
   with sp_secret_free.  */
char *sp_secret_env_take (const char *const *names, const char **which);

/* Wipes every string of the environment in place (names too), then empties
   it: serve holds no credential of any name, and its children inherit
   nothing.  */
void sp_env_scrub_all (void);

/* explicit_bzero, then free.  */
void sp_secret_free (char *secret);

static inline void
sp_secret_freep (char **secret)
{
  sp_secret_free (*secret);
  *secret = 0;
}
#define cleanup_secret __attribute__ ((cleanup (sp_secret_freep)))

#endif
