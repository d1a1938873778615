/* One function per sealed-probe-proxy verb, one file per verb, as crun does.
   A verb returns the process exit status: 0 success, 1 failure, 2 bad usage.  */
#ifndef SP_PROXY_VERBS_H
#define SP_PROXY_VERBS_H

#define SP_EXIT_OK    0
#define SP_EXIT_FAIL  1
#define SP_EXIT_USAGE 2

int sp_verb_config (int argc, char **argv);
int sp_verb_bundle (int argc, char **argv);
int sp_verb_stage (int argc, char **argv);
int sp_verb_unstage (int argc, char **argv);
int sp_verb_serve (int argc, char **argv);
int sp_verb_check (int argc, char **argv);
int sp_verb_skill (int argc, char **argv);
int sp_verb_status (int argc, char **argv);
int sp_verb_version (int argc, char **argv);
int sp_verb_doctor (int argc, char **argv);

struct sp_config;

/* Loads the config at path ("-" for stdin) for a verb that acts on it, which
   needs the block enabled.  On failure, reports it (naming path and the key)
   and returns -1.  */
int sp_verb_load_enabled_config (const char *verb, const char *path, struct sp_config **config);

/* Prints "sealed-probe-proxy: <verb>: <message>" on stderr.  Only main and the
   verbs print.  */
void sp_verb_report (const char *verb, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

#endif
