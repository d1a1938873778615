/* sealed-probe-proxy: dispatches verbs from a table, one file per verb.  */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "os/log.h"

#include "build_config.h"
#include "proxy/options.h"
#include "proxy/verbs.h"

struct verb
{
  const char *name;
  int (*run) (int argc, char **argv);
  const char *summary;
};

static const struct verb verbs[] = {
  { "stage", sp_verb_stage, "make one immutable, sanitized seed per configured repository, then exit" },
  { "unstage", sp_verb_unstage, "unmount and remove every staged seed" },
  { "serve", sp_verb_serve, "run the proxy: preflight, then answer probes on the socket until SIGTERM" },
  { "check", sp_verb_check,
    "run serve's whole preflight, canary included, print what it verified, and exit" },
  { "config", sp_verb_config, "validate a sealedProbes config and print the effective settings" },
  { "bundle", sp_verb_bundle, "write the OCI bundle serve would run (--dry-run), and start nothing" },
  { "skill", sp_verb_skill, "write the agent-facing SKILL.md for the configured repositories" },
  { "status", sp_verb_status,
    "show a run's budget, outcomes and recent failures from the ledger and audit log" },
  { "doctor", sp_verb_doctor,
    "from the agent's side, say why a client cannot reach its proxy, and what to do" },
  { "version", sp_verb_version,
    "print the version, the commit, what each backend accepts and the libraries" },
  { "help", NULL, "print this list, or with a VERB that verb's options" },
};

void
sp_verb_report (const char *verb, const char *fmt, ...)
{
  cleanup_free char *msg = NULL;
  va_list ap;
  int n;

  va_start (ap, fmt);
  n = vasprintf (&msg, fmt, ap);
  va_end (ap);
  if (n < 0)
    msg = NULL;
  sp_log (SP_LOG_ERR, "sealed-probe-proxy: %s: %s", verb, msg != NULL ? msg : "(out of memory)");
}

static void
usage (FILE *out)
{
  fprintf (out, "usage: sealed-probe-proxy VERB [OPTIONS]\n"
                "       sealed-probe-proxy --version | -V | --help | -h\n\nverbs:\n");
  for (size_t i = 0; i < sizeof (verbs) / sizeof (verbs[0]); i++)
    fprintf (out, "  %-10s %s\n", verbs[i].name, verbs[i].summary);
  fprintf (out, "\n`sealed-probe-proxy VERB --help` prints a verb's options; see sealed-probe-proxy(8)\n");
}

#define HELP_USAGE "usage: sealed-probe-proxy help [VERB]"

/* help [VERB]: the verb list, or VERB --help, so that the two cannot say
   different things.  */
static int
help (int argc, char **argv)
{
  char *verb_help[] = { NULL, (char *)"--help", NULL };

  if (argc == 1)
    {
      usage (stdout);
      return SP_EXIT_OK;
    }
  if (argc == 2 && (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0))
    {
      sp_options_print_help ("help", HELP_USAGE);
      return SP_EXIT_OK;
    }
  if (argv[1][0] == '-')
    return sp_options_usage_error ("help", HELP_USAGE, "unknown option `%s`", argv[1]);
  for (size_t i = 0; argc == 2 && i < sizeof (verbs) / sizeof (verbs[0]); i++)
    if (verbs[i].run != NULL && strcmp (argv[1], verbs[i].name) == 0)
      {
        verb_help[0] = argv[1];
        return verbs[i].run (2, verb_help);
      }
  if (argc > 2)
    return sp_options_usage_error ("help", HELP_USAGE, "takes one VERB at most");
  return sp_options_usage_error ("help", HELP_USAGE, "`%s` is no verb", argv[1]);
}

int
main (int argc, char **argv)
{
  /* Before any verb wipes the environment (serve does at once).  */
  sp_log_init ();
  if (argc < 2)
    {
      usage (stderr);
      return SP_EXIT_USAGE;
    }
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0)
    {
      usage (stdout);
      return SP_EXIT_OK;
    }
  if (strcmp (argv[1], "--version") == 0 || strcmp (argv[1], "-V") == 0)
    return sp_verb_version (argc - 1, argv + 1);
  if (strcmp (argv[1], "help") == 0)
    return help (argc - 1, argv + 1);
  for (size_t i = 0; i < sizeof (verbs) / sizeof (verbs[0]); i++)
    if (verbs[i].run != NULL && strcmp (argv[1], verbs[i].name) == 0)
      return verbs[i].run (argc - 1, argv + 1);

  fprintf (stderr, "sealed-probe-proxy: unknown verb `%s`\n", argv[1]);
  usage (stderr);
  return SP_EXIT_USAGE;
}
