/* The one option parser the verbs share: `--name VALUE` or `--name=VALUE`,
   flags, and repeatable options.  Every value must be non-empty, and a
   single-value option may be given once.  */
#ifndef SP_PROXY_OPTIONS_H
#define SP_PROXY_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

struct sp_option
{
  const char *name; /* "--config" */
  /* Exactly one of these three says what the option takes.  */
  const char **value; /* one value */
  int *flag;          /* no value: set to 1 */
  struct
  {
    const char **values; /* a repeatable option's values, in order */
    size_t *len;
    size_t max;
  } list;
};

/* Parses argv[1..argc).  Returns 0; -1 after printing the verb's help on
   stdout for --help or -h (the verb then exits 0); or SP_EXIT_USAGE after
   reporting the reason and the usage line on stderr.  */
int sp_options_parse (const char *verb, const char *usage, int argc, char **argv,
                      const struct sp_option *options, size_t n_options);

/* Prints a verb's help on stdout: its usage line, then each option with its
   meaning and default, from the verb's man page section (help.h).  */
void sp_options_print_help (const char *verb, const char *usage);

/* Reports a usage error for verb, prints the usage line, and returns
   SP_EXIT_USAGE.  */
int sp_options_usage_error (const char *verb, const char *usage, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* text as a decimal from 1 to max, with nothing around it (no sign, no
   leading zero, no space); -1 otherwise.  */
int sp_options_decimal (const char *text, unsigned long max, unsigned long *out);

/* A runtime binary's option (--runc, --runsc, --sbx): an absolute path, so
   that no PATH lookup picks the binary.  Returns 0, or SP_EXIT_USAGE after
   reporting, naming the option (never the config's runtime key).  */
int sp_options_binary_path (const char *verb, const char *usage, const char *option, const char *value);

/* --probe-ids BASE (text; NULL: SP_PROBE_ID_BASE_DEFAULT): the first host id
   of the range the probes' identities come from (bundle.h).  Returns 0, or
   SP_EXIT_USAGE after reporting why.  */
int sp_options_probe_ids (const char *verb, const char *usage, const char *text, uint32_t *base);

#endif
