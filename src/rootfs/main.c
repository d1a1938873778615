/* sealed-probe-rootfs: builds and verifies the probe root filesystem
   (docs/rootfs.md).  A thin front on the rootfs modules, with one function
   per verb, as crun's.  Only this file prints.  */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <archive.h>

#include "build_commit.h"
#include "build_config.h"

#include "base/error.h"
#include "rootfs/verify.h"

#include "rootfs/build.h"
#include "rootfs/help.h"

#define PROGRAM "sealed-probe-rootfs"

#define EXIT_USAGE 2

static void
usage (FILE *out)
{
  fprintf (out, "usage: " PROGRAM " build [--lock FILE] [--no-pyc] --debs DIR --out DIR\n"
                "       " PROGRAM " verify DIR\n"
                "       " PROGRAM " --version | -V | --help | -h\n"
                "\n"
                "build   extracts the packages pinned in FILE (default " SP_DEFAULT_LOCK ")\n"
                "        from the .debs in DIR into the new directory --out (OUT/root and\n"
                "        OUT/digest), compiles its stdlib into unchecked-hash pycs (not\n"
                "        with --no-pyc) and prints the digest\n"
                "verify  checks that DIR/root is read-only and matches DIR/digest, and prints it\n"
                "\n"
                "See sealed-probe-rootfs(8).\n");
}

/* A command's --help: the usage, then its options with their meanings and
   defaults, from its man page section (help.h).  */
static int
command_help (const char *command)
{
  const char *options = sp_rootfs_help_options (command);

  usage (stdout);
  printf ("\n%s options:\n%s  --help, -h\n        Print this help, and exit 0.\n", command,
          options ? options : "");
  return EXIT_SUCCESS;
}

static int
fail (const char *verb, sp_error_t *err)
{
  fprintf (stderr, PROGRAM ": %s: %s\n", verb, sp_error_message (*err));
  sp_error_release (err);
  return EXIT_FAILURE;
}

static int
cmd_build (int argc, char **argv)
{
  static const struct option options[] = {
    { "lock", required_argument, NULL, 'l' },
    { "debs", required_argument, NULL, 'd' },
    { "out", required_argument, NULL, 'o' },
    { "no-pyc", no_argument, NULL, 'n' }, /* leave the stdlib uncompiled */
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *lock = NULL, *debs = NULL, *out = NULL;
  char digest[SP_DIGEST_TEXT_SIZE];
  unsigned flags = 0;
  sp_error_t err = NULL;
  int c;

  while ((c = getopt_long (argc, argv, "+", options, NULL)) != -1)
    switch (c)
      {
      case 'l':
        lock = optarg;
        break;
      case 'd':
        debs = optarg;
        break;
      case 'o':
        out = optarg;
        break;
      case 'n':
        flags |= SP_ROOTFS_BUILD_NO_PYC;
        break;
      case 'h':
        return command_help ("build");
      default:
        usage (stderr);
        return EXIT_USAGE;
      }
  if (optind != argc || debs == NULL || out == NULL)
    {
      fprintf (stderr, PROGRAM ": build: needs --debs and --out, and nothing else\n");
      usage (stderr);
      return EXIT_USAGE;
    }
  /* The lock this build installs, so that an installed builder needs no
     source tree.  */
  if (lock == NULL)
    lock = SP_DEFAULT_LOCK;
  /* Files the builder creates get exactly the modes it asks for.  */
  umask (022);
  if (sp_rootfs_build (lock, debs, out, flags, digest, &err) < 0)
    return fail ("build", &err);
  printf ("%s\n", digest);
  return EXIT_SUCCESS;
}

static int
cmd_verify (int argc, char **argv)
{
  struct sp_rootfs_info info;
  sp_error_t err = NULL;

  if (argc == 2 && (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0))
    return command_help ("verify");
  if (argc != 2 || argv[1][0] == '-')
    {
      fprintf (stderr, PROGRAM ": verify: needs exactly one DIR\n");
      usage (stderr);
      return EXIT_USAGE;
    }
  if (sp_rootfs_verify (argv[1], &info, &err) < 0)
    return fail ("verify", &err);
  printf ("%s\n", info.digest);
  sp_rootfs_info_release (&info);
  return EXIT_SUCCESS;
}

static const struct
{
  const char *name;
  int (*run) (int argc, char **argv);
} commands[] = {
  { "build", cmd_build },
  { "verify", cmd_verify },
};

/* The version, the commit, the lock a build reads by default, and the
   libarchive that extracts the packages.  */
static int
version (void)
{
  printf (PROGRAM " %s\ncommit: %s\nlock: %s\nlibraries: %s\n", PACKAGE_VERSION, SP_BUILD_COMMIT,
          SP_DEFAULT_LOCK, archive_version_string ());
  return fflush (stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int
main (int argc, char **argv)
{
  if (argc >= 2 && (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0))
    {
      usage (stdout);
      return EXIT_SUCCESS;
    }
  if (argc == 2 && (strcmp (argv[1], "--version") == 0 || strcmp (argv[1], "-V") == 0))
    return version ();
  for (size_t i = 0; argc >= 2 && i < sizeof (commands) / sizeof (commands[0]); i++)
    if (strcmp (argv[1], commands[i].name) == 0)
      return commands[i].run (argc - 1, argv + 1);
  usage (stderr);
  return EXIT_USAGE;
}
